"""k-ary subgraph enumeration: k-subsets of vertices with pruning, counting, streaming, sampling.

k-ary Relational Pooling (paper Sec. 2.3.3, eq. 5) sums a function over the k-vertex
induced subgraphs of a graph; subsets whose induced subgraph is only isolated vertices
can be skipped. ``prune`` chooses which k-subsets S are kept (on the underlying simple
undirected graph; self-loops are not edges):

* ``"none"``: all C(n, k);
* ``"edgeless"``: drop S whose induced subgraph has no edge (the paper's "k isolated vertices");
* ``"isolated"``: drop S in which any vertex has no neighbour inside S;
* ``"connected"``: keep S whose induced subgraph is connected.

Pruning happens inside the C++ search (prefixes that cannot be completed are cut; the
connected search is ESU, which only visits connected sets). Rows hold local vertex ids in
increasing order, lexicographically sorted within a graph; results do not depend on the
thread count.
"""
import math
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from rpfast import _C
from rpfast.data import GraphBatch
from rpfast._validation import check_memory, get_memory_budget, set_memory_budget
from rpfast._validation import INT64_MAX, check_int, check_output_size
from rpfast.ops._threads import kernel_threads
from rpfast.ops.random import random_permutations, seed_from_generator

__all__ = [
    "k_subsets",
    "count_k_subsets",
    "iter_k_subsets",
    "sample_k_subsets",
    "SubsetChunk",
    "SubsetStream",
    "get_memory_budget",
    "set_memory_budget",
    "PRUNE_MODES",
]

PRUNE_MODES = {"none": 0, "edgeless": 1, "isolated": 2, "connected": 3}
UINT64_MAX = 2**64 - 1


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


def _mode(prune: str) -> int:
    if not isinstance(prune, str) or prune not in PRUNE_MODES:
        raise ValueError(f"prune must be one of {sorted(PRUNE_MODES)}, got {prune!r}")
    return PRUNE_MODES[prune]


def _arrays(batch: GraphBatch):
    rowptr, col = batch.undirected_csr()
    return batch.ptr.numpy(), rowptr.numpy(), col.numpy()


def _task_counts(batch: GraphBatch, k: int, prune: str, budget: Optional[int] = None) -> np.ndarray:
    """Subsets per (graph, root vertex) task as uint64.

    Counting stops as soon as one graph passes 2^63 - 1 subsets (OverflowError) or, with
    a ``budget`` in bytes, as soon as the batch has more rows than fit in it (ValueError),
    so it never runs far beyond what could be counted or stored.
    """
    max_rows = UINT64_MAX if budget is None else budget // (8 * k)
    counts, exceeded, graph = _C.subsets_count(*_arrays(batch), k, _mode(prune), INT64_MAX, max_rows,
                                               kernel_threads())
    if exceeded and graph >= 0:
        raise OverflowError(f"graph {graph} has more than 2^63 - 1 {prune!r} {k}-subsets, more than a 64-bit "
                            f"count holds")
    if exceeded:
        _check_rows(max_rows + 1, k, prune, budget, at_least=True)
    return counts


def _check_rows(total: int, k: int, prune: str, budget: int, at_least: bool = False) -> None:
    """ValueError if ``total`` rows of k int64 ids exceed ``budget`` bytes."""
    check_memory(total * k * 8, f"{'more than ' if at_least else ''}{total - at_least} {prune!r} {k}-subsets",
                 "stream them with iter_k_subsets or count them with count_k_subsets", budget=budget)


def _per_graph(batch: GraphBatch, task_counts: Optional[np.ndarray], k: int, prune: str) -> List[int]:
    """Exact per-graph totals as Python ints (overflow-safe)."""
    ptr = batch.ptr.numpy()
    if prune == "none":
        return [math.comb(int(n), k) for n in np.diff(ptr)]
    # Cumulative uint64 sums are exact unless the grand total nears 2^64 (checked in float64);
    # only then fall back to Python ints.
    if float(task_counts.astype(np.float64).sum()) < 2.0**62:
        cumulative = np.concatenate([[0], np.cumsum(task_counts, dtype=np.uint64)])
        return [int(v) for v in cumulative[ptr[1:]] - cumulative[ptr[:-1]]]
    return [sum(int(c) for c in task_counts[ptr[b]:ptr[b + 1]]) for b in range(batch.num_graphs)]


