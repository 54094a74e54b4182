"""Canonical and poly-canonical orientations (paper Sec. 2.3.1): vertex orders that make many
relabelings collapse to one input.

Every function returns orders in the gather convention, ``order[b, p, i]`` = the vertex
placed at position ``i`` (local id, -1 padding), so ``permute_adjacency(adj, order)`` is the
oriented adjacency tensor.
"""
import math
from collections.abc import Sequence
from typing import List, NamedTuple, Optional, Union

import torch
from torch import Tensor

from rpfast._validation import check_count, check_output_size, index_tensor, require_dense
from rpfast.data import GraphBatch
from rpfast import _backend

__all__ = ["dfs_order", "bfs_order", "wl_order", "WLOrder"]

StartSpec = Union[Tensor, str]


def _starts(batch: GraphBatch, start: StartSpec, num_samples: Optional[int], generator) -> Tensor:
    """Resolve ``start`` to a LongTensor [B, P] of local start vertices (-1 for empty graphs)."""
    sizes = batch.num_nodes
    B = batch.num_graphs
    if isinstance(start, str):
        if start == "all":
            if num_samples is not None:
                raise ValueError("num_samples is implied by start='all' (one sample per vertex)")
            positions = torch.arange(batch.n_max).expand(B, -1)
            return torch.where(positions < sizes.unsqueeze(1), positions, torch.full_like(positions, -1)).contiguous()
        if start == "random":
            P = 1 if num_samples is None else check_count(num_samples, "num_samples", minimum=1)
            if generator is not None and not isinstance(generator, torch.Generator):
                raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
            draws = torch.randint(0, 2**62, (B, P), generator=generator)  # modulo bias < n / 2^62
            picked = draws % sizes.clamp(min=1).unsqueeze(1)
            return torch.where(sizes.unsqueeze(1) > 0, picked, torch.full_like(picked, -1)).contiguous()
        raise ValueError(f"start must be a tensor [B, P], 'random' or 'all', got {start!r}")
    start = index_tensor(start, "start")
    if start.dim() == 1:
        start = start.unsqueeze(1)
    if start.dim() != 2 or start.shape[0] != B:
        raise ValueError(f"start must have shape [B={B}, P], got {tuple(start.shape)}")
    if num_samples is not None and check_count(num_samples, "num_samples", minimum=1) != start.shape[1]:
        raise ValueError(f"num_samples={num_samples} disagrees with start's {start.shape[1]} samples")
    return start


def _traversal(graph: GraphBatch, start, tiebreak, k, num_samples, generator, depth_first: bool) -> Tensor:
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    starts = _starts(graph, start, num_samples, generator)
    B, P = starts.shape
    K = graph.n_max if k is None else check_count(k, "k", minimum=1)
    ties = None
    if tiebreak is not None:
        ties = index_tensor(tiebreak, "tiebreak")
        if ties.dim() != 3 or ties.shape[0] != B or ties.shape[1] != P or ties.shape[2] < graph.n_max:
            raise ValueError(f"tiebreak must have shape [B={B}, P={P}, n_max={graph.n_max}], got {tuple(ties.shape)}")
    check_output_size(B * P * K, 8, f"orders [B={B}, P={P}, K={K}]")
    out = torch.empty((B, P, K), dtype=torch.int64)
    rowptr, col = graph.undirected_csr()
    _backend.call("traversal_orders", graph.ptr, rowptr, col, starts, ties, depth_first, out)
    return out


def dfs_order(graph: GraphBatch, start: StartSpec = "random", tiebreak: Optional[Tensor] = None,
              k: Optional[int] = None, num_samples: Optional[int] = None,
              generator: Optional[torch.Generator] = None) -> Tensor:
    """Depth-first (preorder) vertex orders, batched over graphs and samples.

    Args:
        graph: a :class:`~rpfast.data.GraphBatch` (searched as a simple undirected graph).
        start: LongTensor ``[B, P]`` of local start vertices (-1 gives a row of -1), or
            ``"random"`` (uniform start per sample; ``num_samples`` samples, from
            ``generator``), or ``"all"`` (``P = n_max``, sample p starts at vertex p; rows
            p >= n_b are -1).
        tiebreak: optional ``[B, P, n_max]``; row ``[b, p]`` ranks the vertices (a permutation
            of ``0..n_b-1`` on the first ``n_b`` entries). Neighbours are visited in
            increasing rank, and when a component is exhausted the search restarts at the
            lowest-ranked unvisited vertex. Default: rank = vertex id.
        k: stop after k vertices (k-ary view, paper Sec. 2.3.3); default ``n_max``.

    Returns:
        LongTensor ``[B, P, K]`` in the gather convention, -1 padded. O(n + E) per sample.
    """
    return _traversal(graph, start, tiebreak, k, num_samples, generator, depth_first=True)


def bfs_order(graph: GraphBatch, start: StartSpec = "random", tiebreak: Optional[Tensor] = None,
              k: Optional[int] = None, num_samples: Optional[int] = None,
              generator: Optional[torch.Generator] = None) -> Tensor:
    """Breadth-first vertex orders; same arguments and conventions as :func:`dfs_order`."""
    return _traversal(graph, start, tiebreak, k, num_samples, generator, depth_first=False)


