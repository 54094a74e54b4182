"""k-ary subgraph enumeration: k-subsets of vertices with pruning, counting, streaming, sampling.

k-ary Relational Pooling (paper Sec. 2.3.3, eq. 5) sums a function over the k-vertex
induced subgraphs of a graph; subsets whose induced subgraph is only isolated vertices
can be skipped. ``prune`` (a :class:`Prune` or its string value) names which k-subsets S
are dropped (on the underlying simple undirected graph; self-loops are not edges):

* ``"none"``: nothing is dropped, all C(n, k) are kept;
* ``"edgeless"``: drop S whose induced subgraph has no edge (the paper's "k isolated vertices");
* ``"isolated"``: drop S in which any vertex has no neighbour inside S;
* ``"disconnected"``: drop S whose induced subgraph is disconnected (keep the connected ones).
  ``"connected"`` is its deprecated former name (a ``DeprecationWarning``, same result).

Pruning happens inside the C++ search (prefixes that cannot be completed are cut; the
connected search is ESU, which only visits connected sets). Rows hold local vertex ids in
increasing order, lexicographically sorted within a graph; results do not depend on the
thread count.

Counting and uniform sampling take work bounded per graph by ``max_visits`` steps
(:data:`DEFAULT_MAX_VISITS`; a step is a set a search visits or a random subset drawn, plus
one per 64 neighbour-list entries or vertices it goes through), so they answer in well under
a second or raise a ``ValueError`` that names the graph, its C(n, k) subsets and
``max_visits``. Dense graphs rarely come near it: components that are cliques have closed
forms, other components are counted through their complement (the few independent sets, or
connected sets with a vertex adjacent to none of them, that decide the count:
``csrc/rpfast/subsets_complement.hpp``), and sampling draws uniform k-subsets and rejects
the pruned ones where most are kept (``csrc/rpfast/subsets_rejection.hpp``). On K_n
(k >= 2) every mode keeps all C(n, k) subsets, found at once. Enumeration (:func:`k_subsets`,
:func:`iter_k_subsets`) is bounded by the memory budget and the output instead.
"""
import bisect
import enum
import itertools
import math
import random
import warnings
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast._validation import INT64_MAX, check_int, check_memory, check_output_size, get_memory_budget, set_memory_budget
from rpfast import _backend
from rpfast.ops.random import random_permutations, seed_from_generator

__all__ = [
    "Prune",
    "k_subsets",
    "count_k_subsets",
    "iter_k_subsets",
    "sample_k_subsets",
    "SubsetChunk",
    "SubsetStream",
    "get_memory_budget",
    "set_memory_budget",
    "PRUNE_MODES",
    "DEFAULT_MAX_VISITS",
]


class Prune(str, enum.Enum):
    """Which k-subsets an enumeration drops (module docstring). A ``str``, so it compares
    equal to its value; ``code`` is the number the compiled kernels take."""

    NONE = ("none", 0)
    EDGELESS = ("edgeless", 1)
    ISOLATED = ("isolated", 2)
    DISCONNECTED = ("disconnected", 3)

    code: int

    def __new__(cls, value: str, code: int):
        member = str.__new__(cls, value)
        member._value_ = value
        member.code = code
        return member

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value):
        if value == _DEPRECATED_CONNECTED:  # Prune("connected")
            _warn_connected(stacklevel=5)
            return cls.DISCONNECTED
        return None


# value string -> Prune (the deprecated alias "connected" is not listed)
PRUNE_MODES = {p.value: p for p in Prune}
_DEPRECATED_CONNECTED = "connected"
UINT64_MAX = 2**64 - 1


def _warn_connected(stacklevel: int) -> None:
    warnings.warn('prune="connected" was renamed "disconnected" (prune names what is dropped: subsets whose '
                  'induced subgraph is disconnected); "connected" will be removed', DeprecationWarning,
                  stacklevel=stacklevel)


def _prune(prune) -> Prune:
    """``prune`` as a :class:`Prune`: the enum or its string value (``"connected"`` warns).

    Called directly by the public functions, so the warning points at their caller."""
    if isinstance(prune, Prune):
        return prune
    if isinstance(prune, str):
        if prune == _DEPRECATED_CONNECTED:
            _warn_connected(stacklevel=4)
            return Prune.DISCONNECTED
        if prune in PRUNE_MODES:
            return PRUNE_MODES[prune]
    raise ValueError(f"prune must be one of {list(PRUNE_MODES)} (or an rpfast.ops.subsets.Prune), got {prune!r}")


class SubsetChunk(NamedTuple):
    """A piece of an enumeration: ``subsets [c, k]`` (local ids) and ``graph [c]`` (graph index)."""

    subsets: Tensor
    graph: Tensor


GraphLike = Union[GraphBatch, Tensor]


def _as_batch(graph: GraphLike, num_nodes: Optional[int]) -> GraphBatch:
    if isinstance(graph, GraphBatch):
        if num_nodes is not None:
            raise ValueError("num_nodes is only for a bare edge_index; a GraphBatch knows its sizes")
        return graph
    if isinstance(graph, (Tensor, np.ndarray, list, tuple)):
        return GraphBatch(graph, num_nodes=num_nodes)
    raise TypeError(f"graph must be a GraphBatch or an edge_index [2, E], got {type(graph).__name__}")


