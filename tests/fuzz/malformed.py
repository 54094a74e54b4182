"""Malformed-input fuzzing of rpfast's public surface, run in a worker process.

Every public op, GraphBatch construction, the rpfast.nn modules and both CLI commands are
called with inputs a hostile user could pass: wrong dtypes and shapes, negative and huge
integers, out-of-range indices, duplicates in permutations, NaN/Inf, empty and
non-contiguous tensors, stride-0 and sparse tensors, NumPy arrays and lists, and Python
objects of the wrong type. A call must succeed or raise one of ``fuzzing.CLEAN_ERRORS``;
any other exception is a failure (hypothesis shrinks it to a minimal input), and a
segfault, abort, sanitizer report or hang kills this worker, which the parent
(``test_fuzz_malformed.py``) reports with the op and the input being tried.

Usage (the parent does this; by hand it replays a group)::

    python -m tests.fuzz.malformed GROUP --result results.jsonl --last last.txt [--skip op1,op2]

from the repository's root (``tests`` is a package).

Each finished op appends one JSON line ``{"op", "count", "failure", "seconds"}`` to
``--result``; before every call the op, the inputs tried so far and a description of the
current input are written to ``--last``.
"""
import argparse
import contextlib
import faulthandler
import functools
import io
import itertools
import json
import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from rpfast import ops
from rpfast.data import GraphBatch
from rpfast.datasets import batch_from_smiles
from rpfast.datasets.molecules import canonical_order_from_mol
from rpfast.nn import GIN, RPGIN, GINConv, PiSGD, RelationalPooling
from rpfast.nn.gin import batch_norm_arguments
from tests.fuzz import fuzzing
from tests.helpers.reference import keep_subset
from tests.helpers.strategies import partial_permutations

# ============================================================================ describing
def show(value, depth=0) -> str:
    """A short, exact-enough description of an argument for failure reports."""
    if isinstance(value, torch.Tensor):
        extra = []
        if value.layout != torch.strided:
            extra.append(f"layout={value.layout}")
        elif not value.is_contiguous():
            extra.append(f"stride={value.stride()}")
        if value.requires_grad:
            extra.append("requires_grad")
        if value.layout == torch.strided and value.numel() <= 24:
            try:
                vals = value.detach().tolist()
            except Exception:  # pragma: no cover
                vals = "?"
            return f"tensor({vals}, dtype={value.dtype}" + "".join(", " + e for e in extra) + ")"
        return f"tensor(shape={tuple(value.shape)}, dtype={value.dtype}" + "".join(", " + e for e in extra) + ")"
    if isinstance(value, np.ndarray):
        if value.size <= 24:
            return f"np.array({value.tolist()}, dtype={value.dtype})"
        return f"np.ndarray(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, Described):
        return value.desc
    if isinstance(value, (list, tuple)) and depth < 3:
        inner = ", ".join(show(v, depth + 1) for v in value[:12]) + (", ..." if len(value) > 12 else "")
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.Generator):
        return "torch.Generator(seeded)"
    if isinstance(value, torch.nn.Module):
        return _module_desc(value)
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


def _module_desc(m) -> str:
    if isinstance(m, torch.nn.BatchNorm1d):
        return (f"BatchNorm1d({m.num_features}, affine={m.affine}, track_running_stats={m.track_running_stats}, "
                f"momentum={m.momentum}, dtype={None if m.weight is None else m.weight.dtype})")
    return type(m).__name__


class Described:
    """An argument built by a recipe whose text is easier to read than the object."""

    def __init__(self, obj, desc):
        self.obj, self.desc = obj, desc


def unwrap(v):
    if isinstance(v, Described):
        return v.obj
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    if isinstance(v, tuple):
        return tuple(unwrap(x) for x in v)
    return v


class Case:
    """One call: ``fn(*args, **kwargs)`` plus what to do with the result."""

    def __init__(self, name, fn, args=(), kwargs=None, after=None):
        self.name, self.fn, self.args, self.kwargs, self.after = name, fn, tuple(args), dict(kwargs or {}), after

    @property
    def desc(self) -> str:
        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"

    def run(self):
        out = self.fn(*unwrap(self.args), **{k: unwrap(v) for k, v in self.kwargs.items()})
        if self.after is not None:
            self.after(out)
        else:
            backward(out)
        return out


def backward(out) -> None:
    """Run a backward pass through every float output that requires grad."""
    tensors = [out] if isinstance(out, torch.Tensor) else [t for t in (out if isinstance(out, tuple) else ())
                                                           if isinstance(t, torch.Tensor)]
    loss = None
    for t in tensors:
        if t.requires_grad and t.dtype.is_floating_point:
            term = t.sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()


# ============================================================================ value zoo
# Sizes no machine can hold (sizes of a few GiB would be legitimate, if slow, requests).
HUGE = [2**40, 2**62, 2**63 - 1, 2**63, 2**64, 10**30]
ABSURD = [2**62, 2**63 - 1, 2**63, 2**64, 10**30]
NEGATIVE = [-1, -2, -2**31, -2**63, -2**64]
JUNK = [None, "x", "", "3", 1.5, float("nan"), float("inf"), -float("inf"), True, False, [], [[]], {}, (),
        object(), b"\x00", 1 + 1j, np.float64(2.0), np.int32(2), np.array([1, 2]), slice(1), Ellipsis]
FLOAT_DTYPES = [torch.float32, torch.float64]
OTHER_DTYPES = [torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                torch.bool, torch.complex64, torch.float32, torch.float64]


def bad_ints(lo=-2, hi=12, huge=HUGE):
    """Integers around the valid range, plus negative and huge ones."""
    return st.one_of(st.integers(lo, hi), st.sampled_from(huge + NEGATIVE))


def junk():
    return st.one_of(st.sampled_from(JUNK), st.floats(allow_nan=True, allow_infinity=True),
                     st.just(torch.tensor(2)), st.just(torch.tensor([1.0, 2.0])), st.just(np.int64(3)))


def maybe(valid, bad, p_bad=3):
    """``valid`` most of the time; one of ``bad`` otherwise (hypothesis explores both)."""
    return st.one_of(*([valid] * p_bad), bad)


def scalar_int(valid, lo=-2, hi=12, huge=HUGE):
    return maybe(valid, st.one_of(bad_ints(lo, hi, huge), junk()))


def module_int(valid, lo=-2, hi=12):
    """Constructor sizes of the nn modules: absurd, never merely big (a big model is legal)."""
    return scalar_int(valid, lo, hi, huge=ABSURD)


