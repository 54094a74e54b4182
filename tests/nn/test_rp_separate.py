"""Separate Relational Pooling (eq. 2): rows and columns of a bipartite tensor relabeled independently."""
import itertools
import math

import pytest
import torch
from torch import nn

from rpfast.nn import AdjCNN, Exact, KAry, Oriented, PiSGD, RelationalPooling, VecMLP, VecRNN


def bipartite_batch(seed=0, B=3, n_r=4, n_c=3, C=2):
    """``[B, n_r, n_c, C]`` random tensors with mixed row / column counts (padding zeroed)."""
    gen = torch.Generator().manual_seed(seed)
    adj = torch.randn(B, n_r, n_c, C, generator=gen, dtype=torch.float64)
    rows = torch.tensor([n_r, n_r - 1, 2][:B])
    cols = torch.tensor([n_c, 2, n_c][:B])
    keep = (torch.arange(n_r).view(1, -1, 1) < rows.view(-1, 1, 1)) & (torch.arange(n_c).view(1, 1, -1) < cols.view(-1, 1, 1))
    return adj * keep.unsqueeze(-1), rows, cols


def shuffle(adj, rows, cols, seed):
    """The same tensors with each matrix's real rows and real columns permuted at random."""
    gen = torch.Generator().manual_seed(seed)
    out = adj.clone()
    for b in range(adj.shape[0]):
        r = torch.randperm(int(rows[b]), generator=gen)
        c = torch.randperm(int(cols[b]), generator=gen)
        out[b, :len(r), :len(c)] = adj[b, r][:, c]
    return out


ENCODERS = [
    lambda: VecMLP((4, 3), 2, 0, 16, 2),
    lambda: VecRNN((4, 3), 2, 0, 8, 2, cell="gru"),
    lambda: AdjCNN((4, 3), 2, 0, 8, 2),
]


@pytest.mark.parametrize("make", ENCODERS)
def test_exact_separate_rp_is_invariant_for_each_encoder(make):
    torch.manual_seed(0)
    f = make().double()
    adj, rows, cols = bipartite_batch()
    rp = RelationalPooling(f, (Exact(4), Exact(3)), mode="separate").eval()
    out = rp(adj, num_nodes=(rows, cols))
    assert out.shape == (3, 2)
    for seed in range(3):
        torch.testing.assert_close(rp(shuffle(adj, rows, cols, seed), num_nodes=(rows, cols)), out, rtol=0, atol=1e-9)
    out.sum().backward()
    assert all(p.grad is not None for p in f.parameters())


def test_separate_rp_is_the_double_sum_of_eq_2():
    adj, rows, cols = bipartite_batch(seed=1, B=1)
    seen = []

    def f(a, x, masks, counts):
        assert x is None and masks[0].shape == (a.shape[0], 4) and masks[1].shape == (a.shape[0], 3)
        seen.append(a)
        return a.reshape(a.shape[0], -1)[:, :5] ** 3

    rp = RelationalPooling(f, (Exact(4), Exact(3)), mode="separate").eval()
    out = rp(adj, num_nodes=(rows, cols))
    terms = [adj[0][list(r)][:, list(c)].reshape(-1)[:5] ** 3
             for r in itertools.permutations(range(4)) for c in itertools.permutations(range(3))]
    torch.testing.assert_close(out[0], torch.stack(terms).mean(dim=0))
    assert seen[0].shape == (24 * 6, 4, 3, 2)


def test_kary_separate_counts_and_sampling():
    adj, rows, cols = bipartite_batch(seed=2, B=1)
    calls = []
    rp = RelationalPooling(lambda a, x: calls.append(a.shape) or a.sum(dim=(1, 2)), (KAry(2), KAry(2)),
                           mode="separate").eval()
    rp(adj, num_nodes=(rows, cols))
    assert calls[0][:3] == (math.perm(4, 2) * math.perm(3, 2), 2, 2)  # k_r = k_c = 2: ordered pairs each side
    gen = torch.Generator().manual_seed(0)
    shapes = []
    sampled = RelationalPooling(lambda a, x: shapes.append(a.shape) or a.sum(dim=(1, 2)), PiSGD(4, train_samples=3),
                                mode="separate", generator=gen).train()
    assert sampled(torch.randn(1, 4, 4, 2, dtype=torch.float64)).shape == (1, 2)  # one strategy, both sides
    assert shapes[0][0] == 3  # pi-SGD pairs sample p of the rows with sample p of the columns
    with pytest.raises(ValueError, match="same train_samples and eval_samples"):
        RelationalPooling(lambda a, x: a, (PiSGD(4, train_samples=2), PiSGD(3)), mode="separate")


def test_separate_mode_errors():
    f = VecMLP((4, 3), 2, 0, 8, 2)
    with pytest.raises(ValueError, match="mode='separate' needs a strategy"):
        RelationalPooling(f, mode="separate")
    with pytest.raises(ValueError, match="does not apply: use Exact, PiSGD or KAry with prune='none'"):
        RelationalPooling(f, Oriented("dfs", 3), mode="separate")
    with pytest.raises(ValueError, match="does not apply"):
        RelationalPooling(f, KAry(2, prune="isolated"), mode="separate")
    with pytest.raises(ValueError, match="mode must be 'joint' or 'separate'"):
        RelationalPooling(f, Exact(3), mode="bipartite")
    adj, rows, cols = bipartite_batch()
    rp = RelationalPooling(f, (Exact(4), Exact(3)), mode="separate")
    with pytest.raises(TypeError, match="no node features"):
        rp(adj, torch.zeros(3, 4, 1))
    with pytest.raises(ValueError, match=r"num_cols\[0\] = 5 exceeds the n = 3"):
        rp(adj, num_nodes=(rows, torch.tensor([5, 1, 1])))
    with pytest.raises(TypeError, match="built for joint RP"):
        VecMLP(3, 2, 0, 8, 2)(adj[:, :3], None, (rows, cols))
    with pytest.raises(TypeError, match="built for separate RP"):
        f(adj, torch.zeros(3, 4, 1), torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="takes no node features"):
        VecMLP((4, 3), 2, 1, 8, 2)
    with pytest.raises(ValueError, match="graph 0 has 4 vertices, more than the max_nodes = 3"):
        RelationalPooling(nn.Identity(), Exact(3), mode="separate")(adj)