def _arrays(batch: GraphBatch) -> Tuple[Tensor, Tensor, Tensor]:
    """The kernels' view of a batch: ptr [B + 1] and the undirected CSR (rowptr [N + 1], col [E])."""
    rowptr, col = batch.undirected_csr()
    return batch.ptr, rowptr, col


def _task_counts(batch: GraphBatch, k: int, prune: Prune, budget: Optional[int] = None) -> np.ndarray:
    """Subsets per (graph, root vertex) task as uint64.

    Counting stops as soon as one graph passes 2^63 - 1 subsets (OverflowError) or, with
    a ``budget`` in bytes, as soon as the batch has more rows than fit in it (ValueError),
    so it never runs far beyond what could be counted or stored.
    """
    max_rows = UINT64_MAX if budget is None else budget // (8 * k)
    counts, exceeded, graph = _backend.call("subsets_count", *_arrays(batch), k, prune.code, INT64_MAX, max_rows)
    if exceeded and graph >= 0:
        raise OverflowError(f"graph {graph} has more than 2^63 - 1 {prune.value!r} {k}-subsets, more than a 64-bit "
                            f"count holds")
    if exceeded:
        _check_rows(max_rows + 1, k, prune, budget, at_least=True)
    return counts


def _check_rows(total: int, k: int, prune: Prune, budget: int, at_least: bool = False) -> None:
    """ValueError if ``total`` rows of k int64 ids exceed ``budget`` bytes."""
    check_memory(total * k * 8, f"{'more than ' if at_least else ''}{total - at_least} {prune.value!r} {k}-subsets",
                 "stream them with iter_k_subsets or count them with count_k_subsets", budget=budget)


def _per_graph(batch: GraphBatch, task_counts: Optional[np.ndarray], k: int, prune: Prune) -> List[int]:
    """Exact per-graph totals as Python ints (overflow-safe)."""
    ptr = batch.ptr.numpy()
    if prune is Prune.NONE:
        return [math.comb(int(n), k) for n in np.diff(ptr)]
    # Cumulative uint64 sums are exact unless the grand total nears 2^64 (checked in float64);
    # only then fall back to Python ints.
    if float(task_counts.astype(np.float64).sum()) < 2.0**62:
        cumulative = np.concatenate([[0], np.cumsum(task_counts, dtype=np.uint64)])
        return [int(v) for v in cumulative[ptr[1:]] - cumulative[ptr[:-1]]]
    return [sum(int(c) for c in task_counts[ptr[b]:ptr[b + 1]]) for b in range(batch.num_graphs)]


def count_k_subsets(graph: GraphLike, k: int, prune: Union[Prune, str] = Prune.NONE,
                    num_nodes: Optional[int] = None, max_visits: Optional[int] = None) -> Tensor:
    """Exact number of kept k-subsets per graph, without materialising them.

    ``prune`` is a :class:`Prune` or its value (module docstring). ``"none"`` uses the
    closed form C(n, k). The other modes first search each graph (the pruned search, only
    counting) for at most ``max_visits // 64`` steps; a graph that needs more is counted
    from its connected components, exactly: a clique's counts have closed forms, and each
    other component is counted through its complement (module docstring) or, where that
    takes too long, searched again with what is left of ``max_visits``.

    Args:
        max_visits: the most steps one graph's count may take (module docstring), default
            :data:`DEFAULT_MAX_VISITS`.

    Returns LongTensor ``[B]``. Raises ``OverflowError`` if a count does not fit in 64
    bits (the enumeration could never be stored anyway), and ``ValueError`` naming the
    graph and its C(n, k) if counting it takes more than ``max_visits`` steps (counting
    the connected induced subgraphs of a graph is #P-hard in general).
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    prune = _prune(prune)
    max_visits = _check_max_visits(max_visits)
    if prune is Prune.NONE:
        counts = _per_graph(batch, None, k, prune)
    else:
        counts = _pruned_counts(batch, k, prune, max_visits)
    for b, c in enumerate(counts):
        if c > INT64_MAX:
            raise OverflowError(f"graph {b} has {c} {prune.value!r} {k}-subsets, more than a 64-bit count holds")
    return torch.tensor([int(c) for c in counts], dtype=torch.int64)


# ------------------------------------------------------------------ bounded counting and sampling
DEFAULT_MAX_VISITS = 1 << 25
"""Default ``max_visits`` of :func:`count_k_subsets` and :func:`sample_k_subsets`: the steps
(module docstring) one graph may take: about a second of work at most (the fallback search runs
~30 M steps a second on one core; the closed forms and most graphs need far fewer)."""

_FIRST_PASS = 64  # the batched first count of every graph gets max_visits // _FIRST_PASS steps
_COMPLEMENT_SHARE = 4  # the complement searches of one graph get at most max_visits // _COMPLEMENT_SHARE
_MAX_PIECES = 256  # more components that are not cliques: no structural count (a kernel call each)
_COMPLEMENT_BYTES = 256 * 2**20  # the complement searches' bitset rows (and within the memory budget)
# Rejection sampling (csrc/rpfast/subsets_rejection.hpp) of an unfinished graph first runs with
# max_visits // _PILOT_SHARE; any rejection run may also take _FREE_DRAWS draws per sample
# besides max_visits (so where at least 1 / _FREE_DRAWS of the subsets are kept, any number of
# samples can be drawn); and a run whose kept fraction is known may take _REJECTION_SLACK
# times its expected draws before giving up (a geometric number of draws passes 64 times its
# mean with probability < e^-64).
_PILOT_SHARE = 4
_FREE_DRAWS = 64
_REJECTION_SLACK = 64
_BOUNDED_COMPLETE, _BOUNDED_COUNT_OVER, _BOUNDED_STEPS_OVER = 0, 1, 2  # subsets_count_bounded's status


def _check_max_visits(max_visits) -> int:
    return DEFAULT_MAX_VISITS if max_visits is None else check_int(max_visits, "max_visits", minimum=1)


def _comb(n: int, r: int) -> int:
    return math.comb(n, r) if 0 <= r <= n else 0


class _Budget:
    """The search steps (or random draws) left to one graph, and how many of them the complement
    searches may still take. Each kernel reports the steps it took; a graph's work is the sum."""

    def __init__(self, steps: int):
        self.total = self.left = steps
        self.complement = steps // _COMPLEMENT_SHARE

    def spend(self, steps: int, complement: bool = False) -> None:
        self.left = max(0, self.left - int(steps))
        if complement:
            self.complement = max(0, self.complement - int(steps))