def _noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values, non-contiguous storage."""
    if t.dim() == 0:
        return t
    big = torch.zeros(*t.shape, 2, dtype=t.dtype)
    big[..., 0] = t
    return big[..., 0]


MUTATIONS = ["keep", "keep", "keep", "keep", "noncontig", "dtype", "empty", "unsqueeze", "flatten", "shrink",
             "grow", "scalar", "special", "negative", "huge", "duplicate", "numpy", "list", "junk", "expand",
             "sparse", "requires_grad", "transpose"]


@st.composite
def mutate(draw, t: torch.Tensor, index: bool = False, allowed=None):
    """``t`` or a malformed variant of it (keeps ``requires_grad`` where it can)."""
    out = _mutate(draw, t.detach().clone(), draw(st.sampled_from(allowed or MUTATIONS)))
    if t.requires_grad and isinstance(out, torch.Tensor) and out.is_floating_point() and not out.requires_grad:
        out.requires_grad_()
    return out


def _mutate(draw, t: torch.Tensor, how: str):
    if how == "keep":
        return t
    if how == "noncontig":
        return _noncontiguous(t)
    if how == "dtype":
        return t.to(draw(st.sampled_from(OTHER_DTYPES)))
    if how == "empty":
        shape = list(t.shape) or [0]
        shape[draw(st.integers(0, len(shape) - 1))] = 0
        return torch.zeros(shape, dtype=t.dtype)
    if how == "unsqueeze":
        return t.unsqueeze(draw(st.integers(0, t.dim())))
    if how == "flatten":
        return t.reshape(-1)
    if how in ("shrink", "grow"):
        if t.dim() == 0:
            return t.reshape(1)
        d = draw(st.integers(0, t.dim() - 1))
        if how == "shrink":
            return t.narrow(d, 0, max(t.shape[d] - 1, 0))
        extra = torch.zeros_like(t.narrow(d, 0, 1)) if t.shape[d] else torch.zeros([*t.shape[:d], 1, *t.shape[d + 1:]],
                                                                                   dtype=t.dtype)
        return torch.cat([t, extra], dim=d)
    if how == "scalar":
        return torch.tensor(draw(st.integers(-3, 5)), dtype=t.dtype)
    if how == "expand":
        if t.dim() == 0 or t.numel() == 0:
            return t
        d = draw(st.integers(0, t.dim() - 1))
        return t.narrow(d, 0, 1).expand(*t.shape)  # stride 0 along d
    if how == "sparse":
        return t.to_sparse() if t.dim() and t.dtype != torch.bool else t
    if how == "requires_grad":
        return t.double().requires_grad_() if not t.dtype.is_floating_point else t.requires_grad_()
    if how == "transpose":
        return t.t() if t.dim() == 2 else t.transpose(0, -1) if t.dim() > 2 else t
    if how == "numpy":
        return t.numpy()
    if how == "list":
        return t.tolist()
    if how == "junk":
        return draw(junk())
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return t
    i = draw(st.integers(0, flat.numel() - 1))
    if how == "special":
        if t.dtype.is_floating_point:
            flat[i] = draw(st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308 if t.dtype == torch.float64
                                            else 3e38, -0.0, 1e-45]))
        else:
            flat[i] = draw(st.sampled_from([-1, 2**40, 2**62]))
        return t
    if how == "negative":
        flat[i] = draw(st.sampled_from([-1, -2, -7, -2**31, -2**63])) if not t.dtype.is_floating_point else -1.0
        return t
    if how == "huge":
        if t.dtype.is_floating_point:
            flat[i] = 1e30
        else:
            flat[i] = draw(st.sampled_from([7, 2**40, 2**62, 2**63 - 1]))
        return t
    if how == "duplicate":
        j = draw(st.integers(0, flat.numel() - 1))
        flat[j] = flat[i]
        return t
    raise AssertionError(how)


def gen_arg():
    return maybe(st.one_of(st.none(), st.integers(0, 2**32).map(lambda s: torch.Generator().manual_seed(s))),
                 junk(), p_bad=4)


# ============================================================================ graphs
def _batch_from_pairs(graphs):
    ei = [(torch.tensor(p, dtype=torch.int64).reshape(-1, 2).t(), n) for p, n in graphs]
    return GraphBatch.from_edge_lists(ei)


@st.composite
def small_graphs(draw, max_graphs=3, max_nodes=6, min_graphs=0):
    graphs = []
    for _ in range(draw(st.integers(min_graphs, max_graphs))):
        n = draw(st.integers(0, max_nodes))
        pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12)) if n else []
        if draw(st.booleans()):
            pairs = pairs + [(v, u) for u, v in pairs]
        graphs.append((pairs, n))
    return Described(_batch_from_pairs(graphs), f"GraphBatch.from_edge_lists({graphs})")


@functools.lru_cache(maxsize=None)
def _hostile_graph(kind: str) -> GraphBatch:
    """Known hostile shapes: big isolated sets, long paths, big stars, dense graphs."""
    if kind == "isolated_1e6":
        return GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=10**6)
    if kind == "path_20000":
        n = 20000
        a = torch.arange(n - 1)
        return GraphBatch(torch.stack([torch.cat([a, a + 1]), torch.cat([a + 1, a])]), num_nodes=n)
    if kind == "star_400":
        leaves = torch.arange(1, 401)
        return GraphBatch(torch.stack([torch.cat([torch.zeros(400, dtype=torch.int64), leaves]),
                                       torch.cat([leaves, torch.zeros(400, dtype=torch.int64)])]), num_nodes=401)
    if kind == "complete_60":
        ei = torch.tensor(list(itertools.permutations(range(60), 2))).t()
        return GraphBatch(ei, num_nodes=60)
    if kind == "empty_batch":
        return GraphBatch.from_edge_lists([])
    if kind == "zero_node_graphs":
        return GraphBatch.from_edge_lists([(torch.zeros(2, 0, dtype=torch.int64), 0)] * 3)
    raise AssertionError(kind)


HOSTILE = ["empty_batch", "zero_node_graphs", "isolated_1e6", "path_20000", "star_400", "complete_60"]


def _hostile(kind: str) -> Described:
    try:
        return Described(_hostile_graph(kind), f"<hostile graph {kind}>")
    except fuzzing.CLEAN_ERRORS as error:  # refused up front (e.g. over the memory budget): fine
        return Described(GraphBatch.from_edge_lists([]), f"<hostile graph {kind} refused ({error}): empty batch>")


def graphs_or_hostile(**kw):
    hostile = st.sampled_from(HOSTILE).map(_hostile)
    return st.one_of(small_graphs(**kw), small_graphs(**kw), small_graphs(**kw), small_graphs(**kw), hostile)


def _as_pyg(d: Described) -> Described:
    """The same graphs as a PyTorch Geometric Batch (layers accept those; ops may refuse them)."""
    from torch_geometric.data import Batch, Data

    g, ptr = d.obj, d.obj.ptr.tolist()
    datas = []
    for b in range(g.num_graphs):
        mine = (g.edge_index[0] >= ptr[b]) & (g.edge_index[0] < ptr[b + 1])
        datas.append(Data(edge_index=g.edge_index[:, mine] - ptr[b], num_nodes=ptr[b + 1] - ptr[b]))
    obj = Batch.from_data_list(datas) if datas else Data(edge_index=g.edge_index, num_nodes=0)
    return Described(obj, f"<PyG {type(obj).__name__} of {d.desc}>")


def graph_arg(**kw):
    """A GraphBatch (mostly), or something else a user might pass as a graph."""
    def as_edge_index(d):
        return Described(d.obj.edge_index, f"{d.desc}.edge_index")

    return st.one_of(graphs_or_hostile(**kw), graphs_or_hostile(**kw), graphs_or_hostile(**kw),
                     small_graphs(**kw).map(as_edge_index), small_graphs(**kw).map(_as_pyg), junk())


def _n(graph):
    g = unwrap(graph)
    return g.total_nodes if isinstance(g, GraphBatch) else 4


def _nmax(graph):
    g = unwrap(graph)
    return g.n_max if isinstance(g, GraphBatch) else 4


def _sizes(graph):
    g = unwrap(graph)
    return g.num_nodes if isinstance(g, GraphBatch) else torch.tensor([4])


def _seeded(seed):
    return torch.Generator().manual_seed(seed)


# ============================================================================ targets: permute
@st.composite
def permute_case(draw, nodes: bool):
    B, n, C, P = draw(st.integers(0, 3)), draw(st.integers(0, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    K = draw(st.integers(0, n + 2))
    seed = draw(st.integers(0, 2**32 - 1))
    sizes = torch.tensor([draw(st.integers(0, n)) for _ in range(B)], dtype=torch.int64)
    perms = partial_permutations(sizes, P, K, seed, draw(st.booleans()))
    squeeze = draw(st.booleans())
    shape = (B, n) if (nodes and squeeze) else (B, n, C) if nodes else (B, n, n) if squeeze else (B, n, n, C)
    data = torch.randn(shape, generator=_seeded(seed), dtype=draw(st.sampled_from(FLOAT_DTYPES)))
    data = draw(mutate(data))
    perms = draw(mutate(perms, index=True))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["num_nodes"] = draw(mutate(sizes, index=True))
    name, fn = ("permute_nodes", ops.permute_nodes) if nodes else ("permute_adjacency", ops.permute_adjacency)
    return Case(name, fn, (data, perms), kwargs)


@st.composite
def random_permutations_case(draw):
    sizes = torch.tensor(draw(st.lists(st.integers(0, 8), max_size=4)), dtype=torch.int64)
    num_nodes = draw(st.one_of(mutate(sizes, index=True), mutate(sizes, index=True),
                               st.lists(st.sampled_from(HUGE + [0, 1, 5]), min_size=1, max_size=2)))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["num_samples"] = draw(scalar_int(st.integers(1, 4)))
    if draw(st.booleans()):
        kwargs["k"] = draw(st.one_of(st.none(), scalar_int(st.integers(0, 9))))
    kwargs["generator"] = draw(gen_arg())
    return Case("random_permutations", ops.random_permutations, (num_nodes,), kwargs)


# ============================================================================ targets: gnn
def float_arg(valid):
    return maybe(valid, junk())


@st.composite
def node_features(draw, graph, replicas=True):
    N = _n(graph)
    F = draw(st.integers(1, 4))
    shape = (draw(st.integers(1, 3)), N, F) if replicas and draw(st.booleans()) else (N, F)
    x = torch.randn(shape, generator=_seeded(draw(st.integers(0, 2**16))), dtype=draw(st.sampled_from(FLOAT_DTYPES)))
    if N > 10000:  # hostile graphs: keep the features small
        x = torch.zeros(shape, dtype=x.dtype)
    return draw(mutate(x))


@st.composite
def gin_aggregate_case(draw):
    graph = draw(graph_arg())
    x = draw(node_features(graph))
    x = x.requires_grad_() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()) else x
    kwargs = {}
    if draw(st.booleans()):
        eps = draw(st.one_of(st.floats(allow_nan=True), st.integers(-3, 3),
                             st.sampled_from([0.0, -1.0]).map(lambda v: torch.tensor(v, requires_grad=True)),
                             st.just(torch.tensor([0.1, 0.2])), st.just(torch.tensor(1)), st.just(torch.tensor([0.5])),
                             junk()))
        kwargs["eps"] = eps
    return Case("gin_aggregate", ops.gin_aggregate, (x, graph), kwargs)


@st.composite
def rooted_round_case(draw):
    graph = draw(graph_arg())
    N, D, R = _n(graph), draw(st.integers(1, 3)), draw(st.integers(0, 3))
    dtype, generator = draw(st.sampled_from(FLOAT_DTYPES)), _seeded(draw(st.integers(0, 2**16)))

    def tensor(*shape):  # hostile graphs: keep the activations small
        return torch.randn(shape, generator=generator, dtype=dtype) if N <= 10000 else torch.zeros(shape, dtype=dtype)

    args = [draw(mutate(t)) for t in (tensor(D, N, R), tensor(D, N, R), tensor(D, D), tensor(D), tensor(N))]
    return Case("rooted_round", ops.rooted_round, (*args, graph), {})


@st.composite
def rooted_pool_case(draw):
    graph = draw(graph_arg())
    N, unwrapped = _n(graph), unwrap(graph)
    B = unwrapped.num_graphs if isinstance(unwrapped, GraphBatch) else 1
    D, H, L, R, K = (draw(st.integers(low, high)) for low, high in ((1, 3), (1, 2), (1, 3), (0, 3), (0, 3)))
    dtype, generator = draw(st.sampled_from(FLOAT_DTYPES)), _seeded(draw(st.integers(0, 2**16)))

    def tensor(*shape):  # hostile graphs: keep the activations small
        return torch.randn(shape, generator=generator, dtype=dtype) if N <= 10000 else torch.zeros(shape, dtype=dtype)

    floats = [draw(mutate(t)) for t in (tensor(N, D), tensor(H, D), tensor(H, L, D, D), tensor(H, L, D, D),
                                        tensor(H, L, D), tensor(N))]
    roots = draw(mutate(torch.randint(-2, 8, (R, B, K), generator=generator)))
    graph_hash = draw(mutate(torch.randint(H, (B,), generator=generator)))
    return Case("rooted_pool", ops.rooted_pool, (*floats, roots, graph_hash, graph), {})


def _bn(H, dtype, variant):
    bn = torch.nn.BatchNorm1d(H, affine=variant != "no_affine", track_running_stats=variant != "no_stats",
                              momentum=None if variant == "momentum_none" else 0.1)
    return Described(bn.to(dtype), _module_desc(bn.to(dtype)))


@st.composite
def gin_mlp_case(draw):
    graph = draw(graph_arg(max_nodes=5))
    N, H, R, L = _n(graph), draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    z = torch.randn(R, N, H, dtype=dtype) if N <= 10**4 else torch.zeros(R, N, H, dtype=dtype)
    z = draw(mutate(z))
    if isinstance(z, torch.Tensor) and z.dtype.is_floating_point and draw(st.booleans()):
        z = z.requires_grad_()
    eps = draw(st.one_of(st.just(torch.zeros(1, dtype=dtype, requires_grad=True)), st.just(torch.zeros(1)),
                         st.floats(allow_nan=True), st.just(torch.zeros(2)), junk()))
    weights = [draw(mutate(torch.randn(H, H, dtype=dtype).requires_grad_(), allowed=["keep"] * 6 + MUTATIONS))
               for _ in range(L - 1)]
    variant = draw(st.sampled_from(["ok", "ok", "ok", "no_affine", "no_stats", "momentum_none", "wrong_width",
                                    "wrong_dtype", "not_bn"]))
    norms = []
    for i in range(L):
        v = variant if i == L - 1 else "ok"
        if v == "wrong_width":
            norms.append(_bn(H + 1, dtype, "ok"))
        elif v == "wrong_dtype":
            norms.append(_bn(H, torch.float64 if dtype == torch.float32 else torch.float32, "ok"))
        elif v == "not_bn":
            norms.append(Described(torch.nn.Identity(), "Identity()"))
        else:
            norms.append(_bn(H, dtype, v))
    if draw(st.integers(0, 9)) == 0:
        norms = norms[:-1]
    training = draw(maybe(st.booleans(), junk()))
    return Case("gin_mlp", _gin_mlp_with_modules, (z, graph, eps, weights, norms, training))


def _gin_mlp_with_modules(z, graph, eps, weights, norms, training):
    """gin_mlp with its BatchNorm state read from modules, as rpfast.nn.GINLayer calls it."""
    return ops.gin_mlp(z, graph, eps, weights, training=training, **batch_norm_arguments(norms, training))


@st.composite
def batch_norm_relu_case(draw):
    H = draw(st.integers(0, 4))
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    lead = draw(st.lists(st.integers(0, 4), max_size=2))
    x = draw(mutate(torch.randn(*lead, H, dtype=dtype)))
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()):
        x = x.requires_grad_()
    params = [draw(mutate(torch.randn(H, dtype=dtype))) for _ in range(2)]
    stats = [draw(mutate(torch.zeros(H, dtype=dtype))), draw(mutate(torch.ones(H, dtype=dtype)))]
    kwargs = {}
    if draw(st.booleans()):
        kwargs["momentum"] = draw(st.one_of(st.floats(allow_nan=True), st.none(), junk()))
    if draw(st.booleans()):
        kwargs["eps"] = draw(st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, -1.0, 1e-5]), junk()))
    training = draw(maybe(st.booleans(), junk()))
    return Case("batch_norm_relu", ops.batch_norm_relu, (x, *params, *stats, training), kwargs)


@st.composite
def segment_sum_case(draw):
    sizes = draw(st.lists(st.integers(0, 4), max_size=4))
    N = sum(sizes)
    ptr = torch.tensor([0] + list(itertools.accumulate(sizes)), dtype=torch.int64)
    F = draw(st.integers(0, 3))
    shape = (draw(st.integers(1, 2)), N, F) if draw(st.booleans()) else (N, F)
    x = draw(mutate(torch.randn(shape, dtype=draw(st.sampled_from(FLOAT_DTYPES)))))
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()):
        x = x.requires_grad_()
    ptr = draw(st.one_of(mutate(ptr, index=True), st.just(ptr.flip(0)),
                         st.just(torch.tensor([0, N + 1, N]) if N else torch.tensor([0, 2**40, 0]))))
    return Case("segment_sum", ops.segment_sum, (x, ptr))


@st.composite
def max_pool_case(draw, name):
    graph = draw(graph_arg())
    x = draw(node_features(graph, replicas=False))
    x = x.requires_grad_() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()) else x
    return Case(name, getattr(ops, name), (x, graph))


@st.composite
def graph_sum_case(draw):
    graph = draw(graph_arg())
    x = draw(node_features(graph))
    x = x.requires_grad_() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()) else x
    return Case("graph_sum", ops.graph_sum, (x, graph))


@st.composite
def linear_case(draw):
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    rows = draw(st.lists(st.integers(0, 4), min_size=0, max_size=2))
    F, H = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    gen = _seeded(draw(st.integers(0, 2**16)))
    x = torch.randn(*rows, F, generator=gen, dtype=dtype).requires_grad_(draw(st.booleans()))
    weight = torch.randn(H, F, generator=gen, dtype=dtype).requires_grad_(draw(st.booleans()))
    bias = torch.randn(H, generator=gen, dtype=dtype).requires_grad_(draw(st.booleans()))
    bias = draw(st.one_of(st.none(), mutate(bias)))
    return Case("linear", ops.linear, (draw(mutate(x)), draw(mutate(weight)), bias))


@st.composite
def embedding_case(draw):
    V, H = draw(st.integers(0, 5)), draw(st.integers(0, 4))
    weight = torch.randn(V, H, generator=_seeded(draw(st.integers(0, 2**16))),
                         dtype=draw(st.sampled_from(FLOAT_DTYPES))).requires_grad_(draw(st.booleans()))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    index = torch.randint(max(V, 1), shape, generator=_seeded(draw(st.integers(0, 2**16))))
    return Case("embedding", ops.embedding, (draw(mutate(weight)), draw(mutate(index, index=True))))


# ============================================================================ targets: subsets
PRUNES = ["none", "edgeless", "isolated", "disconnected"]


def prune_arg():
    return maybe(st.sampled_from(PRUNES), st.one_of(st.sampled_from(["", "NONE", "all", "connected "]), junk()))


def subset_common(draw, kwargs, graph):
    if not isinstance(unwrap(graph), GraphBatch) and draw(st.booleans()):
        kwargs["num_nodes"] = draw(scalar_int(st.integers(0, 8)))
    elif draw(st.integers(0, 9)) == 0:
        kwargs["num_nodes"] = draw(scalar_int(st.integers(0, 8)))
    if draw(st.booleans()):
        kwargs["prune"] = draw(prune_arg())


@st.composite
def k_subsets_case(draw, which):
    graph = draw(graph_arg())
    k = draw(scalar_int(st.integers(1, 5), lo=-1, hi=70))
    kwargs = {}
    subset_common(draw, kwargs, graph)
    if which == "k_subsets":
        if draw(st.booleans()):
            kwargs["max_bytes"] = draw(st.one_of(st.none(), scalar_int(st.integers(1, 10**6))))
        return Case("k_subsets", ops.k_subsets, (graph, k), kwargs)
    if which == "count_k_subsets":
        return Case("count_k_subsets", ops.count_k_subsets, (graph, k), kwargs)
    if which == "iter_k_subsets":
        if draw(st.booleans()):
            kwargs["chunk_size"] = draw(scalar_int(st.integers(1, 50)))

        def consume(stream):  # at most 200 chunks: a hostile graph may stream for a long time
            for chunk in itertools.islice(iter(stream), 200):
                assert chunk.subsets.dim() == 2

        return Case("iter_k_subsets", ops.iter_k_subsets, (graph, k), kwargs, after=consume)
    kwargs["num_samples"] = draw(scalar_int(st.integers(1, 6), hi=20))
    if draw(st.booleans()):
        kwargs["method"] = draw(maybe(st.sampled_from(["uniform", "bfs", "dfs"]),
                                      st.one_of(st.sampled_from(["BFS", "random"]), junk())))
    kwargs["generator"] = draw(gen_arg())
    return Case("sample_k_subsets", ops.sample_k_subsets, (graph, k), kwargs)


# ============================================================================ targets: orient
@st.composite
def ranks_arg(draw, graph, P):
    g = unwrap(graph)
    if not isinstance(g, GraphBatch) or g.total_nodes > 10**4:
        return draw(st.one_of(st.none(), junk()))
    rows = []
    seed = draw(st.integers(0, 2**16))
    gen = _seeded(seed)
    for n in g.num_nodes.tolist():
        rows.append(torch.stack([torch.cat([torch.randperm(n, generator=gen), torch.arange(n, g.n_max)])
                                 for _ in range(P)]) if P else torch.zeros(0, g.n_max, dtype=torch.int64))
    ranks = torch.stack(rows) if rows else torch.zeros(0, P, g.n_max, dtype=torch.int64)
    return draw(st.one_of(st.none(), mutate(ranks, index=True)))


@st.composite
def traversal_case(draw, depth_first):
    graph = draw(graph_arg())
    g = unwrap(graph)
    kwargs = {}
    mode = draw(st.sampled_from(["random", "all", "tensor", "tensor", "junk"]))
    P = 1
    if mode == "random":
        kwargs["start"] = "random"
        if draw(st.booleans()):
            kwargs["num_samples"] = draw(scalar_int(st.integers(1, 4)))
            P = kwargs["num_samples"] if type(kwargs["num_samples"]) is int and 0 < kwargs["num_samples"] < 5 else 1
        kwargs["generator"] = draw(gen_arg())
    elif mode == "all":
        kwargs["start"] = "all"
        P = _nmax(graph)
    elif mode == "tensor" and isinstance(g, GraphBatch) and g.num_graphs < 100:
        P = draw(st.integers(1, 3))
        gen = _seeded(draw(st.integers(0, 2**16)))
        start = torch.stack([torch.randint(0, max(n, 1), (P,), generator=gen) if n else torch.full((P,), -1)
                             for n in g.num_nodes.tolist()]) if g.num_graphs else torch.zeros(0, P, dtype=torch.int64)
        kwargs["start"] = draw(mutate(start, index=True))
    else:
        kwargs["start"] = draw(st.one_of(junk(), st.sampled_from(["ALL", "first"])))
    if draw(st.booleans()) and P <= 8:
        kwargs["tiebreak"] = draw(ranks_arg(graph, P))
    if draw(st.booleans()):
        kwargs["k"] = draw(st.one_of(st.none(), scalar_int(st.integers(1, 7))))
    name, fn = ("dfs_order", ops.dfs_order) if depth_first else ("bfs_order", ops.bfs_order)
    return Case(name, fn, (graph,), kwargs)


@st.composite
def wl_case(draw):
    graph = draw(graph_arg())
    kwargs = {}
    if draw(st.booleans()):
        kwargs["tiebreak"] = draw(ranks_arg(graph, draw(st.integers(0, 2))))
    if draw(st.booleans()):
        N = _n(graph)
        if N > 10**4:
            x = torch.zeros(N, 1)
        else:
            x = torch.randint(0, 3, (N, draw(st.integers(1, 2))), generator=_seeded(draw(st.integers(0, 99))))
            x = x.to(draw(st.sampled_from([torch.float32, torch.float64, torch.int64])))
        kwargs["x"] = draw(mutate(x))
    return Case("wl_order", ops.wl_order, (graph,), kwargs)


SMILES = ["CCO", "c1ccccc1O", "C1CC", "", "[Na+].[Cl-]", "C" * 60, "not a smiles", "O=C=O", "[Al](Cl)(Cl)(Cl)(Cl)Cl"]


@st.composite
def canonical_case(draw):
    item = st.one_of(st.sampled_from(SMILES), junk())
    mols = draw(st.one_of(item, st.lists(item, max_size=4)))
    return Case("canonical_order_from_mol", canonical_order_from_mol, (mols,))


# ============================================================================ targets: data
@st.composite
def graph_batch_case(draw):
    g = draw(small_graphs(max_graphs=3, max_nodes=5)).obj
    N, E, B = g.total_nodes, g.num_edges, g.num_graphs
    edge_index = draw(st.one_of(mutate(g.edge_index, index=True), mutate(g.edge_index, index=True),
                                st.just(torch.tensor([[0, 2**40], [2**40, 0]])), junk()))
    kwargs = {}
    which = draw(st.sampled_from(["batch", "ptr", "num_nodes", "none", "both"]))
    if which in ("batch", "both"):
        kwargs["batch"] = draw(mutate(g.batch, index=True))
        if draw(st.booleans()):
            kwargs["num_graphs"] = draw(scalar_int(st.just(B), lo=-1, hi=5))
    if which in ("ptr", "both"):
        kwargs["ptr"] = draw(mutate(g.ptr, index=True))
    if which == "num_nodes":
        kwargs["num_nodes"] = draw(st.one_of(st.just(N), st.sampled_from([3.7, "5", 2**20, 2**40, 2**63, -1]),
                                             scalar_int(st.just(N))))
    if draw(st.booleans()):
        kwargs["x"] = draw(mutate(torch.randn(N, draw(st.integers(1, 3)))))
    if draw(st.booleans()):
        kwargs["edge_attr"] = draw(mutate(torch.randn(E, draw(st.integers(1, 2)))))
    select = draw(st.one_of(st.lists(st.integers(-1, B), max_size=4), st.just([0, 0]), junk()))

    def views(batch):
        _ = (batch.ptr, batch.num_nodes, batch.batch, batch.rowptr, batch.col, batch.t_rowptr, batch.t_col,
             batch.undirected_csr(), batch.node_mask, batch.dense_adj())
        if batch.x is not None:
            batch.dense_x()
        try:
            batch.select(select)
        except fuzzing.CLEAN_ERRORS:
            pass

    return Case("GraphBatch", GraphBatch, (edge_index,), kwargs, after=views)


@st.composite
def from_edge_lists_case(draw):
    graphs = []
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(0, 5))
        pairs = draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))), max_size=6))
        ei = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t()
        graphs.append([draw(mutate(ei, index=True)), draw(scalar_int(st.just(n), lo=-1, hi=6))])
    graphs = draw(st.one_of(st.just(graphs), st.just(graphs), junk()))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["x"] = draw(st.one_of(st.lists(st.integers(0, 5).map(lambda n: torch.randn(n, 2)), max_size=4), junk()))
    if draw(st.booleans()):
        kwargs["edge_attr"] = draw(st.one_of(st.lists(st.integers(0, 5).map(lambda e: torch.randn(e)), max_size=4),
                                             junk()))
    return Case("GraphBatch.from_edge_lists", GraphBatch.from_edge_lists, (graphs,), kwargs,
                after=lambda b: (b.dense_adj(), b.undirected_csr()))


@st.composite
def from_networkx_case(draw):
    graphs = []
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(0, 5))
        G = (nx.DiGraph if draw(st.booleans()) else nx.Graph)()
        labels = draw(st.sampled_from(["int", "shifted", "str"]))
        name = (lambda v: v) if labels == "int" else (lambda v: v + 10) if labels == "shifted" else (lambda v: f"v{v}")
        for v in range(n):
            if draw(st.booleans()):
                G.add_node(name(v), feat=draw(st.one_of(st.floats(-2, 2), st.lists(st.floats(-2, 2), min_size=1,
                                                                                      max_size=2), junk())))
            else:
                G.add_node(name(v))
        for u, v in draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))),
                                  max_size=6)) if n else []:
            G.add_edge(name(u), name(v), w=draw(st.one_of(st.floats(-2, 2), junk())))
        graphs.append(G)
    graphs = draw(st.one_of(st.just(graphs), st.just(graphs), junk()))
    kwargs = {}
    if draw(st.booleans()):
        kwargs["node_attr"] = draw(st.sampled_from(["feat", "missing", None]))
    if draw(st.booleans()):
        kwargs["edge_attr"] = draw(st.sampled_from(["w", "missing", None]))
    def describe(G):
        if not hasattr(G, "nodes"):
            return show(G)
        return f"{type(G).__name__}(nodes={list(G.nodes(data=True))}, edges={list(G.edges(data=True))})"

    desc = "[" + ", ".join(describe(G) for G in graphs) + "]" if isinstance(graphs, list) else show(graphs)
    return Case("GraphBatch.from_networkx", GraphBatch.from_networkx, (Described(graphs, desc),), kwargs,
                after=lambda b: b.dense_adj())


@st.composite
def from_pyg_case(draw):
    from torch_geometric.data import Batch, Data

    datas = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 4))
        ei = torch.randint(0, max(n, 1), (2, draw(st.integers(0, 4)) if n else 0))
        kwargs = {"edge_index": draw(mutate(ei, index=True))}
        if draw(st.booleans()):
            kwargs["x"] = draw(mutate(torch.randn(n, 2)))
        else:
            kwargs["num_nodes"] = n
        datas.append(Data(**kwargs))
    which = draw(st.sampled_from(["batch", "data", "list", "junk"]))

    def build():
        if which == "batch":
            return Batch.from_data_list(datas)
        if which == "data":
            return datas[0]
        return datas if which == "list" else None

    try:
        obj = build()
    except Exception:  # PyG itself refused: fall back to junk
        obj = None
    obj = obj if which != "junk" else draw(junk())
    fn = draw(st.sampled_from(["from_pyg", "constructor"]))
    call = GraphBatch.from_pyg if fn == "from_pyg" else GraphBatch
    return Case(f"GraphBatch.{fn}(pyg {which})", call, (Described(obj, f"<PyG {which}: {datas}>"),),
                after=lambda b: b.dense_adj())


@st.composite
def smiles_case(draw):
    item = st.one_of(st.sampled_from(SMILES), junk())
    arg = draw(st.one_of(item, st.lists(item, max_size=3)))
    kwargs = {"skip_invalid": draw(maybe(st.booleans(), junk()))} if draw(st.booleans()) else {}
    return Case("batch_from_smiles", batch_from_smiles, (arg,), kwargs)


# ============================================================================ targets: nn
@st.composite
def gin_conv_case(draw):
    graph = draw(graph_arg(max_nodes=5))
    x = draw(node_features(graph))
    F = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() else 2
    dtype = x.dtype if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else torch.float32
    mlp = draw(st.one_of(st.just(Described(torch.nn.Linear(F, 3).to(dtype), f"Linear({F}, 3)")),
                         st.just(Described(torch.nn.Identity(), "Identity()")), junk()))
    ckw = {}
    if draw(st.booleans()):
        ckw["eps"] = draw(st.one_of(st.floats(allow_nan=True), junk()))
    if draw(st.booleans()):
        ckw["train_eps"] = draw(maybe(st.booleans(), junk()))
    if draw(st.integers(0, 4)) == 0:
        ckw[draw(st.sampled_from(["aggr", "flow", "node_dim"]))] = draw(st.sampled_from(["add", "mean",
                                                                                         "target_to_source", 0]))
    fkw = {}
    if draw(st.integers(0, 4)) == 0:
        fkw["size"] = draw(st.one_of(st.tuples(st.integers(0, 6), st.integers(0, 6)), junk()))
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and draw(st.booleans()):
        x = x.requires_grad_()

    def call(mlp, x, graph, **fkw):
        conv = GINConv(mlp, **ckw)
        return conv(x, graph, **fkw)

    return Case(f"GINConv(nn, {', '.join(f'{k}={v!r}' for k, v in ckw.items())})", call, (mlp, x, graph), fkw)


def _gin_dims(draw):
    return dict(in_dim=draw(module_int(st.integers(0, 3), lo=-1, hi=4)), hidden=draw(module_int(st.integers(1, 4))),
                num_layers=draw(module_int(st.integers(1, 3))), out_dim=draw(module_int(st.integers(1, 3))))


@st.composite
def gin_case(draw):
    dims = _gin_dims(draw)
    extra = {}
    if draw(st.booleans()):
        extra["id_dim"] = draw(module_int(st.integers(0, 4)))
    if draw(st.booleans()):
        extra["mlp_layers"] = draw(module_int(st.integers(1, 3)))
    if draw(st.integers(0, 3)) == 0:
        extra["dropout"] = draw(st.one_of(st.floats(0, 1), st.floats(allow_nan=True), junk()))
    graph = draw(graph_arg(max_nodes=5))
    N = _n(graph)
    in_dim = dims["in_dim"] if type(dims["in_dim"]) is int and 0 <= dims["in_dim"] < 10 else 2
    x = draw(st.one_of(st.none(), mutate(torch.randn(N, in_dim) if N < 10**4 else torch.zeros(N, in_dim))))
    ids = None
    if draw(st.booleans()):
        raw = extra.get("id_dim", 0)
        id_dim = raw if type(raw) is int and 0 < raw < 100 else 2
        R = draw(st.integers(1, 2))
        ids = torch.randint(0, max(min(id_dim, 100), 1), (R, N)) if N < 10**4 else torch.zeros(R, N, dtype=torch.int64)
        ids = draw(mutate(ids, index=True))
    training = draw(st.booleans())

    def call(x, graph, ids):
        model = GIN(**dims, **extra).train(training)
        if x is not None and isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            x = x.clone().requires_grad_()
        return model(x, graph, ids=ids)

    shown = ", ".join(f"{k}={show(v)}" for k, v in {**dims, **extra}.items())
    return Case(f"GIN({shown}).train({training})", call, (x, graph, ids))


@st.composite
def rpgin_case(draw):
    dims = _gin_dims(draw)
    extra = {"id_dim": draw(module_int(st.integers(1, 5)))}
    counts = {}  # the strategy's (built inside the call: malformed counts must fail cleanly there)
    if draw(st.booleans()):
        counts["eval_samples"] = draw(module_int(st.integers(1, 3)))
    if draw(st.booleans()):
        counts["train_samples"] = draw(module_int(st.integers(1, 3)))
    extra["generator"] = draw(gen_arg())
    graph = draw(graph_arg(max_nodes=5))
    N = _n(graph)
    in_dim = dims["in_dim"] if type(dims["in_dim"]) is int and 0 <= dims["in_dim"] < 10 else 2
    x = draw(st.one_of(st.none(), mutate(torch.randn(N, in_dim) if N < 10**4 else torch.zeros(N, in_dim))))
    training = draw(st.booleans())
    method = draw(st.sampled_from(["forward", "graph_embedding"]))

    def call(x, graph):
        strategy = PiSGD(**counts) if counts else None
        model = RPGIN(**dims, **extra, strategy=strategy).train(training)
        return getattr(model, method)(x, graph)

    shown = ", ".join(f"{k}={show(v)}" for k, v in {**dims, **extra, **counts}.items())
    return Case(f"RPGIN({shown}).train({training}).{method}", call, (x, graph))


class _Flatten(torch.nn.Module):
    """Permutation-sensitive f for RelationalPooling: a sum of a linear map of each input."""

    def forward(self, adj, x):
        return adj.flatten(1).sum(1, keepdim=True) + x.flatten(1).sum(1, keepdim=True)


@st.composite
def relational_pooling_case(draw):
    kw = {}
    for name, valid in (("train_samples", st.integers(1, 3)), ("eval_samples", st.integers(1, 3))):
        if draw(st.booleans()):
            kw[name] = draw(module_int(valid))
    if draw(st.booleans()):
        kw["k"] = draw(st.one_of(st.none(), module_int(st.integers(1, 6))))
    kw["generator"] = draw(gen_arg())
    training = draw(st.booleans())
    if draw(st.booleans()):
        g = draw(graph_arg(max_nodes=5))
        if isinstance(unwrap(g), GraphBatch) and unwrap(g).total_nodes < 10**4 and draw(st.booleans()):
            gb = unwrap(g)
            g = Described(GraphBatch(gb.edge_index, x=torch.randn(gb.total_nodes, 2), ptr=gb.ptr),
                          f"{g.desc} with x [N, 2]")
        args = (g,)
    else:
        B, n = draw(st.integers(0, 3)), draw(st.integers(0, 5))
        adj = draw(mutate(torch.rand(B, n, n, 1)))
        x = draw(mutate(torch.randn(B, n, 2)))
        sizes = draw(mutate(torch.tensor([draw(st.integers(0, n + 2)) for _ in range(B)], dtype=torch.int64),
                            index=True))
        args = (adj, x, sizes)

    def call(*args):
        counts = {name: kw[name] for name in ("train_samples", "eval_samples", "k") if name in kw}
        strategy = PiSGD(**counts) if counts else None  # built here: malformed counts must fail cleanly
        model = RelationalPooling(_Flatten(), strategy, generator=kw["generator"]).train(training)
        return model(*args)

    shown = ", ".join(f"{k}={show(v)}" for k, v in kw.items())
    return Case(f"RelationalPooling(f, {shown}).train({training})", call, args)


# ============================================================================ targets: CLI
def _cli(argv):
    """Run ``rpfast ARGV`` in-process; returns (exit code, stdout, stderr)."""
    from rpfast.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def _check_exit(code, err, argv):
    if code in (0, None):
        return
    assert code == 2, f"exit code {code!r}"
    assert "Traceback" not in err, f"traceback on stderr:\n{err[-2000:]}"
    assert err.strip(), "non-zero exit without a message"


TOKENS = ["0", "1", "2", "3", "4", "5", "7", "-1", "9223372036854775808", "1e3", "x", "a,b", "0x10", "1.5", "#",
          "2 # note"]


def parse_edge_list(content: bytes):
    """Reference reader: ``(pairs, singles)`` of ints, or None unless every line holds one
    or two integer tokens within int64 (after '#' comments), in UTF-8."""
    import re

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    pairs, singles = [], []
    for line in text.splitlines():
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) > 2 or not all(re.fullmatch(r"[+-]?[0-9]+", t) for t in tokens):
            return None
        values = [int(t) for t in tokens]
        if any(not -2**63 <= v < 2**63 for v in values):
            return None
        (pairs.append(tuple(values)) if len(values) == 2 else singles.append(values[0]))
    return pairs, singles


@st.composite
def edge_list_text(draw):
    """File content (bytes) for an edge-list file: mostly valid, sometimes not."""
    kind = draw(st.sampled_from(["valid", "valid", "valid", "tokens", "csv", "binary", "empty", "comments"]))
    if kind == "valid":
        n = draw(st.integers(1, 8))
        pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12))
        singles = draw(st.lists(st.integers(0, 12), max_size=2))
        lines = [f"{u} {v}" for u, v in pairs] + [str(s) for s in singles]
        if draw(st.booleans()):
            lines.insert(0, "# comment")
        return "\n".join(lines).encode()
    if kind == "tokens":
        lines = [" ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=3))) for _ in
                 range(draw(st.integers(1, 4)))]
        return "\n".join(lines).encode()
    if kind == "csv":
        return b"smiles,label\nCCO,1\nc1ccccc1,0\n"
    if kind == "binary":
        return draw(st.sampled_from([b"\xff\xfe\x00\x01", b"0 1\n\x80\x81 2\n", b"\x00\x00"]))
    if kind == "comments":
        return b"# nothing here\n\n   \n"
    return b""


def _reference_rows(pairs, singles, k, prune):
    """Brute-force subsets (original labels), as the CLI should print them."""
    labels = sorted({v for p in pairs for v in p} | set(singles))
    G = nx.Graph()
    G.add_nodes_from(labels)
    G.add_edges_from((u, v) for u, v in pairs if u != v)
    return [",".join(map(str, c)) for c in itertools.combinations(labels, k) if keep_subset(G, c, prune)]


@st.composite
def cli_subsets_case(draw):
    content = draw(edge_list_text())
    parsed = parse_edge_list(content)
    k = draw(maybe(st.sampled_from(["1", "2", "3"]), st.sampled_from(["0", "-1", "9223372036854775808",
                                                                       str(2**63 - 1), "70", "x", "", "2.0"])))
    prune = draw(maybe(st.sampled_from(PRUNES), st.sampled_from(["NONE", "", "all"])))
    where = draw(st.sampled_from(["file", "file", "file", "missing", "directory", "smiles"]))
    out = draw(st.sampled_from(["-", "-", "csv", "npy", "txt", "dir", "under_file", "existing_csv"]))
    count = draw(st.integers(0, 3)) == 0
    chunk = draw(st.one_of(st.none(), st.sampled_from(["1", "2", "0", "-1", "9223372036854775808", "x"])))
    smiles = draw(st.sampled_from(SMILES))

    def run(content):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            graph = tmp / "graph.txt"
            if where == "file":
                graph.write_bytes(content)
            elif where == "directory":
                graph.mkdir()
            argv = ["subsets", smiles if where == "smiles" else str(graph), "--k", k, "--prune", prune,
                    "--no-progress"]
            if where == "smiles":
                argv.append("--smiles")
            if count:
                argv.append("--count")
            if chunk is not None:
                argv += ["--chunk-size", chunk]
            target = {"-": "-", "csv": tmp / "o.csv", "npy": tmp / "o.npy", "txt": tmp / "o.txt", "dir": tmp,
                      "under_file": tmp / "graph.txt" / "o.csv", "existing_csv": tmp / "e.csv"}[out]
            if out == "existing_csv":
                target.write_text("keep me\n")
            argv += ["--out", str(target)]
            code, stdout, err = _cli(argv)
            _check_exit(code, err, argv)
            valid_args = k in ("1", "2", "3") and prune in PRUNES and chunk not in ("0", "-1", "x",
                                                                                    "9223372036854775808")
            if where == "file" and parsed is None and valid_args and out in ("-", "csv", "npy"):
                # Not an edge list of integers: the command must refuse it and name the file.
                assert code == 2 and str(graph) in err, f"accepted a non-edge-list file (exit {code})"
            if where == "file" and parsed is not None and valid_args and out in ("-", "csv", "npy"):
                assert code in (0, None), f"refused a valid edge list (exit {code}): {err[-500:]}"
                expected = _reference_rows(*parsed, int(k), prune)
                if count:
                    assert stdout.strip() == str(len(expected)), (stdout, len(expected))
                elif out == "-":
                    assert stdout.split() == expected, (stdout, expected)
                elif out == "csv":
                    assert target.read_text().split() == expected
                elif out == "npy":
                    rows = [",".join(map(str, r)) for r in np.load(target).tolist()]
                    assert rows == expected

    return Case(f"rpfast subsets [file={content!r}, where={where}, k={k!r}, prune={prune!r}, out={out}, "
                f"count={count}, chunk_size={chunk!r}, smiles={smiles!r}]", run, (content,), after=lambda _: None)


@st.composite
def cli_csl_case(draw):
    opts = {
        "--epochs": maybe(st.sampled_from(["1"]), st.sampled_from(["0", "-1", "x", "9223372036854775808", "1.5"])),
        "--folds": maybe(st.sampled_from(["2"]), st.sampled_from(["1", "16", "0", "x", "-3"])),
        "--seeds": maybe(st.just("1"), st.sampled_from(["0", "-1", "x"])),
        "--id-dim": maybe(st.sampled_from(["1", "5", "50"]), st.sampled_from(["0", "-1", "9223372036854775808"])),
        "--hidden": maybe(st.sampled_from(["2", "3"]), st.sampled_from(["0", "-1", "x"])),
        "--layers": maybe(st.sampled_from(["1", "2"]), st.sampled_from(["0", "-1"])),
        "--lr": maybe(st.sampled_from(["0.01", "1e-3"]), st.sampled_from(["0", "-1", "inf", "nan", "-inf", "x", "1e400"])),
        "--batch-size": maybe(st.sampled_from(["16", "150", "1000"]), st.sampled_from(["0", "-1", "x"])),
        "--inference-perms": maybe(st.sampled_from(["1", "2"]), st.sampled_from(["0", "-2", "x"])),
        "--data-seed": maybe(st.sampled_from(["0", "7"]), st.sampled_from(["-1", "x", "9223372036854775808", "2**40"])),
        "--threads": maybe(st.sampled_from(["1", "2"]), st.sampled_from(["0", "-1", "x", "9223372036854775808"])),
    }
    argv = ["csl", "--no-progress"]
    for name, strategy in opts.items():
        if name in ("--epochs", "--folds", "--hidden", "--layers") or draw(st.booleans()):
            argv += [name, draw(strategy)]
    out = draw(st.sampled_from(["fresh", "fresh", "existing_dir", "file", "under_file"]))
    # Bad options must be refused before any training: keep valid runs to a few seconds.

    def run(argv):
        before = torch.get_num_threads()
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "afile").write_text("x")
            target = {"fresh": tmp / "new", "existing_dir": tmp, "file": tmp / "afile",
                      "under_file": tmp / "afile" / "sub"}[out]
            argv = argv + ["--out", str(target)]
            try:
                code, _, err = _cli(argv)
            finally:
                torch.set_num_threads(before)
            _check_exit(code, err, argv)
            if code in (0, None):
                assert (target / "results.json").is_file(), "exit 0 without results.json"

    return Case(f"rpfast csl {argv} --out <{out}>", run, (argv,), after=lambda _: None)


# ============================================================================ registry
from tests.fuzz.malformed_files import GROUP as FILES  # noqa: E402 - the files users give the commands

GROUPS = {  # slowest groups first: the background workers take them in this order
    "subsets": {
        "k_subsets": (k_subsets_case("k_subsets"), 300),
        "count_k_subsets": (k_subsets_case("count_k_subsets"), 300),
        "iter_k_subsets": (k_subsets_case("iter_k_subsets"), 300),
        "sample_k_subsets": (k_subsets_case("sample_k_subsets"), 300),
    },
    "gnn": {
        "gin_aggregate": (gin_aggregate_case(), 400),
        "rooted_round": (rooted_round_case(), 200),
        "rooted_pool": (rooted_pool_case(), 200),
        "gin_mlp": (gin_mlp_case(), 300),
        "batch_norm_relu": (batch_norm_relu_case(), 400),
        "segment_sum": (segment_sum_case(), 300),
        "graph_sum": (graph_sum_case(), 200),
        "linear": (linear_case(), 300),
        "embedding": (embedding_case(), 300),
        "neighbour_max": (max_pool_case("neighbour_max"), 300),
        "graph_max": (max_pool_case("graph_max"), 300),
    },
    "orient": {
        "dfs_order": (traversal_case(True), 300),
        "bfs_order": (traversal_case(False), 300),
        "wl_order": (wl_case(), 300),
        "canonical_order_from_mol": (canonical_case(), 100),
    },
    "permute": {
        "permute_adjacency": (permute_case(nodes=False), 500),
        "permute_nodes": (permute_case(nodes=True), 400),
        "random_permutations": (random_permutations_case(), 400),
    },
    "data": {
        "GraphBatch": (graph_batch_case(), 400),
        "GraphBatch.from_edge_lists": (from_edge_lists_case(), 200),
        "GraphBatch.from_networkx": (from_networkx_case(), 150),
        "GraphBatch.from_pyg": (from_pyg_case(), 100),
        "batch_from_smiles": (smiles_case(), 100),
    },
    "nn": {
        "GINConv": (gin_conv_case(), 200),
        "GIN": (gin_case(), 200),
        "RPGIN": (rpgin_case(), 150),
        "RelationalPooling": (relational_pooling_case(), 200),
    },
    "cli": {
        "rpfast subsets": (cli_subsets_case(), 200),
        "rpfast csl": (cli_csl_case(), 20),
    },
}
if not os.environ.get("RPFAST_SANITIZER"):  # Python readers: nothing for the sanitizers to see
    GROUPS["files"] = FILES


# ============================================================================ runner
class Bad(AssertionError):
    pass


def _format_failure(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "\n\n".join(_format_failure(e) for e in error.exceptions)
    if isinstance(error, Bad):
        return str(error)
    return "".join(traceback.format_exception(error))[-4000:]


def run_op(op: str, strategy, ci_count: int, last_path: Path) -> dict:
    counter = {"n": 0}
    start = time.perf_counter()

    @fuzzing.fuzz_settings(ci_count)
    @given(strategy)
    def fuzz(case):
        counter["n"] += 1
        desc = case.desc
        last_path.write_text(f"{op}\n{counter['n']}\n{desc}\n")
        try:
            with fuzzing.hang_watchdog(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                case.run()
        except fuzzing.CLEAN_ERRORS:
            pass
        except BaseException as error:  # noqa: B902 - everything else is a finding
            tb = "".join(traceback.format_exception(error))[-2500:]
            raise Bad(f"{op}: {desc}\n  raised {type(error).__name__}: {str(error)[:600]}\n{tb}") from None

    fuzz.__qualname__ = fuzz.__name__ = f"fuzz_{op.replace(' ', '_').replace('.', '_')}"
    failure = None
    try:
        fuzz()
    except BaseException as error:  # noqa: B902
        failure = _format_failure(error)
    return {"op": op, "count": counter["n"], "failure": failure, "seconds": round(time.perf_counter() - start, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("group", choices=sorted(GROUPS))
    parser.add_argument("--result", required=True)
    parser.add_argument("--last", required=True)
    parser.add_argument("--skip", default="")
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    faulthandler.enable()
    if not os.environ.get("RPFAST_SANITIZER"):
        # A safety net: an unguarded huge allocation fails here instead of exhausting the
        # machine (ASan reserves terabytes of address space, so not under the sanitizers).
        import resource

        limit = int(os.environ.get("RPFAST_FUZZ_ADDRESS_LIMIT", str(12 * 2**30)))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # What one result may take: well within the limit above, so every size check must
    # refuse bigger results cleanly.
    import rpfast

    (getattr(rpfast, "set_memory_budget", None) or ops.set_memory_budget)(256 * 2**20)
    skip = set(filter(None, args.skip.split(",")))
    only = set(filter(None, args.only.split(",")))
    last = Path(args.last)
    for op, (strategy, ci_count) in GROUPS[args.group].items():
        if op in skip or (only and op not in only):
            continue
        result = run_op(op, strategy, ci_count, last)
        with open(args.result, "a") as fh:
            fh.write(json.dumps(result) + "\n")
        print(f"{op}: {result['count']} inputs in {result['seconds']} s"
              + (" FAILED" if result["failure"] else ""), flush=True)
    last.write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main())
