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
import math
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from rpfast import _backend
from rpfast._validation import INT64_MAX, check_int, check_memory, check_output_size, get_memory_budget, set_memory_budget
from rpfast.data import GraphBatch
from rpfast.ops.random import random_permutations, seed_from_generator
from rpfast.ops.subsets_bounded import DEFAULT_MAX_VISITS, _check_max_visits, _pruned_counts, _sample_uniform_pruned
from rpfast.ops.subsets_common import PRUNE_MODES, UINT64_MAX, GraphLike, Prune, _arrays, _as_batch, _prune

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


class SubsetChunk(NamedTuple):
    """A piece of an enumeration: ``subsets [c, k]`` (local ids) and ``graph [c]`` (graph index)."""

    subsets: Tensor
    graph: Tensor


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
        ValueError: if the output would exceed the budget (the message gives the count and
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

