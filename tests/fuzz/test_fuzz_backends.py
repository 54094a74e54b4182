"""Both backends on random finite and non-finite inputs: every registered op's C++ kernel
against its torch-composed form, forward and gradients, NaN and infinities where the other has
them (``equal_nan``), and the fused BatchNorm + ReLU against torch's autograd through
``relu(F.batch_norm(...))``.

Inputs: small random graphs (empty graphs, isolated vertices, self-loops, multi-edges), float32
and float64 values with no, a few, many or a whole column of NaN / +inf / -inf entries. The
random ops (``sample_ids``, ``pisgd_relabel``, and the draws ``random_permutations`` and
``random_positions``, whose composed form is the CPU kernel's draw moved to the device) are
compared in tests/ops/test_random_permutations.py and tests/ops/test_cuda.py instead. Both CI runs (C++ kernels, then
``RPFAST_BACKEND=torch``) run this file: it calls each form explicitly.
"""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzzing
from tests.helpers.assertions import backend, op_gradients
import rpfast
from tests.fuzz.fuzzing import fuzz_settings
from rpfast.data import GraphBatch
from rpfast.ops import _registry
from rpfast.ops.gin import graph_csr

RANDOM_OPS = {"sample_ids", "pisgd_relabel", "random_permutations", "random_positions"}
MODES = ("finite", "few", "many", "column")
NON_FINITE = (float("nan"), float("inf"), float("-inf"))


class Draw:
    """Random inputs from one seed: a graph batch and values with ``mode``'s non-finite entries."""

    def __init__(self, seed: int, mode: str, dtype: torch.dtype):
        self.gen = torch.Generator().manual_seed(seed)
        self.mode, self.dtype = mode, dtype
        sizes = [self.int(0, 5) for _ in range(self.int(1, 3))]
        edges, start = [], 0
        for n in sizes:
            for _ in range(self.int(0, 2 * n)):
                edges.append((start + self.int(0, n - 1), start + self.int(0, n - 1)))  # loops and repeats too
            start += n
        edge_index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t()
        ptr = torch.tensor([0] + sizes).cumsum(0)
        self.graph = GraphBatch(edge_index, ptr=ptr, total_nodes=start)
        self.N = start

    def int(self, low: int, high: int) -> int:
        return int(torch.randint(low, max(low, high) + 1, (1,), generator=self.gen))

    def values(self, *shape, positive: bool = False) -> torch.Tensor:
        v = torch.randn(*shape, generator=self.gen, dtype=torch.float64)
        v = v.abs() + 0.5 if positive else v
        if self.mode != "finite" and v.numel() and not positive:
            special = torch.tensor(NON_FINITE, dtype=torch.float64)
            pick = special[torch.randint(3, v.shape, generator=self.gen)]
            if self.mode == "column" and v.dim() >= 2:
                mask = torch.zeros(v.shape, dtype=torch.bool)
                mask[..., self.int(0, v.shape[-1] - 1)] = True
            else:
                rate = 0.05 if self.mode == "few" else 0.4
                mask = torch.rand(v.shape, generator=self.gen) < rate
            v = torch.where(mask, pick, v)
        return v.to(self.dtype)

    def perms(self, B: int, samples: int, n_max: int, k: int) -> torch.Tensor:
        """``[B, samples, k]`` gather permutations of ``n_max`` slots, padded with -1."""
        out = torch.full((B, samples, k), -1, dtype=torch.long)
        for b in range(B):
            n = self.int(0, n_max)
            for s in range(samples):
                order = torch.randperm(n, generator=self.gen)[:k]
                out[b, s, :len(order)] = order
        return out