class _Graph(NamedTuple):
    """One graph as the kernels take it: ``ptr [2]``, ``rowptr [n + 1]``, ``col`` (local ids)."""

    ptr: Tensor
    rowptr: Tensor
    col: Tensor

    @property
    def n(self) -> int:
        return int(self.ptr[1])


def _graph_of(batch: GraphBatch, b: int) -> _Graph:
    ptr, rowptr, col = _arrays(batch)
    lo, hi = int(ptr[b]), int(ptr[b + 1])
    first, last = int(rowptr[lo]), int(rowptr[hi])
    return _Graph(torch.tensor([0, hi - lo]), rowptr[lo:hi + 1] - first, col[first:last])


def _subgraph(g: _Graph, vertices: np.ndarray) -> _Graph:
    """``g`` induced on ``vertices`` (ascending, whole components), relabelled 0, 1, ... in order."""
    rowptr, col = g.rowptr.numpy(), g.col.numpy()
    degree = rowptr[vertices + 1] - rowptr[vertices]
    sub_rowptr = np.zeros(len(vertices) + 1, dtype=np.int64)
    np.cumsum(degree, out=sub_rowptr[1:])
    entries = np.repeat(rowptr[vertices] - sub_rowptr[:-1], degree) + np.arange(sub_rowptr[-1], dtype=np.int64)
    relabel = np.full(g.n, -1, dtype=np.int64)
    relabel[vertices] = np.arange(len(vertices), dtype=np.int64)
    return _Graph(torch.tensor([0, len(vertices)]), torch.from_numpy(sub_rowptr),
                  torch.from_numpy(relabel[col[entries]]))


class _Structure:
    """The connected components of one graph: sizes, which are cliques, their vertices."""

    def __init__(self, g: _Graph, labels: np.ndarray):
        self.sizes = np.bincount(labels, minlength=1 if g.n else 0).astype(np.int64)
        degree = np.diff(g.rowptr.numpy())
        self.clique = np.bincount(labels, weights=degree != self.sizes[labels] - 1,
                                  minlength=len(self.sizes)) == 0
        self._order = np.argsort(labels, kind="stable")
        self._starts = np.concatenate([[0], np.cumsum(self.sizes)])

    def vertices(self, c: int) -> np.ndarray:
        return self._order[self._starts[c]:self._starts[c + 1]]


def _component_labels(batch: GraphBatch) -> np.ndarray:
    labels = torch.empty(batch.total_nodes, dtype=torch.int64)
    _backend.call("graph_components", *_arrays(batch), labels)
    return labels.numpy()


def _bounded(g: _Graph, k: int, prune: Prune, steps: int, count_limit: int = INT64_MAX):
    """One graph's bounded count: ``(tasks [n] uint64, count, steps, status)``."""
    tasks, counts, used, status = _backend.call("subsets_count_bounded", g.ptr, g.rowptr, g.col, k, prune.code,
                                                 steps, count_limit)
    return tasks, int(counts[0]), int(used[0]), int(status[0])


