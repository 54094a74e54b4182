"""GraphBatch: a batch of graphs in PyTorch Geometric's layout with cached views.

Layout (docs/architecture.md): ``x [N, F]``, ``edge_index [2, E]`` int64 (an undirected edge is
stored in both directions), ``edge_attr [E, D]``, ``batch [N]`` / ``ptr [B + 1]``.
The CSR, transpose CSR and dense padded views are built once, lazily, and cached.
"""
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from rpfast import _backend
from rpfast._capture import refuse_while_capturing
from rpfast._validation import check_int, check_memory, float_tensor, index_tensor
from rpfast.data import interop
from rpfast.data import moves, replicas
from rpfast.data.batch_layout import check_edges, resolve_ptr, sizes_to_ptr, stack_rows
from rpfast.data.segments import offsets, ranges, repeat

__all__ = ["GraphBatch"]


def _kernels_for(t: Tensor) -> bool:
    """Whether compiled kernels serve ``t``'s device (else the views come from torch ops, with
    the same result; the tests switch this off to check that path)."""
    return t.device.type in _backend.kernel_devices()


def lazy_property(compute, key=None):
    """A read-only attribute computed on first use and kept in the instance under ``key``
    (default ``"_lazy_" + name``; like ``functools.cached_property``, without its lock, which
    ``torch.compile`` cannot trace)."""
    key = key or "_lazy_" + compute.__name__

    def get(self):
        value = self.__dict__.get(key)
        if value is None:
            value = compute(self)
            self.__dict__[key] = value
        return value

    get.__doc__ = compute.__doc__
    return property(get)