def _arguments(name: str, d: Draw):
    """Random arguments of op ``name`` (the saved tensors of a backward op from the kernel's forward)."""
    g, N = d.graph, d.N
    csr = list(graph_csr(g))
    F_ = d.int(1, 4)
    ops = _registry.registered()
    if name == "gin_aggregate":
        return (d.values(2, N, F_), *csr, d.values(1))
    if name == "gin_aggregate_backward":
        return (d.values(2, N, F_), d.values(2, N, F_), csr[2], csr[3], d.values(1), True)
    if name == "rooted_round":
        D, R = d.int(1, 3), d.int(1, 3)
        return (d.values(D, N, R), d.values(D, N, R), d.values(D, D), d.values(D), d.values(N), *csr)
    if name == "rooted_pool":  # two rounds at most: the float32 cosines differ by an ulp, which rounds amplify
        D, H, L, R, K = d.int(1, 3), d.int(1, 2), d.int(1, 2), d.int(0, 3), d.int(0, 2)
        roots = torch.randint(-1, 6, (R, g.num_graphs, K), generator=d.gen)
        graph_hash = torch.randint(H, (g.num_graphs,), generator=d.gen)
        return (d.values(N, D), d.values(H, D), d.values(H, L, D, D), d.values(H, L, D, D), d.values(H, L, D),
                d.values(N), roots, graph_hash, g.ptr, *csr)
    if name == "sum_product":
        return (d.values(2, N, F_), d.values(2, N, F_))
    if name == "csr":
        return (g.edge_index, N)
    if name == "segment_sum":
        return (d.values(2, N, F_), g.ptr)
    if name == "segment_broadcast":
        return (d.values(2, g.num_graphs, F_), g.ptr, N)
    if name == "rows_product":
        return (d.values(2, d.int(0, 4), F_), d.values(F_, d.int(1, 5)))
    if name == "matmul_tn":
        rows = d.int(0, 6)
        return (d.values(rows, F_), d.values(rows, d.int(1, 4)))
    if name == "linear":
        out = d.int(1, 5)
        return (d.values(2, d.int(0, 4), F_), d.values(out, F_), d.values(out))
    if name == "embedding":
        rows = d.int(1, 5)
        return (d.values(rows, F_), torch.randint(rows, (2, d.int(0, 4)), generator=d.gen))
    if name == "scatter_rows_sum":
        rows = d.int(1, 5)
        index = torch.randint(rows, (2, d.int(0, 4)), generator=d.gen)
        return (index, d.values(*index.shape, F_), rows)
    if name in ("batch_norm_relu", "batch_norm_relu_backward"):
        rows, training = d.int(2, 7), bool(d.int(0, 1))
        x, w, b = d.values(rows, F_), d.values(F_), d.values(F_)
        mean, var = d.values(F_), d.values(F_, positive=True)
        if name == "batch_norm_relu":
            return (x, w, b, mean, var, training, 0.1, 1e-5)
        y, xhat, invstd, _, _ = ops["batch_norm_relu"].kernel(x, w, b, mean, var, training, 0.1, 1e-5)
        return (d.values(rows, F_), y, xhat, w, invstd, training)
    if name in ("neighbour_max", "neighbour_max_adjoint"):
        x = d.values(N, F_)
        if name == "neighbour_max":
            return (x, *csr)
        out, ties = ops["neighbour_max"].kernel(x, *csr)
        return (d.values(N, F_), x, out, ties, *csr)
    if name in ("graph_max", "graph_max_adjoint"):
        x = d.values(N, F_)
        if name == "graph_max":
            return (x, g.ptr)
        out, ties = ops["graph_max"].kernel(x, g.ptr)
        return (d.values(g.num_graphs, F_), x, g.ptr, out, ties)
    n_max, B, samples = d.int(1, 5), d.int(1, 2), d.int(1, 3)
    perms = d.perms(B, samples, n_max, d.int(1, n_max))
    if name == "permute_adjacency":
        return (d.values(B, n_max, n_max, d.int(1, 2)), perms)
    if name == "permute_adjacency_backward":
        k = perms.shape[-1]
        return (d.values(B, samples, k, k, d.int(1, 2)), perms, n_max)
    if name == "permute_nodes":
        return (d.values(B, n_max, F_), perms)
    if name == "permute_nodes_backward":
        return (d.values(B, samples, perms.shape[-1], F_), perms, n_max)
    raise KeyError(f"no random arguments for op {name}: add them here")


DETERMINISTIC = sorted(set(_registry.registered()) - RANDOM_OPS)


def _close(got, expected, dtype, what: str) -> None:
    tolerance = 1e-9 if dtype == torch.float64 else 2e-4
    got = got if isinstance(got, (tuple, list)) else [got]
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    assert len(got) == len(expected), what
    for i, (a, b) in enumerate(zip(got, expected)):
        if a is None or b is None:
            assert (a is None or not a.abs().nan_to_num(1).sum()) and (b is None or not b.abs().nan_to_num(1).sum()), \
                f"{what} {i}: one backend has no gradient, the other a nonzero one"
            continue
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance, equal_nan=True, check_dtype=True,
                                   msg=lambda m: f"{what} {i}: {m}")


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def test_every_deterministic_op_has_random_arguments():
    draw = Draw(0, "finite", torch.float64)
    for name in DETERMINISTIC:
        _arguments(name, draw)