def _piece_counts(piece: _Graph, sizes: range, prune: Prune, budget: _Budget) -> Optional[dict]:
    """For a connected graph that is not a clique, and each j in ``sizes`` (ascending, within
    [1, n]): the kept j-subsets (``"disconnected"``: j = k only; ``"isolated"``), or the
    independent j-sets (``"edgeless"``), exactly. Tries the complement search, then the
    enumeration; None when neither finishes within the budget."""
    n = piece.n
    bitset_bytes = n * ((n + 63) // 64) * 8
    if budget.complement > 0 and budget.left > 0 and bitset_bytes <= min(_COMPLEMENT_BYTES, get_memory_budget()):
        limit = min(budget.left, budget.complement)
        mode, a, b = (1, 0, sizes[-1]) if prune is Prune.DISCONNECTED else (0, sizes[0], sizes[-1])
        held, other, counts, steps, exceeded = _backend.call("subsets_complement_histogram", piece.ptr,
                                                             piece.rowptr, piece.col, 0, mode, a, b, limit)
        budget.spend(steps, complement=True)
        if not exceeded:
            hist = [(int(i), int(c), int(m)) for i, c, m in zip(held, other, counts)]
            if prune is Prune.DISCONNECTED:  # C(n, k) minus the disconnected k-sets
                k = sizes[-1]
                return {k: math.comb(n, k) - sum(m * _comb(c, k - i) for i, c, m in hist)}
            if prune is Prune.ISOLATED:  # inclusion-exclusion over the isolated vertices
                return {j: math.comb(n, j) + sum((-1) ** i * m * _comb(c, j - i) for i, c, m in hist) for j in sizes}
            return {j: sum(m for i, _, m in hist if i == j) for j in sizes}  # independent j-sets
    result = {}
    for j in sizes:
        if budget.left <= 0:
            return None
        _, kept, steps, status = _bounded(piece, j, prune, budget.left, UINT64_MAX - 1)
        budget.spend(steps)
        if status != _BOUNDED_COMPLETE:
            return None
        result[j] = math.comb(n, j) - kept if prune is Prune.EDGELESS else kept
    return result


def _poly_mul(a: np.ndarray, b: np.ndarray, degree: int) -> np.ndarray:
    return np.convolve(a, b)[:degree + 1]


def _poly_pow(a: np.ndarray, e: int, degree: int) -> np.ndarray:
    result = np.array([1], dtype=object)
    while e:
        if e & 1:
            result = _poly_mul(result, a, degree)
        e >>= 1
        if e:
            a = _poly_mul(a, a, degree)
    return result


def _clique_polynomial(s: int, k: int, prune: Prune) -> np.ndarray:
    """Coefficients j = 0..min(k, s) for a clique of s vertices: the j-subsets without an
    isolated vertex (``"isolated"``) or the independent j-sets (``"edgeless"``)."""
    if prune is Prune.ISOLATED:
        return np.array([1, 0] + [math.comb(s, j) for j in range(2, min(k, s) + 1)], dtype=object)[:min(k, s) + 1]
    return np.array([1, s], dtype=object)[:min(k, s) + 1]


def _structural_count(g: _Graph, structure: _Structure, k: int, prune: Prune, budget: _Budget) -> Optional[int]:
    """The kept k-subsets of ``g`` (n >= k) from its components, exactly; None if a component
    that is not a clique cannot be counted within the budget (or there are too many of them)."""
    n = g.n
    others = np.nonzero(~structure.clique)[0]
    if len(others) > _MAX_PIECES:
        return None
    sizes, multiplicity = np.unique(structure.sizes[structure.clique], return_counts=True)
    if prune is Prune.DISCONNECTED:  # a connected subset lies in one component
        total = sum(int(m) * math.comb(int(s), k) for s, m in zip(sizes, multiplicity))
        for c in others:
            if structure.sizes[c] >= k:
                counts = _piece_counts(_subgraph(g, structure.vertices(c)), range(k, k + 1), prune, budget)
                if counts is None:
                    return None
                total += counts[k]
        return total
    # "isolated" keeps S iff each component keeps its part; "edgeless" drops S iff every part is
    # independent: both are the coefficient of x^k in a product of per-component polynomials.
    product = np.array([1], dtype=object)
    for s, m in zip(sizes, multiplicity):
        product = _poly_mul(product, _poly_pow(_clique_polynomial(int(s), k, prune), int(m), k), k)
    for c in others:
        s = int(structure.sizes[c])
        lowest = max(1, k - (n - s))  # fewer vertices here cannot be completed by the others
        counts = _piece_counts(_subgraph(g, structure.vertices(c)), range(lowest, min(k, s) + 1), prune, budget)
        if counts is None:
            return None
        product = _poly_mul(product, np.array([1] + [counts.get(j, 0) for j in range(1, min(k, s) + 1)],
                                              dtype=object), k)
    at_k = int(product[k]) if len(product) > k else 0
    return at_k if prune is Prune.ISOLATED else math.comb(n, k) - at_k


def _count_graph(g: _Graph, labels: np.ndarray, k: int, prune: Prune, max_visits: int) -> Optional[int]:
    """The kept k-subsets of one graph (n >= k) with at most ``max_visits`` steps; None beyond."""
    return _structural_count(g, _Structure(g, labels), k, prune, _Budget(max_visits))


def _first_pass(batch: GraphBatch, k: int, prune: Prune, max_visits: int):
    """The batched first count: ``(tasks [N] uint64, counts [B] uint64, status [B])``."""
    tasks, counts, _, status = _backend.call("subsets_count_bounded", *_arrays(batch), k, prune.code,
                                              max(1, max_visits // _FIRST_PASS), INT64_MAX)
    return tasks, counts, status


def _too_much_counting(b: int, n: int, k: int, prune: Prune, max_visits: int) -> str:
    return (f"counting the {prune.value!r} {k}-subsets of graph {b} needs more than max_visits = {max_visits} "
            f"search steps: no closed form applies (its components are not cliques, and counting through its "
            f"complement takes too long too), and the search may visit up to C({n}, {k}) = {math.comb(n, k)} "
            f"subsets; pass a larger max_visits to count_k_subsets to let it run longer")


def _pruned_counts(batch: GraphBatch, k: int, prune: Prune, max_visits: int) -> List[int]:
    """Exact kept counts per graph (Python ints) for a prune mode other than none."""
    _, counts, status = _first_pass(batch, k, prune, max_visits)
    result = [int(c) for c in counts]
    labels = None
    ptr = batch.ptr.tolist()
    for b in np.nonzero(status != _BOUNDED_COMPLETE)[0].tolist():
        if status[b] == _BOUNDED_COUNT_OVER:
            raise OverflowError(f"graph {b} has more than 2^63 - 1 {prune.value!r} {k}-subsets, more than a 64-bit "
                                f"count holds")
        labels = _component_labels(batch) if labels is None else labels
        count = _count_graph(_graph_of(batch, b), labels[ptr[b]:ptr[b + 1]], k, prune, max_visits)
        if count is None:
            raise ValueError(_too_much_counting(b, ptr[b + 1] - ptr[b], k, prune, max_visits))
        result[b] = count
    return result


def _checked_offsets(batch: GraphBatch, k: int, prune: Prune, tasks: np.ndarray,
                     budget: Optional[int] = None) -> np.ndarray:
    """Row offsets [N + 1] of the tasks; checks the total against 2^63 and the budget."""
    totals = _per_graph(batch, tasks, k, prune)
    grand = sum(totals)
    if grand > INT64_MAX:
        raise OverflowError(f"{grand} {prune.value!r} {k}-subsets do not fit in a 64-bit count")
    if budget is not None:
        _check_rows(grand, k, prune, budget)
    offsets = np.zeros(len(tasks) + 1, dtype=np.int64)
    np.cumsum(tasks.astype(np.int64), out=offsets[1:])
    return offsets


def k_subsets(graph: GraphLike, k: int, prune: Union[Prune, str] = Prune.NONE, num_nodes: Optional[int] = None,
              max_bytes: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """All kept k-subsets of every graph.

    Args:
        graph: a :class:`~rpfast.data.GraphBatch`, or one graph's ``edge_index [2, E]``
            (then ``num_nodes`` gives its size; default ``edge_index.max() + 1``).
        k: subset size (>= 1). Graphs with fewer than k vertices contribute no rows.
        prune: what to drop, a :class:`Prune` or its value
            ``"none" | "edgeless" | "isolated" | "disconnected"`` (module docstring).
        max_bytes: refuse outputs larger than this (default :func:`get_memory_budget`).

    Returns:
        ``(subsets LongTensor [S, k], ptr LongTensor [B + 1])``: rows of graph b are
        ``subsets[ptr[b]:ptr[b+1]]``, local vertex ids ascending, rows lexicographic.

    Raises:
        ValueError if the output would exceed the budget (the message gives the count and
        points to :func:`iter_k_subsets` / :func:`count_k_subsets`).
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    prune = _prune(prune)
    budget = get_memory_budget() if max_bytes is None else check_int(max_bytes, "max_bytes", minimum=1)
    if prune is Prune.NONE:  # closed form: refuse before counting
        _check_rows(sum(math.comb(int(n), k) for n in batch.num_nodes.tolist()), k, prune, budget)
    tasks = _task_counts(batch, k, prune, budget)
    offsets = _checked_offsets(batch, k, prune, tasks, budget)
    total = int(offsets[-1])
    out = torch.empty((total, k), dtype=torch.int64)
    if total:
        _backend.call("subsets_fill", *_arrays(batch), k, prune.code, torch.from_numpy(offsets), 0, len(tasks), out)
    ptr = torch.from_numpy(offsets[batch.ptr.numpy()].copy())
    return out, ptr


class SubsetStream:
    """Iterable over the chunks of an enumeration (see :func:`iter_k_subsets`).

    ``total`` and ``counts`` (per graph) are known before the first chunk, e.g. for a
    progress bar or to preallocate an output file. Each iteration runs one compiled
    ``SubsetEnumerator``, built (and its graph checked) once, which keeps its position
    between chunks and writes each chunk into a freshly allocated tensor.
    """

    def __init__(self, batch: GraphBatch, k: int, prune: Prune, chunk_size: int):
        self._batch, self._k, self._prune, self._chunk = batch, k, prune, chunk_size
        tasks = _task_counts(batch, k, prune)
        offsets = _checked_offsets(batch, k, prune, tasks)
        self._offsets = torch.from_numpy(offsets)
        self.total = int(offsets[-1])
        check_memory(min(chunk_size, self.total) * k * 8, f"a chunk of {min(chunk_size, self.total)} {k}-subsets",
                     "lower chunk_size")
        self.counts = torch.from_numpy(np.diff(offsets[batch.ptr.numpy()]))

    def __iter__(self) -> Iterator[SubsetChunk]:
        enumerator = _backend.create("SubsetEnumerator", *_arrays(self._batch), self._k, self._prune.code,
                                     self._offsets, self._chunk)
        return _chunks(enumerator, self._k)


def _chunks(enumerator, k: int) -> Iterator[SubsetChunk]:
    """The chunks of a compiled SubsetEnumerator, each in new tensors."""
    while True:
        rows = enumerator.next_rows()
        if rows == 0:
            return
        subsets = torch.empty((rows, k), dtype=torch.int64)
        graph = torch.empty(rows, dtype=torch.int64)
        written = enumerator.fill(subsets, graph)
        yield SubsetChunk(subsets[:written], graph[:written])


def iter_k_subsets(graph: GraphLike, k: int, prune: Union[Prune, str] = Prune.NONE, chunk_size: int = 1 << 20,
                   num_nodes: Optional[int] = None) -> SubsetStream:
    """Stream the rows of :func:`k_subsets` in the same order, ``chunk_size`` rows at a time.

    ``prune`` is a :class:`Prune` or its value (module docstring). Returns a
    :class:`SubsetStream` (``.total``, ``.counts``) whose iteration yields
    :class:`SubsetChunk` ``(subsets [c, k], graph [c])`` with ``c <= chunk_size``;
    concatenating the chunks gives ``k_subsets(...)[0]``. Memory stays within
    ``chunk_size`` rows in every mode: a root vertex with more subsets than a chunk is
    resumed after the last row of the previous chunk.
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    prune = _prune(prune)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    return SubsetStream(batch, k, prune, chunk_size)


def sample_k_subsets(graph: GraphLike, k: int, num_samples: int, method: str = "uniform",
                     prune: Union[Prune, str] = Prune.NONE, generator: Optional[torch.Generator] = None,
                     num_nodes: Optional[int] = None, max_visits: Optional[int] = None) -> Tensor:
    """Random k-subsets of every graph: LongTensor ``[B, num_samples, k]`` (local ids).

    * ``"uniform"``: independent draws (with replacement), each uniform over the subsets that
      ``prune`` (a :class:`Prune` or its value) keeps, rows ascending. For ``"none"`` a
      partial Fisher-Yates shuffle. Otherwise exact by one of these: a graph whose pruned
      search takes at most ``max_visits // 64`` steps is counted and uniform indices into
      its enumeration are resolved in one more search; on a larger graph uniform k-subsets
      are drawn until one is kept (rejection sampling: fast where most subsets are kept, as
      on dense graphs), or, where too few are, its kept subsets are counted as
      :func:`count_k_subsets` does and drawn among by enumeration or by rejection, for
      ``"disconnected"`` within one connected component picked in proportion to its
      connected k-subsets. ``max_visits`` (default :data:`DEFAULT_MAX_VISITS`) bounds the
      steps (module docstring) spent on one graph, besides 64 random draws per sample: a
      ``ValueError`` names the graph, how many subsets it keeps (where known) and the draws
      or steps sampling it needs.
    * ``"bfs"`` / ``"dfs"``: grow a connected subgraph from a uniformly random start vertex
      (among those whose component has >= k vertices), visiting neighbours in random
      order, until it has k vertices; rows list the vertices in visiting order (k-ary RP
      combined with pi-SGD, paper Sec. 2.3.3). Such subsets survive every prune mode
      (for k = 1, ``"edgeless"`` and ``"isolated"`` drop every subset).

    Graphs with no admissible subset give rows of -1. Reproducible from ``generator``.
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    prune = _prune(prune)
    max_visits = _check_max_visits(max_visits)
    if method not in ("uniform", "bfs", "dfs"):
        raise ValueError(f"method must be 'uniform', 'bfs' or 'dfs', got {method!r}")
    B = batch.num_graphs
    # (one graph's rows at least: torch cannot even describe an empty [0, S, k] beyond 2^63 elements)
    check_output_size(max(B, 1) * num_samples * k, 8, f"sample_k_subsets output [B={B}, {num_samples}, k={k}]")
    if method in ("bfs", "dfs") and k == 1 and prune in (Prune.EDGELESS, Prune.ISOLATED):
        return torch.full((B, num_samples, k), -1, dtype=torch.int64)  # no single vertex has an edge
    if method in ("bfs", "dfs"):
        out = torch.empty((B, num_samples, k), dtype=torch.int64)
        _backend.call("sample_grown_subsets", *_arrays(batch), k, method == "dfs", seed_from_generator(generator), out)
        return out
    if prune is Prune.NONE:
        perms = random_permutations(batch.num_nodes, num_samples, k=k, generator=generator)
        too_small = (batch.num_nodes < k).view(B, 1, 1)
        return torch.where(too_small, torch.full_like(perms, -1), perms.sort(dim=-1).values)
    return _sample_uniform_pruned(batch, k, num_samples, prune, generator, max_visits)


def _sample_uniform_pruned(batch: GraphBatch, k: int, num_samples: int, prune: Prune, generator,
                           max_visits: int) -> Tensor:
    """Graphs whose first count finished: uniform indices into their enumerations (:func:`_pick`).
    The others one by one (:func:`_sample_graph`), in graph order."""
    tasks, _, status = _first_pass(batch, k, prune, max_visits)
    ptr = batch.ptr.numpy()
    unfinished = np.nonzero(status != _BOUNDED_COMPLETE)[0].tolist()
    if unfinished:
        tasks = tasks.copy()
        tasks[np.repeat(status != _BOUNDED_COMPLETE, np.diff(ptr))] = 0
    out = _pick(ptr, *_arrays(batch)[1:], tasks, k, prune, num_samples, generator)
    labels = _component_labels(batch) if unfinished else None
    for b in unfinished:
        out[b] = _sample_graph(_graph_of(batch, b), labels[ptr[b]:ptr[b + 1]], k, num_samples, prune, generator,
                               max_visits, b)
    return out


def _pick(ptr: np.ndarray, rowptr: Tensor, col: Tensor, tasks: np.ndarray, k: int, prune: Prune, num_samples: int,
          generator) -> Tensor:
    """``[B, num_samples, k]``: uniform indices into each graph's enumeration, whose per-task
    counts ``tasks`` [N] (uint64; each graph's total <= 2^63 - 1) are complete, resolved in one
    pass of the search that writes only the picked rows: O(num_samples) memory, whatever the
    enumeration. Graphs with no rows give -1 rows."""
    B = len(ptr) - 1
    if float(tasks.astype(np.float64).sum()) >= 2.0**62:  # offsets over all graphs may not fit: one at a time
        out = torch.full((B, num_samples, k), -1, dtype=torch.int64)
        for b in range(B):
            if tasks[ptr[b]:ptr[b + 1]].any():
                alone = np.zeros_like(tasks)
                alone[ptr[b]:ptr[b + 1]] = tasks[ptr[b]:ptr[b + 1]]
                out[b] = _pick(ptr, rowptr, col, alone, k, prune, num_samples, generator)[b]
        return out
    offsets = np.zeros(len(tasks) + 1, dtype=np.int64)
    np.cumsum(tasks.astype(np.int64), out=offsets[1:])
    first, totals = offsets[ptr[:-1]], offsets[ptr[1:]] - offsets[ptr[:-1]]
    picks = np.full((B, num_samples), -1, dtype=np.int64)
    for b in np.nonzero(totals)[0]:
        picks[b] = torch.randint(0, int(totals[b]), (num_samples,), generator=generator).numpy() + first[b]
    out = torch.full((B, num_samples, k), -1, dtype=torch.int64)
    valid = picks >= 0
    flat = picks[valid]
    if not len(flat):
        return out
    order = np.argsort(flat, kind="stable")
    ascending = flat[order]
    task_of = np.searchsorted(offsets, ascending, side="right") - 1
    pick_ptr = np.searchsorted(task_of, np.arange(len(tasks) + 1), side="left").astype(np.int64)
    local = (ascending - offsets[task_of]).astype(np.uint64)
    rows = torch.full((len(ascending), k), -1, dtype=torch.int64)
    _backend.call("subsets_pick", torch.from_numpy(ptr), rowptr, col, k, prune.code, torch.from_numpy(pick_ptr),
                  torch.from_numpy(local), rows)
    resolved = torch.empty_like(rows)
    resolved[torch.from_numpy(order)] = rows
    out[torch.from_numpy(valid)] = resolved
    return out


def _sample_graph(g: _Graph, labels: np.ndarray, k: int, num_samples: int, prune: Prune, generator,
                  max_visits: int, b: int) -> Tensor:
    """``[num_samples, k]`` for one graph (n >= k) whose first count did not finish.

    Unless all its components are cliques, rejection first, with a share of the budget:
    exactly uniform whenever it finishes (the subset a rejection run accepts is independent of
    the draws it took, so giving up on runs that take long biases nothing), and fast where
    most subsets are kept. Otherwise the kept subsets are counted (:func:`_structural_count`)
    and :func:`_sample_piece` picks the cheaper exact method; for ``"disconnected"``, one
    component per sample first."""
    budget = _Budget(max_visits)
    what = f"graph {b}"
    structure = _Structure(g, labels)
    if not structure.clique.all():  # (on cliques alone counting costs nothing)
        rows, exceeded = _rejection(g, k, prune, num_samples, budget.left // _PILOT_SHARE, generator, budget)
        if not exceeded:
            return rows
    if prune is not Prune.DISCONNECTED:
        count = _structural_count(g, structure, k, prune, budget)
        return _sample_piece(g, k, count, num_samples, prune, generator, budget, what)
    # A connected subset lies in one component: pick one in proportion to its connected
    # k-subsets, then a uniform one of those.
    big = np.nonzero(structure.sizes >= k)[0].tolist()
    if np.count_nonzero(~structure.clique[big]) <= _MAX_PIECES:
        counts = []
        for c in big:
            if structure.clique[c]:
                counts.append(math.comb(int(structure.sizes[c]), k))
                continue
            piece_counts = _piece_counts(_subgraph(g, structure.vertices(c)), range(k, k + 1), prune, budget)
            if piece_counts is None:
                break
            counts.append(piece_counts[k])
        else:
            return _sample_components(g, structure, big, counts, k, num_samples, prune, generator, budget, what)
    return _sample_piece(g, k, None, num_samples, prune, generator, budget, what)


def _sample_components(g: _Graph, structure: _Structure, components: List[int], counts: List[int], k: int,
                       num_samples: int, prune: Prune, generator, budget: _Budget, what: str) -> Tensor:
    """Uniform connected k-subsets of ``g``: component ``components[i]`` (with ``counts[i]``
    connected k-subsets) with probability counts[i] / sum(counts), then uniform within it."""
    out = torch.full((num_samples, k), -1, dtype=torch.int64)
    kept = [(c, n) for c, n in zip(components, counts) if n > 0]
    if not kept:
        return out
    if len(kept) == 1:
        chosen = np.zeros(num_samples, dtype=np.int64)
    else:  # exact integer weights, which may exceed 64 bits
        draw = random.Random(seed_from_generator(generator))
        cumulative = list(itertools.accumulate(n for _, n in kept))
        chosen = np.array([bisect.bisect_right(cumulative, draw.randrange(cumulative[-1]))
                           for _ in range(num_samples)], dtype=np.int64)
    for i in np.unique(chosen).tolist():
        c, count = kept[i]
        vertices = structure.vertices(c)
        rows = np.nonzero(chosen == i)[0]
        piece = _subgraph(g, vertices) if len(vertices) < g.n else g
        local = _sample_piece(piece, k, count, len(rows), prune, generator, budget,
                              what if piece is g else f"a component of {len(vertices)} vertices of {what}")
        out[torch.from_numpy(rows)] = torch.from_numpy(vertices)[local]
    return out


def _sample_piece(g: _Graph, k: int, count: Optional[int], num_samples: int, prune: Prune, generator,
                  budget: _Budget, what: str) -> Tensor:
    """``[num_samples, k]`` uniform kept k-subsets of one graph (n >= k) that keeps ``count``
    of them (None: unknown, after rejection already failed), by the cheaper of rejection and
    enumeration within the budget."""
    n = g.n
    total = math.comb(n, k)
    if count == 0:
        return torch.full((num_samples, k), -1, dtype=torch.int64)
    if count is None:
        raise ValueError(f"sampling {num_samples} uniform {prune.value!r} {k}-subsets of {what} needs more than "
                         f"max_visits = {budget.total} steps: rejection (drawing from all C({n}, {k}) = {total} "
                         f"{k}-subsets) kept too few within a quarter of them, and counting the kept subsets, "
                         f"to draw among them, takes the rest and more; pass a larger max_visits to "
                         f"sample_k_subsets, or sample with method='bfs' or 'dfs'")
    expected = -(-num_samples * total // count)  # expected draws, rounded up
    draw_cost = _draw_cost(g, k)
    free = _FREE_DRAWS * draw_cost * num_samples
    rejection = expected * draw_cost  # expected steps
    enumeration = 2 * count  # a count and a pick pass over the kept subsets, at least (often more)
    feasible = rejection <= budget.left + free
    if count < total and count <= min(budget.left, INT64_MAX) and (16 * enumeration < rejection or not feasible):
        tasks, _, steps, status = _bounded(g, k, prune, budget.left)
        budget.spend(steps)
        if status == _BOUNDED_COMPLETE:
            return _pick(g.ptr.numpy(), g.rowptr, g.col, tasks, k, prune, num_samples, generator)[0]
    if feasible:
        rows, exceeded = _rejection(g, k, prune, num_samples, _REJECTION_SLACK * (rejection + draw_cost), generator,
                                    budget)
        if not exceeded:
            return rows
    raise ValueError(f"sampling {num_samples} uniform {prune.value!r} {k}-subsets of {what} needs about {expected} "
                     f"random draws (it keeps {count} of its C({n}, {k}) = {total} {k}-subsets) or a search through "
                     f"its {count} kept subsets, more than max_visits = {budget.total} steps allow (plus "
                     f"{_FREE_DRAWS} draws per sample); pass a larger max_visits to sample_k_subsets, or sample with "
                     f"method='bfs' or 'dfs'")


def _draw_cost(g: _Graph, k: int) -> float:
    """About the steps one rejection draw costs: 1 plus one per 64 vertices drawn or
    neighbour-list entries tested (at most all of the drawn vertices' lists)."""
    return 1 + k * (1 + g.col.numel() / max(g.n, 1)) / 64


def _rejection(g: _Graph, k: int, prune: Prune, num_samples: int, steps: float, generator,
               budget: _Budget) -> Tuple[Tensor, bool]:
    """Uniform kept k-subsets by rejection (``subsets_rejection.hpp``) within ``steps`` plus
    _FREE_DRAWS draws per sample: ``(rows [num_samples, k], exceeded)``."""
    free = _FREE_DRAWS * _draw_cost(g, k) * num_samples
    rows = torch.empty((num_samples, k), dtype=torch.int64)
    work, exceeded = _backend.call("subsets_sample_rejection", g.ptr, g.rowptr, g.col, 0, k, prune.code,
                                   seed_from_generator(generator), min(int(steps + free), UINT64_MAX), rows)
    budget.spend(max(0, work - int(free)))
    return rows, exceeded
