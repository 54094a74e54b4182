"""GINConv: drop-in for torch_geometric.nn.GINConv on rpfast's fused aggregation."""
import math
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch
from rpfast._validation import check_real, is_pyg_data, require_flag
from rpfast.data.cache import graph_for_edge_index
from rpfast.data.sparse import edge_index_from_adj_t, is_sparse_adjacency
from rpfast.ops import gin_aggregate
from rpfast.ops._registry import compiling
from rpfast.ops.gin import csr_op, gin_aggregate_op
from rpfast.nn._unsupported import NotScriptable, check_call

__all__ = ["GINConv"]


class GINConv(NotScriptable, nn.Module):
    r"""Graph Isomorphism Network layer (Xu et al., ICLR 2019).

    .. math:: x_i' = h_\Theta\Big((1 + \epsilon)\, x_i + \sum_{j \to i} x_j\Big)

    Same constructor and ``forward(x, edge_index, size=None)`` as ``torch_geometric.nn.GINConv``,
    so a PyG model can switch the import. The graph may be an ``edge_index [2, E]``, a
    :class:`~rpfast.data.GraphBatch`, a PyG ``Data``/``Batch`` (its ``edge_index``, or its
    ``adj_t``), or, as in PyG, the sparse transposed adjacency ``adj_t [N, N]`` in ``edge_index``'s
    place (``torch.sparse`` COO or CSR, or ``torch_sparse.SparseTensor``; stored entry
    ``adj_t[i, j]`` = edge ``j -> i``, see :func:`rpfast.data.sparse.edge_index_from_adj_t`);
    a GraphBatch or ``Data`` may also come alone (``conv(data)``: its ``x`` and edges). Node-level:
    no batch vector or edge features (PyG's ``GINConv`` takes none either).

    ``edge_index`` is converted to CSR once per distinct tensor and cached
    (:mod:`rpfast.data.cache`). The cache notices in-place edits made through torch (the
    tensor's version counter) but not writes through aliases such as ``edge_index.numpy()``
    or ``torch.from_numpy``'s source array: after those call
    :func:`rpfast.data.clear_graph_cache`, or build the layer with ``cache=False``.

    Construction initialises ``nn`` as PyG's ``GINConv`` does (:meth:`reset_parameters`), so
    after one ``torch.manual_seed`` both layers hold the same weights.

    Args:
        nn: the MLP :math:`h_\Theta` applied after aggregation (any callable module); re-initialised
            by the constructor, as PyG's is.
        eps: initial :math:`\epsilon`.
        train_eps: learn :math:`\epsilon`.
        cache: reuse the CSR of an ``edge_index`` tensor across calls (default); ``False``
            rebuilds it on every call.

    Shapes:
        ``x [N, F]`` or ``[R, N, F]`` (R relabelings sharing the graph) -> ``nn``'s output
        for every node. Twice differentiable if ``nn`` is.
    """

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, cache: bool = True, **kwargs):
        super().__init__()
        # PyG forwards these to MessagePassing; only its defaults match what this layer computes.
        supported = {"aggr": "add", "flow": "source_to_target"}
        for key, value in kwargs.items():
            if supported.get(key, object()) != value:
                raise ValueError(f"rpfast.nn.GINConv does not support {key}={value!r} "
                                 f"(it sums messages along source_to_target edges)")
        if not callable(nn):
            raise TypeError(f"nn must be a callable module, got {type(nn).__name__}")
        cache, train_eps = require_flag(cache, "cache"), require_flag(train_eps, "train_eps")
        self.nn = nn
        self.initial_eps = check_real(eps, "eps")
        dtype = torch.get_default_dtype()
        if math.isfinite(self.initial_eps) and abs(self.initial_eps) > torch.finfo(dtype).max:
            raise ValueError(f"eps = {self.initial_eps!r} does not fit the default dtype {dtype}")
        self.cache = cache
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise ``nn`` and set ``eps`` back to its initial value, with the calls of PyG's
        ``GINConv.reset_parameters`` in its order (``torch_geometric.nn.inits.reset``): ``nn``'s
        own ``reset_parameters()`` if it has one, else its children's, depth first, in
        registration order (a module without either, and parameter-free ones, draw nothing)."""
        _reset(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x, edge_index=None, size: Optional[tuple] = None) -> Tensor:
        """``x [N, F]`` or ``[R, N, F]``; ``edge_index``: ``[2, E]``, a sparse ``adj_t [N, N]``, a
        GraphBatch or a PyG Data/Batch; or a GraphBatch / PyG Data alone (its ``x`` and edges).
        NotImplementedError under ``torch.jit.trace``, ``torch.func`` transforms and PyG Explainer
        edge masks (:func:`rpfast.nn._unsupported.check_call`)."""
        check_call("GINConv", self.training)
        if edge_index is None and (isinstance(x, GraphBatch) or is_pyg_data(x)):
            if x.x is None:
                raise ValueError(f"GINConv needs node features: the {type(x).__name__} has no x")
            x, edge_index = x.x, x
        if edge_index is None:
            raise TypeError(f"GINConv takes (x, edge_index), (x, graph) or a GraphBatch / PyG Data alone; "
                            f"got {type(x).__name__} and no edges")
        if size is not None:
            nodes = x.shape[-2] if isinstance(x, Tensor) and x.dim() >= 2 else None
            if not (isinstance(size, (tuple, list)) and len(size) == 2 and list(size) == [nodes, nodes]):
                raise ValueError(f"size must be (N, N) = ({nodes}, {nodes}) for x's N nodes (rpfast.GINConv is "
                                 f"node-level on a square graph; it takes no batch vector), got {_shown(size)}")
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a tensor [N, F] or [R, N, F] (bipartite (x_src, x_dst) pairs are not "
                            f"supported), got {type(x).__name__}")
        if x.dim() not in (2, 3):
            raise ValueError(f"x must have shape [N, F] or [R, N, F], got {tuple(x.shape)}")
        if compiling() and isinstance(edge_index, Tensor) and edge_index.layout == torch.strided:
            # compiled code builds the CSR inside the graph (the eager cache is keyed on tensor identity)
            x3 = x if x.dim() == 3 else x.unsqueeze(0)
            out = gin_aggregate_op(x3.contiguous(), *csr_op(edge_index, x.shape[-2]), self.eps.to(x.dtype))
            return self.nn(out if x.dim() == 3 else out.squeeze(0))
        if isinstance(edge_index, GraphBatch):
            graph = edge_index
        else:
            if is_pyg_data(edge_index):
                if edge_index.num_nodes is not None and edge_index.num_nodes != x.shape[-2]:
                    raise ValueError(f"x has {x.shape[-2]} nodes (dim -2) but the PyG "
                                     f"{type(edge_index).__name__} has {edge_index.num_nodes}")
                adj_t = getattr(edge_index, "adj_t", None)
                edge_index = edge_index.edge_index if edge_index.edge_index is not None else \
                    adj_t if is_sparse_adjacency(adj_t) else torch.zeros(2, 0, dtype=torch.int64)
            if self.cache:
                graph = graph_for_edge_index(edge_index, x.shape[-2])  # also reads a sparse adj_t
            else:
                graph = GraphBatch(edge_index_from_adj_t(edge_index, x.shape[-2]) if is_sparse_adjacency(edge_index)
                                   else edge_index, num_nodes=x.shape[-2])
        return self.nn(gin_aggregate(x, graph, self.eps))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"


def _reset(module) -> None:
    """``module.reset_parameters()`` if it has one, else :func:`_reset` of each child in order."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    else:
        for child in module.children() if hasattr(module, "children") else []:
            _reset(child)


def _shown(value) -> str:
    return f"a tensor of shape {list(value.shape)}" if isinstance(value, Tensor) else repr(value)
