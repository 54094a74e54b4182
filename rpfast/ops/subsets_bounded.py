"""Counting and uniform sampling of pruned k-subsets with bounded work (the module docstring of
:mod:`rpfast.ops.subsets` defines a step): a batched first count, then per graph the closed
forms of clique components, counts through the complement
(``csrc/rpfast/subsets_complement.hpp``) and rejection sampling
(``csrc/rpfast/subsets_rejection.hpp``), each within ``max_visits`` steps."""
import bisect
import itertools
import math
import random
from typing import List, NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from rpfast import _backend
from rpfast._validation import INT64_MAX, check_int, get_memory_budget
from rpfast.data import GraphBatch
from rpfast.ops.random import seed_from_generator
from rpfast.ops.subsets_common import UINT64_MAX, Prune, _arrays

__all__ = ["DEFAULT_MAX_VISITS"]

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