class GraphBatch:
    r"""A batch of ``B`` graphs with ``N`` nodes and ``E`` directed edges in total.

    Args:
        edge_index: ``[2, E]`` int64, global node indices; edges may not cross graphs.
        x: optional node features ``[N, F]`` (or ``[N]``).
        edge_attr: optional edge features ``[E, D]`` (or ``[E]``), aligned with edge_index.
        batch: optional ``[N]`` graph id of every node, non-decreasing (PyG convention).
        ptr: optional ``[B + 1]`` node offsets; alternative to ``batch``.
        num_nodes: vertices per graph, as everywhere in rpfast: a ``[B]`` tensor/list of graph
            sizes (then it alone can fix ``ptr``), or an int for a batch of one graph. Default
            for one graph: ``edge_index.max() + 1``.
        total_nodes: ``N``, the vertices of the whole batch (PyG's ``Batch.num_nodes``), as
            an alternative to ``num_nodes``.
        num_graphs: ``B`` when given with ``batch`` (lets trailing graphs be empty).

    Counts must be ints (Python, NumPy or 0-d integer tensors); a PyG ``Data``/``Batch`` is
    converted with :meth:`from_pyg`, never passed as ``edge_index``.

    Other attributes: ``extras`` holds the remaining PyG attributes (``y``, ...) kept by
    :meth:`from_pyg` and written back by :meth:`to_pyg`; they read as attributes too
    (``graph.y``). :meth:`select` does not carry them (it cannot tell node-level from
    graph-level ones).

    Cached views (built on first access):
        ``ptr [B+1]``, ``num_nodes [B]``, ``host_ptr [B+1]`` and ``host_in_degree [N]`` (on the
        CPU; :meth:`host_extra` and :meth:`host` too), ``batch [N]``, ``rowptr [N+1]``/``col
        [E]`` (CSR sorted by row then column, ``csr_edge_order [E]`` maps CSR slots to edge ids),
        ``t_rowptr``/``t_col``/``t_edge_order`` (the transpose CSR: incoming edges),
        ``dense_adj() [B, n_max, n_max, 1 + D]`` (channel 0 = edge indicator, multi-edges add
        up as in ``torch_geometric.utils.to_dense_adj``), ``dense_x() [B, n_max, F]`` and
        ``node_mask [B, n_max]``.
    """

    def __init__(
        self,
        edge_index,
        x: Optional[Tensor] = None,
        edge_attr: Optional[Tensor] = None,
        batch: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        num_nodes=None,
        num_graphs: Optional[int] = None,
        total_nodes: Optional[int] = None,
        *,
        _edges_checked: bool = False,
    ):
        total_nodes = None if total_nodes is None else check_int(total_nodes, "total_nodes")
        num_graphs = None if num_graphs is None else check_int(num_graphs, "num_graphs")
        edge_index = index_tensor(edge_index, "edge_index")
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
        self.edge_index = edge_index
        self.x = None if x is None else float_tensor(x, "x")
        if self.x is not None and self.x.dim() == 1:
            self.x = self.x.unsqueeze(-1)
        if self.x is not None and self.x.dim() != 2:
            raise ValueError(f"x must have shape [N, F], got {tuple(self.x.shape)}")
        if num_nodes is not None:
            batch, ptr, total_nodes = sizes_to_ptr(num_nodes, batch, ptr, total_nodes)
        self._ptr = resolve_ptr(self.edge_index, self.x, batch, ptr, total_nodes, num_graphs)
        self._total_nodes = int(self._ptr[-1])  # a plain int: compiled code reads it without a sync
        if not _edges_checked:  # from_edge_lists checked every graph's local indices already
            check_edges(self.edge_index, self.batch)
        self.edge_attr = None
        if edge_attr is not None:
            edge_attr = float_tensor(edge_attr, "edge_attr")
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.unsqueeze(-1)
            if edge_attr.dim() != 2 or edge_attr.shape[0] != self.num_edges:
                raise ValueError(
                    f"edge_attr must have shape [E={self.num_edges}, D], got {tuple(edge_attr.shape)}"
                )
            self.edge_attr = edge_attr
        self.extras: Dict[str, Any] = {}

    @classmethod
    def from_edge_lists(
        cls,
        graphs: Sequence[Tuple[Tensor, int]],
        x: Optional[Sequence[Tensor]] = None,
        edge_attr: Optional[Sequence[Tensor]] = None,
    ) -> "GraphBatch":
        """Batch ``[(edge_index_g [2, E_g] local indices, num_nodes_g), ...]``.

        ``x``/``edge_attr``: optional lists with one ``[n_g, F]`` / ``[E_g, D]`` entry per graph
        (1-D entries become one column). An empty list gives a batch of 0 graphs.
        """
        if not isinstance(graphs, (list, tuple)):
            raise TypeError(f"graphs must be a list of (edge_index, num_nodes), got {type(graphs).__name__}")
        edges, sizes = [], []
        for g, item in enumerate(graphs):
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise TypeError(f"graphs[{g}] must be a pair (edge_index, num_nodes), got {type(item).__name__}")
            ei = index_tensor(item[0], f"graphs[{g}] edge_index")
            if ei.numel() == 0:
                ei = ei.reshape(2, 0)
            if ei.dim() != 2 or ei.shape[0] != 2:
                raise ValueError(f"graphs[{g}] edge_index must have shape [2, E], got {tuple(ei.shape)}")
            edges.append(ei)
            sizes.append(check_int(item[1], f"graphs[{g}] num_nodes"))
        sizes_t = torch.tensor(sizes, dtype=torch.int64)
        edge_counts = [e.shape[1] for e in edges]
        E = sum(edge_counts)
        counts = torch.tensor(edge_counts, dtype=torch.int64)
        ptr = offsets(sizes_t)
        local = torch.cat(edges, dim=1) if edges else torch.zeros(2, 0, dtype=torch.int64)
        # One range check for all graphs (per-graph min/max would sync once per graph); local
        # indices inside 0..n_g-1 also mean no edge can cross graphs once offset.
        bound = repeat(sizes_t, counts, E)  # [E] size of each edge's graph
        outside = ((local < 0) | (local >= bound)).any(dim=0)  # [E]
        if bool(outside.any()):
            g = int(repeat(torch.arange(len(edges)), counts, E)[outside][0])
            ei = edges[g]
            raise IndexError(f"graphs[{g}] edge_index holds {int(ei.min())}..{int(ei.max())}, "
                             f"outside 0..{sizes[g] - 1}")
        edge_index = local + repeat(ptr[:-1], counts, E)
        xs = None if x is None else stack_rows(x, sizes, "x")
        ea = None if edge_attr is None else stack_rows(edge_attr, edge_counts, "edge_attr")
        return cls(edge_index, x=xs, edge_attr=ea, ptr=ptr, _edges_checked=True)

    # ------------------------------------------------------------------ other graph objects
    @classmethod
    def from_networkx(cls, graphs, node_attr: Optional[str] = None, edge_attr: Optional[str] = None) -> "GraphBatch":
        """Batch networkx graphs. Undirected graphs get both edge directions.

        Nodes labelled exactly ``0..n-1`` keep their labels; other labels are numbered in
        ``G.nodes`` order. ``node_attr``/``edge_attr`` name a numeric (scalar or vector)
        attribute to use as ``x``/``edge_attr``; every node/edge must have it (ValueError).
        """
        return interop.from_networkx(cls, graphs, node_attr, edge_attr)

    @classmethod
    def from_pyg(cls, data) -> "GraphBatch":
        """Convert a ``torch_geometric.data.Batch`` (or single ``Data``) without copying.

        A ``data`` without ``edge_index`` but with PyG's sparse ``adj_t`` (``T.ToSparseTensor``)
        takes its edges from it (:func:`rpfast.data.sparse.edge_index_from_adj_t`: stored entry
        ``adj_t[i, j]`` is the edge ``j -> i``; ``edge_attr`` rows in the order of its entries).

        Every other attribute (``y``, ``pos``, names, ...) is kept in ``extras`` (and reads as
        ``graph.y``); :meth:`to_pyg` converts back. Integer ``x``/``edge_attr`` become floats.
        """
        return interop.from_pyg(cls, data)

    def to_pyg(self):
        """A ``torch_geometric.data.Batch`` with ``x``, ``edge_index``, ``edge_attr``, ``batch``,
        ``ptr`` and the ``extras``, sharing this batch's tensors (no copy)."""
        return interop.to_pyg(self)

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: expose extras (graph.y)
        extras = self.__dict__.get("extras")
        if extras is not None and name in extras:
            return extras[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @lazy_property
    def _edges_by_graph(self) -> Tuple[Tensor, Tensor]:
        """``(order [E], edge_ptr [B + 1])``: edge ids grouped by graph (stable) and offsets."""
        edge_graph = self.batch[self.edge_index[0]]
        order = torch.argsort(edge_graph, stable=True)
        return order, offsets(torch.bincount(edge_graph, minlength=self.num_graphs))

    @lazy_property
    def _edge_rank(self) -> Tensor:
        """``[E]`` position of every edge among its graph's edges (in :attr:`_edges_by_graph` order)."""
        order, edge_ptr = self._edges_by_graph
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=order.device) - repeat(edge_ptr[:-1], edge_ptr.diff(), order.numel())
        return rank

    @classmethod
    def _assemble(cls, edge_index: Tensor, x: Optional[Tensor], edge_attr: Optional[Tensor], ptr: Tensor,
                  csr: Tuple[Tensor, Tensor, Tensor], t_csr: Tuple[Tensor, Tensor, Tensor]) -> "GraphBatch":
        """A batch from parts that are valid by construction (:meth:`select` of a valid batch),
        with its CSR views already built: no checks, no sorting."""
        out = cls.__new__(cls)
        out.edge_index, out.x, out.edge_attr, out._ptr = edge_index, x, edge_attr, ptr
        out._total_nodes = int(csr[0].numel() - 1)
        out.extras = {}
        out.__dict__["_lazy__csr_views"] = csr
        out.__dict__["_lazy__csr_t_views"] = t_csr
        return out

    def replicate(self, copies: int) -> "GraphBatch":
        """A batch of ``copies`` copies of this one, graph ``b`` of copy ``p`` at position
        ``p * B + b`` (what ID-based RP runs its relabelings on), built from this batch's tensors
        and host views without reading the device: node, edge and CSR indices shifted copy by
        copy. ``x``, ``edge_attr`` and the extras are not carried (the caller gives the replicas'
        features)."""
        return replicas.replicate(self, copies)

    def select(self, graphs) -> "GraphBatch":
        """A new batch holding ``graphs`` (indices ``[G]``, in the given order, repeats allowed:
        each copy gets its own nodes and edges), with ``x`` and ``edge_attr``; its CSR views
        are slices of this batch's (the fast way to draw mini-batches from a dataset held as
        one GraphBatch)."""
        graphs = index_tensor(graphs, "graphs").reshape(-1)
        if _kernels_for(self.edge_index):
            return self._select_with_kernels(graphs.contiguous())
        if graphs.numel() and (int(graphs.min()) < 0 or int(graphs.max()) >= self.num_graphs):
            raise IndexError(f"graph indices must lie in [0, {self.num_graphs}), got {graphs.tolist()[:8]}")
        sizes = self.num_nodes[graphs]
        new_ptr = offsets(sizes)
        nodes = ranges(self._ptr[graphs], sizes)  # old id of every new node
        order, edge_ptr = self._edges_by_graph
        edge_counts = edge_ptr.diff()[graphs]
        edge_ids = order[ranges(edge_ptr[graphs], edge_counts)]  # old id of every new edge
        shift = repeat(new_ptr[:-1] - self._ptr[graphs], edge_counts, int(edge_counts.sum()))
        return GraphBatch(
            self.edge_index[:, edge_ids] + shift,
            x=None if self.x is None else self.x[nodes],
            edge_attr=None if self.edge_attr is None else self.edge_attr[edge_ids],
            ptr=new_ptr,
        )

    def _select_with_kernels(self, graphs: Tensor) -> "GraphBatch":
        """:meth:`select` by kernels: the selected graphs' slices of this batch's CSR views, node
        and edge ids shifted, in two passes (no sort; the kernels check ``graphs``' range)."""
        _, edge_ptr = self._edges_by_graph
        new_ptr = torch.empty(graphs.numel() + 1, dtype=torch.int64)
        N, E = _backend.call("select_sizes", self._ptr, edge_ptr, graphs, new_ptr)
        edge_index = torch.empty((2, E), dtype=torch.int64)
        old_edge, nodes = torch.empty(E, dtype=torch.int64), torch.empty(N, dtype=torch.int64)
        views = []
        for index, (rowptr, col, order) in enumerate((self._csr_views, self._csr_t_views)):
            new = tuple(torch.empty(size, dtype=torch.int64) for size in (N + 1, E, E))
            outputs = (edge_index, old_edge, nodes) if index == 0 else (None, None, None)
            _backend.call("select_csr", self._ptr, edge_ptr, self._edge_rank, graphs, rowptr, col, order, *new,
                          *outputs)
            views.append(new)
        return GraphBatch._assemble(edge_index, None if self.x is None else self.x[nodes],
                                    None if self.edge_attr is None else self.edge_attr[old_edge], new_ptr, *views)

    # ------------------------------------------------------------------ sizes
    @property
    def ptr(self) -> Tensor:
        return self._ptr

    @lazy_property
    def num_nodes(self) -> Tensor:
        """``[B]`` nodes per graph."""
        return self._ptr.diff()

    @lazy_property
    def host_ptr(self) -> Tensor:
        """``ptr`` on the CPU: the batch's sizes for work that runs on the host (drawing
        relabelings from the CPU's streams, sizing buffers) without reading device memory. A
        batch made on the CPU and moved by :meth:`to` keeps its source's. Its own tensor (a copy
        of a CPU batch's ``ptr``): host data stays apart from the data a step runs on."""
        return self._ptr.clone() if self._ptr.is_cpu else self._ptr.cpu()

    def host(self) -> "GraphBatch":
        """The batch on the CPU, for host-side algorithms (traversals, enumerations): the batch
        itself on the CPU; for a batch moved by :meth:`to` without a dtype, the CPU batch it was
        moved from (kept by reference: no copy, no read of the device); otherwise a copy, made
        once. A copy or a source stands for the batch's ``edge_index``, ``x``, ``edge_attr`` and
        extras as they were: replace one (or change it in place through torch) and the next call
        copies the batch again (:mod:`rpfast.data.moves`). Refused while a step is captured as a
        CUDA graph (:mod:`rpfast._capture`)."""
        refuse_while_capturing("GraphBatch.host() reads the batch's data on the host")
        return moves.host_batch(self)

    def host_extra(self, name: str) -> Optional[Tensor]:
        """``extras[name]`` (``element``, ...) on the CPU: per-node labels that host-side work
        groups by. Copied once (a moved batch keeps its source's tensor, by reference) and again
        when the extra is replaced or changed in place through torch; a copy of a CPU batch's
        own tensor, so host data stays apart from the step's. None when the batch has no such
        tensor. Refused while a step is captured as a CUDA graph (:mod:`rpfast._capture`)."""
        refuse_while_capturing(f"GraphBatch.host_extra({name!r}) reads the batch's data on the host")
        return moves.host_extra(self, name)

    @property
    def host_in_degree(self) -> Tensor:
        """``[N]`` incoming edges of every node, on the CPU (kept by :meth:`to` as ``host_ptr``
        is): what groups nodes by degree on the host without reading the device. Refused while a
        step is captured as a CUDA graph (:mod:`rpfast._capture`)."""
        refuse_while_capturing("GraphBatch.host_in_degree reads the batch's data on the host")
        return self._host_in_degree

    def _in_degree_on_host(self) -> Tensor:
        t_rowptr = self.t_rowptr if self.t_rowptr.is_cpu else self.t_rowptr.cpu()
        return t_rowptr[1:] - t_rowptr[:-1]

    # kept as a host view (moves.HOST_VIEWS) by to() and replicate(), which pass it on unread
    _host_in_degree = lazy_property(_in_degree_on_host, key=moves.HOST_VIEWS + "_in_degree")

    @property
    def num_graphs(self) -> int:
        return self._ptr.numel() - 1

    @property
    def total_nodes(self) -> int:
        return self._total_nodes

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]

    @property
    def device(self) -> torch.device:
        """The device of the batch's tensors (:meth:`to` moves them)."""
        return self.edge_index.device

    @lazy_property
    def n_max(self) -> int:
        return int(self.num_nodes.max()) if self.num_graphs else 0

    @lazy_property
    def batch(self) -> Tensor:
        """``[N]`` graph id of every node."""
        return repeat(torch.arange(self.num_graphs, device=self._ptr.device), self.num_nodes, self.total_nodes)

    @lazy_property
    def local_index(self) -> Tensor:
        """``[N]`` position of every node within its graph."""
        return torch.arange(self.total_nodes, device=self._ptr.device) - self._ptr[self.batch]

    # ------------------------------------------------------------------ sparse views
    def _csr(self, rows: Tensor, cols: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """``(rowptr [N + 1], col [E], order [E])``: the edges stably sorted by ``(row, col)``."""
        N = self.total_nodes
        if _kernels_for(rows):  # a counting sort: one O(E + N) pass, no argsort
            rowptr, col, order = torch.empty(N + 1, dtype=torch.int64), torch.empty_like(rows), torch.empty_like(rows)
            _backend.call("build_csr", rows.contiguous(), cols.contiguous(), N, rowptr, col, order)
            return rowptr, col, order
        order = torch.argsort(rows * max(N, 1) + cols, stable=True)
        rowptr = torch.zeros(N + 1, dtype=torch.int64, device=rows.device)
        rowptr[1:] = torch.bincount(rows, minlength=N).cumsum(0)
        return rowptr, cols[order].contiguous(), order

    @lazy_property
    def _csr_views(self):
        return self._csr(self.edge_index[0], self.edge_index[1])

    @lazy_property
    def _csr_t_views(self):
        return self._csr(self.edge_index[1], self.edge_index[0])

    @property
    def rowptr(self) -> Tensor:
        """``[N + 1]`` CSR row offsets over source nodes (``edge_index[0]``)."""
        return self._csr_views[0]

    @property
    def col(self) -> Tensor:
        """``[E]`` CSR targets, sorted by row then column."""
        return self._csr_views[1]

    @property
    def csr_edge_order(self) -> Tensor:
        """``[E]`` edge id of each CSR slot (``edge_attr[csr_edge_order]`` is CSR-aligned)."""
        return self._csr_views[2]

    @property
    def t_rowptr(self) -> Tensor:
        """``[N + 1]`` transpose CSR offsets over target nodes (``edge_index[1]``)."""
        return self._csr_t_views[0]

    @property
    def t_col(self) -> Tensor:
        """``[E]`` transpose CSR sources, sorted by target then source."""
        return self._csr_t_views[1]

    @property
    def t_edge_order(self) -> Tensor:
        return self._csr_t_views[2]

    @lazy_property
    def _undirected_views(self) -> Tuple[Tensor, Tensor]:
        N = self.total_nodes
        src, dst = self.edge_index
        keep = src != dst
        key = torch.unique(torch.cat([src[keep] * N + dst[keep], dst[keep] * N + src[keep]]))  # sorted
        rows, cols = key // max(N, 1), key % max(N, 1)
        rowptr = torch.zeros(N + 1, dtype=torch.int64, device=key.device)
        rowptr[1:] = torch.bincount(rows, minlength=N).cumsum(0)
        return rowptr, (cols - self._ptr[self.batch[cols]]).contiguous()

    def undirected_csr(self) -> Tuple[Tensor, Tensor]:
        """``(rowptr [N + 1], col [E'])`` of the underlying simple undirected graph.

        Edges in either direction count once, self-loops and duplicates are dropped,
        neighbour lists are ascending, and ``col`` holds *local* vertex ids (position within
        the graph). Used by the subset enumeration and orientation kernels.
        """
        return self._undirected_views

    # ------------------------------------------------------------------ dense views
    @lazy_property
    def node_mask(self) -> Tensor:
        """``[B, n_max]`` True where a real node sits."""
        return torch.arange(self.n_max, device=self._ptr.device).unsqueeze(0) < self.num_nodes.unsqueeze(1)

    def adjacency_values(self, edge_features: bool = True) -> Tensor:
        """``[E, C]``: what each edge adds to :meth:`dense_adj`: 1 in channel 0 and, with
        ``edge_features``, ``edge_attr`` in channels ``1..D`` (``C = 1 + D``; ``C = 1`` without).
        Float, of ``edge_attr``'s dtype (else the adjacency dtype ``to(dtype=...)`` set, else the
        default); differentiable in ``edge_attr``."""
        attr = self.edge_attr if edge_features else None
        dtype = self.edge_attr.dtype if self.edge_attr is not None else \
            self.__dict__.get("_adjacency_dtype") or torch.get_default_dtype()  # set by to(dtype=...)
        ones = torch.ones((self.num_edges, 1), dtype=dtype, device=self.edge_index.device)
        return ones if attr is None else torch.cat([ones, attr], dim=1)

    @lazy_property
    def _dense_adj(self) -> Tensor:
        B, n = self.num_graphs, self.n_max
        values = self.adjacency_values()
        channels, dtype = values.shape[1], values.dtype
        check_memory(B * n * n * channels * dtype.itemsize, f"dense_adj() [B={B}, n_max={n}, n_max={n}, {channels}]",
                     "batch graphs of similar size together, or use the sparse views")
        adj = torch.zeros((B, n, n, channels), dtype=dtype, device=self.edge_index.device)
        if self.num_edges:
            src, dst = self.edge_index
            index = (self.batch[src], self.local_index[src], self.local_index[dst])
            adj.index_put_(index, values, accumulate=True)
        return adj

    def dense_adj(self) -> Tensor:
        """``[B, n_max, n_max, 1 + D]``: channel 0 edge indicator, channels 1.. edge features."""
        return self._dense_adj

    @lazy_property
    def _dense_x(self) -> Tensor:
        if self.x is None:
            raise ValueError("this GraphBatch has no node features x")
        B, n, F = self.num_graphs, self.n_max, self.x.shape[1]
        check_memory(B * n * F * self.x.element_size(), f"dense_x() [B={B}, n_max={n}, {F}]",
                     "batch graphs of similar size together")
        out = self.x.new_zeros((self.num_graphs, self.n_max, self.x.shape[1]))
        out[self.batch, self.local_index] = self.x
        return out

    def dense_x(self) -> Tensor:
        """``[B, n_max, F]`` node features, zero rows at padding."""
        return self._dense_x

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "GraphBatch":
        """A copy on ``device`` and/or with floating-point features in ``dtype`` (``x``,
        ``edge_attr`` and the dense views; index tensors stay int64). Every cached view moves with
        it, and the structural ones (sizes, ``batch``, the CSRs, ``n_max``) are built here
        first, so the copy never recomputes from data it cannot read (the ``meta`` device) or
        sync for them; ``extras`` tensors move to ``device``. Nothing is copied that is already
        where it is asked to be, and without a dtype on the batch's own device the batch itself
        is returned (as ``Tensor.to`` does). The host views stay on the CPU, and a batch moved
        from the CPU keeps its source as its host copy (:meth:`host`)."""
        return moves.moved(self, device, dtype)

    def __getstate__(self) -> dict:
        """The batch's tensors and cached views (pickles, copies and :meth:`to` take these; not the
        host copies of a device batch, which a copy rebuilds or :meth:`to` passes on)."""
        return {k: v for k, v in self.__dict__.items() if k not in moves.HOST_RECORDS}

    def __repr__(self) -> str:
        f = None if self.x is None else self.x.shape[1]
        d = None if self.edge_attr is None else self.edge_attr.shape[1]
        return (f"GraphBatch(num_graphs={self.num_graphs}, total_nodes={self.total_nodes}, "
                f"num_edges={self.num_edges}, node_features={f}, edge_features={d})")