def count_k_subsets(graph: GraphLike, k: int, prune: str = "none", num_nodes: Optional[int] = None) -> Tensor:
    """Exact number of kept k-subsets per graph, without materialising them.

    ``"none"`` uses the closed form C(n, k); the other modes run the pruned search and
    only count. Returns LongTensor ``[B]``; raises ``OverflowError`` if a count does not
    fit in 64 bits (the enumeration could never be stored anyway).
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    _mode(prune)
    counts = _per_graph(batch, None if prune == "none" else _task_counts(batch, k, prune), k, prune)
    for b, c in enumerate(counts):
        if c > INT64_MAX:
            raise OverflowError(f"graph {b} has {c} {prune!r} {k}-subsets, more than a 64-bit count holds")
    return torch.tensor([int(c) for c in counts], dtype=torch.int64)


def _checked_offsets(batch: GraphBatch, k: int, prune: str, tasks: np.ndarray, budget: Optional[int] = None) -> np.ndarray:
    """Row offsets [N + 1] of the tasks; checks the total against 2^63 and the budget."""
    totals = _per_graph(batch, tasks, k, prune)
    grand = sum(totals)
    if grand > INT64_MAX:
        raise OverflowError(f"{grand} {prune!r} {k}-subsets do not fit in a 64-bit count")
    if budget is not None:
        _check_rows(grand, k, prune, budget)
    offsets = np.zeros(len(tasks) + 1, dtype=np.int64)
    np.cumsum(tasks.astype(np.int64), out=offsets[1:])
    return offsets


def k_subsets(graph: GraphLike, k: int, prune: str = "none", num_nodes: Optional[int] = None,
              max_bytes: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """All kept k-subsets of every graph.

    Args:
        graph: a :class:`~rpfast.data.GraphBatch`, or one graph's ``edge_index [2, E]``
            (then ``num_nodes`` gives its size; default ``edge_index.max() + 1``).
        k: subset size (>= 1). Graphs with fewer than k vertices contribute no rows.
        prune: ``"none" | "edgeless" | "isolated" | "connected"`` (module docstring).
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
    mode = _mode(prune)
    budget = get_memory_budget() if max_bytes is None else check_int(max_bytes, "max_bytes", minimum=1)
    if prune == "none":  # closed form: refuse before counting
        _check_rows(sum(math.comb(int(n), k) for n in batch.num_nodes.tolist()), k, prune, budget)
    tasks = _task_counts(batch, k, prune, budget)
    offsets = _checked_offsets(batch, k, prune, tasks, budget)
    total = int(offsets[-1])
    out = torch.empty((total, k), dtype=torch.int64)
    if total:
        _C.subsets_fill(*_arrays(batch), k, mode, offsets, 0, len(tasks), out.numpy(), kernel_threads())
    ptr = torch.from_numpy(offsets[batch.ptr.numpy()].copy())
    return out, ptr


class SubsetStream:
    """Iterable over the chunks of an enumeration (see :func:`iter_k_subsets`).

    ``total`` and ``counts`` (per graph) are known before the first chunk, e.g. for a
    progress bar or to preallocate an output file.
    """

    def __init__(self, batch: GraphBatch, k: int, prune: str, chunk_size: int):
        self._batch, self._k, self._prune, self._chunk = batch, k, prune, chunk_size
        self._mode = _mode(prune)
        self._arrays = _arrays(batch)
        self._tasks = _task_counts(batch, k, prune)
        self._offsets = _checked_offsets(batch, k, prune, self._tasks)
        self.total = int(self._offsets[-1])
        check_memory(min(chunk_size, self.total) * k * 8, f"a chunk of {min(chunk_size, self.total)} {k}-subsets",
                     "lower chunk_size")
        self.counts = torch.from_numpy(np.diff(self._offsets[batch.ptr.numpy()]))

    def __iter__(self) -> Iterator[SubsetChunk]:
        tasks, offsets, k, chunk_size = self._tasks, self._offsets, self._k, self._chunk
        graph_of = self._batch.batch.numpy()
        t, N = 0, len(tasks)
        while t < N:
            if tasks[t] == 0:
                t += 1
                continue
            # Consecutive whole tasks that fit in a chunk go to the parallel kernel at once.
            end = int(np.searchsorted(offsets, offsets[t] + chunk_size, side="right")) - 1
            if end > t:
                out = np.empty((int(offsets[end] - offsets[t]), k), dtype=np.int64)
                _C.subsets_fill(*self._arrays, k, self._mode, offsets, t, end, out, kernel_threads())
                graph = np.repeat(graph_of[t:end], tasks[t:end].astype(np.int64))
                yield SubsetChunk(torch.from_numpy(out), torch.from_numpy(graph))
                t = end
                continue
            yield from _stream_task(self._batch, self._arrays, k, self._mode, t, int(tasks[t]), chunk_size)
            t += 1


