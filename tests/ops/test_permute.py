"""permute_adjacency / permute_nodes against torch indexing: values, gradients, errors."""
import pytest
import torch
from hypothesis import given, settings

from tests.helpers.assertions import assert_backward_matches, assert_thread_invariant
from rpfast.ops import permute_adjacency, permute_nodes, random_permutations
from tests.helpers.reference import permute_adjacency_reference, permute_nodes_reference
from tests.helpers.strategies import permuted_batches


@settings(max_examples=150, deadline=None)
@given(permuted_batches(channels=True))
def test_permute_adjacency_matches_indexing(case):
    adj, perms, num_nodes = case
    out = permute_adjacency(adj, perms, num_nodes=num_nodes)
    assert out.shape == (adj.shape[0], perms.shape[1], perms.shape[2], perms.shape[2], adj.shape[3])
    assert torch.equal(out, permute_adjacency_reference(adj, perms))


@settings(max_examples=150, deadline=None)
@given(permuted_batches(channels=False))
def test_permute_nodes_matches_indexing(case):
    x, perms, num_nodes = case
    assert torch.equal(permute_nodes(x, perms, num_nodes=num_nodes), permute_nodes_reference(x, perms))


@settings(max_examples=60, deadline=None)
@given(permuted_batches(channels=True))
def test_permute_adjacency_gradient_matches_indexing(case):
    adj, perms, _ = case
    a1 = adj.clone().requires_grad_()
    a2 = adj.clone().requires_grad_()
    g = torch.randn(adj.shape[0], perms.shape[1], perms.shape[2], perms.shape[2], adj.shape[3], dtype=adj.dtype)
    assert_backward_matches(permute_adjacency(a1, perms), permute_adjacency_reference(a2, perms), g, [(a1, a2)],
                            rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(permuted_batches(channels=False))
def test_permute_nodes_gradient_matches_indexing(case):
    x, perms, _ = case
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    g = torch.randn(x.shape[0], perms.shape[1], perms.shape[2], x.shape[2], dtype=x.dtype)
    assert_backward_matches(permute_nodes(x1, perms), permute_nodes_reference(x2, perms), g, [(x1, x2)],
                            rtol=1e-12, atol=1e-12)


def test_gradcheck_float64():
    gen = torch.Generator().manual_seed(0)
    num_nodes = torch.tensor([4, 2, 0])
    perms = random_permutations(num_nodes, num_samples=3, k=3, generator=gen)
    adj = torch.randn(3, 4, 4, 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: permute_adjacency(a, perms), (adj,))
    assert torch.autograd.gradcheck(lambda v: permute_nodes(v, perms), (x,))


def test_without_channel_dimension_and_float32():
    gen = torch.Generator().manual_seed(1)
    adj = torch.rand(2, 5, 5, generator=gen)
    x = torch.rand(2, 5, generator=gen)
    perms = random_permutations([5, 3], num_samples=2, generator=gen)
    out = permute_adjacency(adj, perms)
    assert out.shape == (2, 2, 5, 5) and out.dtype == torch.float32
    assert torch.equal(out, permute_adjacency_reference(adj.unsqueeze(-1), perms).squeeze(-1))
    assert torch.equal(permute_nodes(x, perms), permute_nodes_reference(x.unsqueeze(-1), perms).squeeze(-1))


def test_full_permutation_is_a_relabeling():
    """K = n with a full permutation gives P A P^T for the permutation matrix P."""
    gen = torch.Generator().manual_seed(2)
    adj = (torch.rand(1, 6, 6, generator=gen) > 0.5).double()
    perms = random_permutations([6], generator=gen)
    Pm = torch.eye(6, dtype=torch.float64)[perms[0, 0]]
    torch.testing.assert_close(permute_adjacency(adj, perms)[0, 0], Pm @ adj[0] @ Pm.T)


@pytest.mark.parametrize("op", ["adjacency", "nodes"])
def test_bitwise_identical_across_thread_counts(op):
    gen = torch.Generator().manual_seed(3)
    num_nodes = torch.randint(1, 40, (64,), generator=gen)
    perms = random_permutations(num_nodes, num_samples=4, k=24, generator=gen)
    data = torch.randn((64, 40, 40, 3) if op == "adjacency" else (64, 40, 8), generator=gen, requires_grad=True)
    fn = permute_adjacency if op == "adjacency" else permute_nodes

    def run():
        data.grad = None
        out = fn(data, perms)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        return out, data.grad

    assert_thread_invariant(run)


# ------------------------------------------------------------------------------ errors
ADJ = torch.zeros(2, 4, 4, 1)
GOOD = torch.tensor([[[0, 1, 2, 3]], [[3, 2, -1, 0]]])


@pytest.mark.parametrize(
    "adj, perms, kwargs, error, match",
    [
        (ADJ, torch.tensor([[[0, 1, 4, 3]], [[0, 1, 2, 3]]]), {}, IndexError, r"perms\[0, 0, 2\] = 4"),
        (ADJ, torch.tensor([[[0, 1, 2, 3]], [[0, -2, 2, 3]]]), {}, IndexError, r"perms\[1, 0, 1\] = -2"),
        (ADJ, torch.tensor([[[0, 1, 2, 3]], [[1, 2, 1, -1]]]), {}, ValueError, r"perms\[1, 0, 2\] repeats vertex 1"),
        (ADJ, GOOD, {"num_nodes": torch.tensor([4, 3])}, IndexError, r"perms\[1, 0, 0\] = 3 .* 3 nodes"),
        (ADJ, GOOD.float(), {}, TypeError, "perms must be an int64"),
        (ADJ.int(), GOOD, {}, TypeError, "adj must be float32 or float64"),
        (torch.zeros(2, 4, 3, 1), GOOD, {}, ValueError, "adj must be square"),
        (torch.zeros(2, 4), GOOD, {}, ValueError, r"adj must have shape \[B, n, n, C\]"),
        (ADJ, GOOD[:1], {}, ValueError, "perms has 1 graphs"),
        (ADJ, GOOD[0], {}, ValueError, r"perms must have shape \[B, P, K\]"),
        (ADJ, GOOD, {"num_nodes": torch.tensor([4])}, ValueError, "num_nodes has 1 entries"),
        ("adj", GOOD, {}, TypeError, "adj must be a torch.Tensor"),
    ],
)
def test_permute_adjacency_rejects_bad_input(adj, perms, kwargs, error, match):
    with pytest.raises(error, match=match):
        permute_adjacency(adj, perms, **kwargs)


def test_permute_nodes_rejects_bad_input():
    with pytest.raises(IndexError, match=r"perms\[0, 0, 1\] = 9"):
        permute_nodes(torch.zeros(1, 3, 2), torch.tensor([[[0, 9]]]))
    with pytest.raises(ValueError, match="repeats vertex 0"):
        permute_nodes(torch.zeros(1, 3, 2), torch.tensor([[[0, 0]]]))
    with pytest.raises(TypeError, match="x must be float32 or float64"):
        permute_nodes(torch.zeros(1, 3, 2, dtype=torch.int64), torch.tensor([[[0, 1]]]))


def test_custom_op_called_directly_still_validates():
    """The registered torch op checks indices too, so no Python path reads out of bounds."""
    with pytest.raises(IndexError):
        torch.ops.rpfast.permute_adjacency(torch.zeros(1, 3, 3, 1), torch.tensor([[[0, 7]]]))
    with pytest.raises(ValueError):
        torch.ops.rpfast.permute_nodes_backward(torch.zeros(1, 1, 2, 1), torch.tensor([[[1, 1]]]), 3)