@pytest.mark.parametrize("name", DETERMINISTIC)
@fuzz_settings(24)
@given(seed=st.integers(0, 2 ** 31 - 1), mode=st.sampled_from(MODES),
       dtype=st.sampled_from([torch.float64, torch.float32]))
def test_kernel_and_composed_agree_on_finite_and_non_finite_inputs(name, seed, mode, dtype):
    fuzzing.count(name, "reference")
    op = _registry.registered()[name]
    args = _arguments(name, Draw(seed, mode, dtype))
    _close(op.composed(*_clone(args)), op.kernel(*_clone(args)), dtype, f"{name} ({mode}) forward output")
    if op.backward is None:
        return
    with backend("auto"):
        expected = op_gradients(op, args)
    with backend("torch"):
        got = op_gradients(op, args)
    _close(got, expected, dtype, f"{name} ({mode}) gradient of input")


@pytest.mark.parametrize("backend_name", ["auto", "torch"])
@fuzz_settings(60)
@given(seed=st.integers(0, 2 ** 31 - 1), mode=st.sampled_from(MODES), training=st.booleans())
def test_batch_norm_relu_equals_torch_autograd_on_non_finite_inputs(backend_name, seed, mode, training):
    """The campaign's case: with NaN in x, the composed path dropped the NaN rows' gradient
    (``y > 0`` is false for NaN) and the kernel's eval gradient multiplied NaN by zero."""
    fuzzing.count("batch_norm_relu", "reference")
    d = Draw(seed, mode, torch.float64)
    rows, H = d.int(2, 7), d.int(1, 4)
    x, w, b = d.values(rows, H), d.values(H), d.values(H)
    mean, var = d.values(H), d.values(H, positive=True)
    g = d.values(rows, H)
    mine, ref = [t.clone().requires_grad_() for t in (x, w, b)], [t.clone().requires_grad_() for t in (x, w, b)]
    m1, v1, m2, v2 = mean.clone(), var.clone(), mean.clone(), var.clone()
    with backend(backend_name):
        out = rpfast.ops.batch_norm_relu(mine[0], mine[1], mine[2], m1, v1, training, 0.1, 1e-5)
    expected = torch.relu(F.batch_norm(ref[0], m2, v2, ref[1], ref[2], training, 0.1, 1e-5))
    _close(out, expected, torch.float64, f"batch_norm_relu ({backend_name}, {mode}) output")
    _close([m1, v1], [m2, v2], torch.float64, f"batch_norm_relu ({backend_name}, {mode}) running statistics")
    _close(torch.autograd.grad((out * g).sum(), mine), torch.autograd.grad((expected * g).sum(), ref),
           torch.float64, f"batch_norm_relu ({backend_name}, {mode}, training={training}) gradient of input")


LAYER_NAMES = ("GINConv", "GIN", "GIN-flat", "GIN-wide", "RPGIN")


@pytest.mark.parametrize("name", LAYER_NAMES)
@fuzz_settings(12)
@given(seed=st.integers(0, 2 ** 31 - 1), mode=st.sampled_from(MODES[1:]), training=st.booleans())
def test_gin_and_rpgin_agree_across_backends_on_non_finite_features(name, seed, mode, training):
    """Whole layers (the fused GIN network, its layer path, RP-GIN's IDs) on node features with
    NaN and infinities: outputs, every gradient and the BatchNorm statistics, NaN where the other
    backend has NaN."""
    import copy

    from tests.helpers.layer_cases import layer_cases

    fuzzing.count(name, "reference")
    torch.manual_seed(0)
    model, (x, graph) = layer_cases()[name]()
    x = Draw(seed, mode, torch.float64).values(*x.shape)
    model.train(training)
    twin = copy.deepcopy(model)
    weights = None

    def step(m):
        nonlocal weights
        inputs = x.clone().requires_grad_()
        out = m(inputs, graph)
        weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape) if weights is None else weights
        leaves = [inputs] + list(m.parameters())
        return [out.detach()] + list(torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True))

    with backend("auto"):
        expected = step(model)
    with backend("torch"):
        if getattr(twin, "generator", None) is not None:
            twin.generator.manual_seed(0)
        got = step(twin)
    _close(got, expected, torch.float64, f"{name} ({mode}, training={training}) output and gradients")
    _close(list(twin.state_dict().values()), list(model.state_dict().values()), torch.float64,
           f"{name} ({mode}) state")
