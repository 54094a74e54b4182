r"""One input convention for every graph layer: :func:`read_graph_input`.

A layer's ``forward(data, edge_index=None, batch=None, edge_attr=None)`` accepts, told apart by
the arguments' types (and an index tensor's dtype and shape):

(a) a :class:`~rpfast.data.GraphBatch` alone: ``x`` is ``graph.x`` (may be None);
(b) a PyG ``Data``/``Batch`` alone: converted by :meth:`GraphBatch.from_pyg` (no copy);
(c) ``(x or None, graph)`` with a GraphBatch second (the GIN-style call): ``x`` is taken as
    given (it may differ from ``graph.x``, e.g. features computed outside the graph);
(d) ``(x [N, F], edge_index [2, E], batch [N] = None, edge_attr [E, D] = None)``, PyG's argument
    order, with an integer ``edge_index``: one GraphBatch (``batch=None``: one graph). As in PyG,
    ``edge_index`` may instead be the sparse transposed adjacency ``adj_t [N, N]``
    (``torch.sparse`` COO or CSR, or a ``torch_sparse.SparseTensor``, as ``T.ToSparseTensor``
    makes it): a stored entry ``adj_t[i, j]`` is the edge ``j -> i``, and ``edge_attr`` rows
    follow the order of its entries (:func:`rpfast.data.sparse.edge_index_from_adj_t`). A PyG
    ``Data``/``Batch`` holding ``adj_t`` instead of ``edge_index`` is read the same way.

Anything else, and any argument beside a graph object (it holds its edges, batch vector and
edge features), is a TypeError naming the accepted forms.
"""
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from rpfast._validation import is_pyg_data
from rpfast.data import GraphBatch
from rpfast.data.sparse import edge_index_from_adj_t, is_sparse_adjacency
from rpfast.nn._unsupported import check_call

__all__ = ["GraphInput", "read_graph_input"]


class GraphInput(NamedTuple):
    """``x``: node features ``[N, F]`` (or whatever tensor the caller passed as x), may be None;
    ``graph``: the :class:`~rpfast.data.GraphBatch` holding the structure."""

    x: Optional[Tensor]
    graph: GraphBatch


def _is_edge_index(value) -> bool:
    """Whether ``value`` is an integer ``[2, E]`` tensor: PyG's ``edge_index``."""
    return (isinstance(value, Tensor) and value.dim() == 2 and value.shape[0] == 2
            and not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool))


def read_graph_input(owner: str, data, edge_index=None, batch=None, edge_attr=None, *, training: bool = False
                     ) -> GraphInput:
    """The :class:`GraphInput` of any accepted form (see the module docstring); ``owner`` names the
    layer in error messages. Builds nothing for forms (a) and (c); (b) and (d) build one GraphBatch
    (which validates the indices, sizes and shapes). Under ``torch.jit.trace``, a ``torch.func``
    transform or a PyG Explainer with edge masks it raises NotImplementedError
    (:func:`rpfast.nn._unsupported.check_call`; ``training``: the calling layer's mode, in which
    the Explainer check, a walk up the call stack, is skipped: PyG's Explainer runs models in
    eval mode)."""
    check_call(owner, training)
    if isinstance(data, GraphBatch):
        _nothing_beside(owner, "a graph object", edge_index=edge_index, batch=batch, edge_attr=edge_attr)
        return GraphInput(data.x, data)
    if isinstance(edge_index, GraphBatch):  # before the PyG check: the GIN-style call also runs compiled
        if data is not None and not isinstance(data, Tensor):
            raise TypeError(f"{owner}(x, graph) takes x as a tensor [N, F] or None, got {type(data).__name__}")
        _nothing_beside(owner, "(x, graph)", batch=batch, edge_attr=edge_attr)
        return GraphInput(data, edge_index)
    if is_pyg_data(data):
        _nothing_beside(owner, "a graph object", edge_index=edge_index, batch=batch, edge_attr=edge_attr)
        graph = GraphBatch.from_pyg(data)
        return GraphInput(graph.x, graph)
    if isinstance(data, Tensor) and is_sparse_adjacency(edge_index):  # PyG's adj_t
        edge_index = edge_index_from_adj_t(edge_index, data.shape[0] if data.dim() else None)
    if edge_index is not None and not isinstance(edge_index, GraphBatch) and (data is None or isinstance(data, Tensor)):
        _check_edge_index(owner, data, edge_index)
    if isinstance(data, Tensor) and _is_edge_index(edge_index):
        if batch is None:  # one graph, its batch vector where x lives
            batch = torch.zeros(data.shape[0] if data.dim() else 0, dtype=torch.int64, device=data.device)
        graph = GraphBatch(edge_index, x=data, batch=batch, edge_attr=edge_attr)
        return GraphInput(graph.x, graph)
    raise TypeError(f"{owner} takes a GraphBatch, a PyG Data/Batch, (x, edge_index, batch=None, edge_attr=None) "
                    f"or (x or None, GraphBatch); got {_describe(data, edge_index, batch, edge_attr)}")


def _check_edge_index(owner: str, x, edge_index) -> None:
    """The (x, edge_index, ...) form's one-line errors: what is wrong with ``edge_index`` or ``x``."""
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"{owner}: edge_index must be a torch integer tensor [2, E], got {type(edge_index).__name__} "
                        "(torch.as_tensor(edge_index) converts an array or list)")
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex or edge_index.dtype == torch.bool:
        raise TypeError(f"{owner}: edge_index must hold integers (int64), got {str(edge_index.dtype).replace('torch.', '')}")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        hint = " (transposed? use edge_index.t())" if edge_index.dim() == 2 and edge_index.shape[1] == 2 else ""
        raise ValueError(f"{owner}: edge_index must have shape [2, E], got {list(edge_index.shape)}{hint}")
    if x is None:
        raise ValueError(f"{owner}(x, edge_index, ...) needs node features x [N, F] (a column of ones for graphs "
                         "without features), got None")


def _nothing_beside(owner: str, form: str, **extra) -> None:
    given = [name for name, value in extra.items() if value is not None]
    if given:
        raise TypeError(f"{owner} takes nothing beside {form}: it holds its edges, batch and edge_attr; "
                        f"got {', '.join(given)} too")


def _describe(*values) -> str:
    """``(Tensor[4, 3] float32, Tensor[2, 5] float32)`` for an error message (trailing Nones dropped)."""
    values = list(values)
    while len(values) > 1 and values[-1] is None:
        values.pop()
    parts = [f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')}" if isinstance(v, Tensor)
             else type(v).__name__ for v in values]
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"
