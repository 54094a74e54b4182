"""Hypothesis strategies: padded batches of mixed-size graphs and partial permutations."""
import numpy as np
import torch
from hypothesis import strategies as st


@st.composite
def batch_sizes(draw, max_graphs=4, max_nodes=7):
    """(num_nodes [B], n_max) with n_max >= every size (extra padding allowed)."""
    sizes = draw(st.lists(st.integers(0, max_nodes), min_size=0, max_size=max_graphs))
    n_max = max(sizes, default=0) + draw(st.integers(0, 2))
    return torch.tensor(sizes, dtype=torch.int64), n_max


def partial_permutations(num_nodes: torch.Tensor, P: int, K: int, seed: int, shuffle_padding: bool):
    """[B, P, K] rows: distinct vertices of each graph, -1 elsewhere (maybe interleaved)."""
    rng = np.random.default_rng(seed)
    out = np.full((len(num_nodes), P, K), -1, dtype=np.int64)
    for b, n in enumerate(num_nodes.tolist()):
        for p in range(P):
            take = min(n, K)
            row = np.concatenate([rng.permutation(n)[:take], np.full(K - take, -1)])
            out[b, p] = rng.permutation(row) if shuffle_padding else row
    return torch.from_numpy(out)


@st.composite
def permuted_batches(draw, channels=True, dtype=torch.float64):
    """(dense tensor [B, n, n, C] or [B, n, F], perms [B, P, K], num_nodes)."""
    num_nodes, n_max = draw(batch_sizes())
    P = draw(st.integers(1, 3))
    K = draw(st.integers(0, n_max + 2))
    C = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    perms = partial_permutations(num_nodes, P, K, seed, draw(st.booleans()))
    gen = torch.Generator().manual_seed(seed)
    B = len(num_nodes)
    shape = (B, n_max, n_max, C) if channels else (B, n_max, C)
    return torch.randn(shape, generator=gen, dtype=dtype), perms, num_nodes
