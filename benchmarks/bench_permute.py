"""permute_adjacency forward and forward+backward against torch indexing and Numba.

Shapes (issue 2): Tox21-like molecules padded to n=64 with C=15 channels for a pi-SGD
step (P=1, K=n) and k-ary inference averaging (P=20, K=20); CSL (B=150, n=41, C=1).
Every group holds the three implementations on identical inputs; benchmarks/report.py
turns the JSON into the ratio table of benchmarks/README.md.
"""
import numpy as np
import pytest
import torch

from benchmarks.baselines import numba_permute, torch_permute
from rpfast.ops import permute_adjacency, random_permutations

SHAPES = {
    "molecules pi-SGD B=96 n=64 C=15 P=1 K=64": (96, 64, 15, 1, 64),
    "molecules k-ary B=96 n=64 C=15 P=20 K=20": (96, 64, 15, 20, 20),
    "CSL B=150 n=41 C=1 P=1 K=41": (150, 41, 1, 1, 41),
}


def make_case(B, n, C, P, K):
    gen = torch.Generator().manual_seed(0)
    sizes = torch.randint(max(1, n // 6), n + 1, (B,), generator=gen) if n != 41 else torch.full((B,), n)
    perms = random_permutations(sizes, num_samples=P, k=K, generator=gen)
    adj = torch.rand((B, n, n, C), generator=gen)
    grad = torch.rand((B, P, K, K, C), generator=gen)
    return adj, perms, grad


def bytes_moved(adj, perms, grad, backward):
    out = grad.numel() * grad.element_size()
    total = 2 * out + perms.numel() * 8  # gather: read + write the output, read perms
    if backward:
        total += out + adj.numel() * adj.element_size()  # read grad, write grad_adj
    return total


def run_torch(fn, adj, perms, grad, backward):
    if not backward:
        return lambda: fn(adj, perms)
    leaf = adj.clone().requires_grad_()

    def step():
        leaf.grad = None
        fn(leaf, perms).backward(grad)

    return step


def run_numba(adj, perms, grad, backward):
    a, p, g = adj.numpy(), perms.numpy(), grad.numpy()
    numba_permute.permute_adjacency_forward(a, p)  # compile outside the timing
    numba_permute.permute_adjacency_backward(g, p, a.shape[1])
    if not backward:
        return lambda: numba_permute.permute_adjacency_forward(a, p)
    return lambda: (numba_permute.permute_adjacency_forward(a, p),
                    numba_permute.permute_adjacency_backward(g, p, a.shape[1]))


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
@pytest.mark.parametrize("impl", ["rpfast", "torch-indexing", "numba"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_permute_adjacency(benchmark, shape, impl, backward):
    adj, perms, grad = make_case(*SHAPES[shape])
    if impl == "rpfast":
        step = run_torch(permute_adjacency, adj, perms, grad, backward)
    elif impl == "torch-indexing":
        step = run_torch(torch_permute.permute_adjacency, adj, perms, grad, backward)
    else:
        step = run_numba(adj, perms, grad, backward)
    benchmark.group = f"permute_adjacency {'forward+backward' if backward else 'forward'}: {shape}"
    benchmark.extra_info["impl"] = impl
    benchmark.extra_info["bytes"] = bytes_moved(adj, perms, grad, backward)
    benchmark.pedantic(step, rounds=15, warmup_rounds=2, iterations=1)


def test_baselines_agree_with_rpfast():
    """The baselines compute the same tensors, so the timings compare like with like."""
    adj, perms, grad = make_case(4, 12, 3, 3, 5)
    ours = permute_adjacency(adj, perms)
    assert torch.equal(ours, torch_permute.permute_adjacency(adj, perms))
    assert np.array_equal(ours.numpy(), numba_permute.permute_adjacency_forward(adj.numpy(), perms.numpy()))
    leaf = adj.clone().requires_grad_()
    permute_adjacency(leaf, perms).backward(grad)
    np.testing.assert_allclose(leaf.grad.numpy(),
                               numba_permute.permute_adjacency_backward(grad.numpy(), perms.numpy(), 12), rtol=1e-6)