class WLOrder(NamedTuple):
    """Result of :func:`wl_order`:

    * ``order``: ``[B, P, n_max]`` vertices sorted by stable colour, ties by tiebreak rank.
    * ``colours``: ``[N]`` stable 1-WL colour of every node (canonical per graph).
    * ``log_num_orders``: ``[B]`` float64, log of the number of orders consistent with the
      refinement, ``sum over colour classes of log(|class|!)``.
    * ``num_orders``: exact counts as Python ints (products of factorials), a sequence computed
      per graph on first access: the exact count of a graph with a million equivalent vertices
      has millions of digits and takes seconds.
    """

    order: Tensor
    colours: Tensor
    log_num_orders: Tensor
    num_orders: "ExactOrderCounts"


class ExactOrderCounts(Sequence):
    """``counts[b]`` = prod over graph b's colour classes of ``|class|!`` as a Python int,
    computed when first read (and cached). Compares equal to the list of those ints."""

    def __init__(self, class_sizes: List[List[int]]):
        self._sizes = class_sizes
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self._sizes)

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self[i] for i in range(*b.indices(len(self)))]
        b = range(len(self))[b]
        if b not in self._cache:
            self._cache[b] = math.prod(math.factorial(s) for s in self._sizes[b] if s > 1)
        return self._cache[b]

    def __eq__(self, other) -> bool:
        return isinstance(other, (list, tuple, Sequence)) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"ExactOrderCounts(<{len(self)} graphs; exact ints computed on access>)"


def wl_order(graph: GraphBatch, tiebreak: Optional[Tensor] = None, x: Optional[Tensor] = None) -> WLOrder:
    """Orientation by 1-WL colour refinement.

    Colours start from the rows of ``x`` (``[N, F]``, equal rows = equal colour; default: one
    colour) and are refined to the stable partition; colour names are canonical, so
    isomorphic graphs get the same colours on corresponding vertices. Vertices are then
    sorted by colour, ties broken by ``tiebreak`` (``[B, P, n_max]`` ranks as in
    :func:`dfs_order`; default vertex id). When every colour class is a single vertex the
    order is canonical: isomorphic inputs give identical oriented adjacency whatever the
    tiebreak. ``num_orders`` is the number of relabelings RP still has to average over.
    """
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    N, B, n_max = graph.total_nodes, graph.num_graphs, graph.n_max
    if x is None:
        colours = torch.zeros(N, dtype=torch.int64)
    else:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a tensor [N={N}, F], got {type(x).__name__}")
        require_dense(x, "x")
        if x.dim() not in (1, 2) or x.shape[0] != N:
            raise ValueError(f"x must be a tensor [N={N}, F], got shape {tuple(x.shape)}")
        rows = x.unsqueeze(1) if x.dim() == 1 else x
        if N == 0 or rows.shape[1] == 0:  # no nodes, or no features: a single colour
            colours = torch.zeros(N, dtype=torch.int64)
        else:
            colours = torch.unique(rows, dim=0, return_inverse=True)[1].to(torch.int64)
    colours = colours.contiguous().clone()
    rowptr, col = graph.undirected_csr()
    _backend.call("wl_refine", graph.ptr, rowptr, col, colours)

    if tiebreak is None:
        ranks = torch.arange(n_max).expand(B, 1, n_max)
    else:
        ranks = index_tensor(tiebreak, "tiebreak")
        if ranks.dim() != 3 or ranks.shape[0] != B or ranks.shape[2] < n_max:
            raise ValueError(f"tiebreak must have shape [B={B}, P, n_max={n_max}], got {tuple(ranks.shape)}")
        ranks = ranks[:, :, :n_max]
        _check_rank_rows(ranks, graph.num_nodes)
    dense = torch.full((B, n_max), n_max, dtype=torch.int64)  # padding sorts last
    dense[graph.batch, graph.local_index] = colours
    key = dense.unsqueeze(1) * (n_max + 1) + torch.where(graph.node_mask.unsqueeze(1), ranks, torch.full_like(ranks, n_max))
    order = key.argsort(dim=-1, stable=True)
    order = torch.where(torch.arange(n_max) < graph.num_nodes.view(B, 1, 1), order, torch.full_like(order, -1))

    # colours are per graph in 0..n_b-1, so (graph, colour) pairs index a [B, n_max] table
    sizes = torch.bincount(graph.batch * n_max + colours, minlength=B * n_max).view(B, n_max)
    log_counts = torch.lgamma(sizes.double() + 1).sum(dim=1)
    classes = [[s for s in row if s > 1] for row in sizes.tolist()]
    return WLOrder(order.contiguous(), colours, log_counts, ExactOrderCounts(classes))


def _check_rank_rows(ranks: Tensor, sizes: Tensor) -> None:
    """Every row's first n_b entries must be a permutation of 0..n_b-1."""
    B, P, n_max = ranks.shape
    valid = torch.arange(n_max) < sizes.view(B, 1, 1)
    masked = torch.where(valid, ranks, torch.full_like(ranks, n_max))
    expected = torch.where(torch.arange(n_max) < sizes.view(B, 1, 1), torch.arange(n_max), torch.full_like(ranks, n_max))
    bad = (masked.sort(dim=-1).values != expected).any(dim=-1)
    if bool(bad.any()):
        b, p = torch.nonzero(bad)[0].tolist()
        raise ValueError(f"tiebreak[{b}, {p}] is not a permutation of 0..{int(sizes[b]) - 1}")