def iter_k_subsets(graph: GraphLike, k: int, prune: str = "none", chunk_size: int = 1 << 20,
                   num_nodes: Optional[int] = None) -> SubsetStream:
    """Stream the rows of :func:`k_subsets` in the same order, ``chunk_size`` rows at a time.

    Returns a :class:`SubsetStream` (``.total``, ``.counts``) whose iteration yields
    :class:`SubsetChunk` ``(subsets [c, k], graph [c])`` with ``c <= chunk_size``;
    concatenating the chunks gives ``k_subsets(...)[0]``. Memory stays within
    ``chunk_size`` rows in every mode: a root vertex with more subsets than a chunk is
    resumed after the last row of the previous chunk.
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    return SubsetStream(batch, k, prune, chunk_size)


def _stream_task(batch, arrays, k, mode, t, count, chunk_size) -> Iterator[SubsetChunk]:
    """One (graph, root) task larger than a chunk, in chunk_size pieces: each piece resumes
    the lexicographic search after the previous piece's last row (O(chunk) memory)."""
    b = int(batch.batch[t])
    root = t - int(batch.ptr[b])
    resume = None
    done = 0
    while done < count:
        piece = np.empty((min(chunk_size, count - done), k), dtype=np.int64)
        written = _C.subsets_fill_window(*arrays, k, mode, b, root, 0, len(piece), resume, piece)
        if written == 0:  # cannot happen for a consistent count; never loop forever
            raise RuntimeError(f"subset stream of graph {b} ended after {done} of {count} rows")
        piece = piece[:written]
        done += written
        resume = piece[-1].copy()
        yield SubsetChunk(torch.from_numpy(piece), torch.full((written,), b, dtype=torch.int64))


def sample_k_subsets(graph: GraphLike, k: int, num_samples: int, method: str = "uniform", prune: str = "none",
                     generator: Optional[torch.Generator] = None, num_nodes: Optional[int] = None) -> Tensor:
    """Random k-subsets of every graph: LongTensor ``[B, num_samples, k]`` (local ids).

    * ``"uniform"``: uniform over the kept subsets of ``prune`` (rows ascending). For
      ``"none"`` a partial Fisher-Yates shuffle; otherwise exact, by counting the subsets
      and drawing indices into the enumeration.
    * ``"bfs"`` / ``"dfs"``: grow a connected subgraph from a uniformly random start vertex
      (among those whose component has >= k vertices), visiting neighbours in random
      order, until it has k vertices; rows list the vertices in visiting order (k-ary RP
      combined with pi-SGD, paper Sec. 2.3.3). Such subsets satisfy every prune mode.

    Graphs with no admissible subset give rows of -1. Reproducible from ``generator``.
    """
    batch = _as_batch(graph, num_nodes)
    k = check_int(k, "k", minimum=1)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    _mode(prune)
    if method not in ("uniform", "bfs", "dfs"):
        raise ValueError(f"method must be 'uniform', 'bfs' or 'dfs', got {method!r}")
    B = batch.num_graphs
    check_output_size(B * num_samples * k, 8, f"sample_k_subsets output [B={B}, {num_samples}, k={k}]")
    if method in ("bfs", "dfs") and k == 1 and prune in ("edgeless", "isolated"):
        return torch.full((B, num_samples, k), -1, dtype=torch.int64)  # no single vertex has an edge
    if method in ("bfs", "dfs"):
        out = torch.empty((B, num_samples, k), dtype=torch.int64)
        _C.sample_grown_subsets(*_arrays(batch), k, method == "dfs", seed_from_generator(generator), out.numpy(),
                                kernel_threads())
        return out
    if prune == "none":
        perms = random_permutations(batch.num_nodes, num_samples, k=k, generator=generator)
        too_small = (batch.num_nodes < k).view(B, 1, 1)
        return torch.where(too_small, torch.full_like(perms, -1), perms.sort(dim=-1).values)
    return _sample_uniform_pruned(batch, k, num_samples, prune, generator)


def _sample_uniform_pruned(batch, k, num_samples, prune, generator) -> Tensor:
    """Uniform indices into each graph's enumeration, resolved in one pass of the search
    that writes only the picked rows: O(num_samples) memory, whatever the enumeration."""
    tasks = _task_counts(batch, k, prune)
    offsets = _checked_offsets(batch, k, prune, tasks)
    ptr = batch.ptr.numpy()
    B = batch.num_graphs
    first, totals = offsets[ptr[:-1]], offsets[ptr[1:]] - offsets[ptr[:-1]]
    picks = np.full((B, num_samples), -1, dtype=np.int64)
    for b in np.nonzero(totals)[0]:
        picks[b] = torch.randint(0, int(totals[b]), (num_samples,), generator=generator).numpy() + first[b]
    out = torch.full((B, num_samples, k), -1, dtype=torch.int64)
    valid = picks >= 0
    flat = picks[valid]
    order = np.argsort(flat, kind="stable")
    ascending = flat[order]
    task_of = np.searchsorted(offsets, ascending, side="right") - 1
    pick_ptr = np.searchsorted(task_of, np.arange(len(tasks) + 1), side="left").astype(np.int64)
    local = (ascending - offsets[task_of]).astype(np.uint64)
    rows = np.full((len(ascending), k), -1, dtype=np.int64)
    _C.subsets_pick(*_arrays(batch), k, _mode(prune), pick_ptr, local, rows, kernel_threads())
    resolved = np.empty_like(rows)
    resolved[order] = rows
    out[torch.from_numpy(valid)] = torch.from_numpy(resolved)
    return out
