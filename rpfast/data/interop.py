"""GraphBatch from and to the graph objects users arrive with: networkx graphs and PyTorch
Geometric ``Data`` / ``Batch`` (``GraphBatch.from_networkx``, ``GraphBatch.from_pyg``,
``GraphBatch.to_pyg`` call these; ``cls`` is the class to build)."""
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from rpfast._validation import is_pyg_data
from rpfast.data.sparse import edge_index_from_adj_t, is_sparse_adjacency

__all__ = ["from_networkx", "from_pyg", "to_pyg"]

#: the attributes a GraphBatch holds itself; every other attribute of a PyG object is an extra
_PYG_LAYOUT = ("x", "edge_index", "edge_attr", "batch", "ptr", "num_nodes")


def from_networkx(cls, graphs, node_attr: Optional[str] = None, edge_attr: Optional[str] = None):
    """Batch networkx graphs. Undirected graphs get both edge directions.

    Nodes labelled exactly ``0..n-1`` keep their labels; other labels are numbered in
    ``G.nodes`` order. ``node_attr``/``edge_attr`` name a numeric (scalar or vector)
    attribute to use as ``x``/``edge_attr``; every node/edge must have it (ValueError).
    """
    import networkx as nx

    if isinstance(graphs, nx.Graph):
        graphs = [graphs]
    pairs, xs, eas = [], [], []
    for g, G in enumerate(graphs):
        if not isinstance(G, nx.Graph):
            raise TypeError(f"graphs[{g}] is a {type(G).__name__}, not a networkx graph")
        labels = list(G.nodes)
        if set(labels) == set(range(len(labels))):
            labels = sorted(labels)
        H = nx.relabel_nodes(G, {v: i for i, v in enumerate(labels)})
        n = H.number_of_nodes()
        ei = torch.as_tensor(np.array(list(H.edges()), dtype=np.int64).reshape(-1, 2).T)
        attrs = None
        if edge_attr is not None:
            items = [(f"edge ({labels[u]!r}, {labels[v]!r})", d) for u, v, d in H.edges(data=True)]
            attrs = _attr_rows(items, edge_attr, f"graphs[{g}]", "edge_attr")
        if not H.is_directed():
            ei = torch.cat([ei, ei.flip(0)], dim=1)
            attrs = None if attrs is None else torch.cat([attrs, attrs])
        pairs.append((ei, n))
        eas.append(attrs)
        if node_attr is not None:
            items = [(f"node {v!r}", G.nodes[v]) for v in labels]
            xs.append(_attr_rows(items, node_attr, f"graphs[{g}]", "node_attr"))
    return cls.from_edge_lists(pairs, x=None if node_attr is None else xs,
                               edge_attr=None if edge_attr is None else eas)

def from_pyg(cls, data):
    """Convert a ``torch_geometric.data.Batch`` (or single ``Data``) without copying.

    A ``data`` without ``edge_index`` but with PyG's sparse ``adj_t`` (``T.ToSparseTensor``)
    takes its edges from it (:func:`rpfast.data.sparse.edge_index_from_adj_t`: stored entry
    ``adj_t[i, j]`` is the edge ``j -> i``; ``edge_attr`` rows in the order of its entries).

    Every other attribute (``y``, ``pos``, names, ...) is kept in ``extras`` (and reads as
    ``graph.y``); :meth:`to_pyg` converts back. Integer ``x``/``edge_attr`` become floats.
    """
    if not is_pyg_data(data):
        raise TypeError(
            f"data must be a torch_geometric.data.Data or Batch, got {type(data).__name__}; "
            f"for a list of Data objects pass torch_geometric.data.Batch.from_data_list(data_list)"
        )
    batch = getattr(data, "batch", None)
    ptr = getattr(data, "ptr", None)
    if batch is not None and ptr is not None:
        batch = None
    edge_index, layout = data.edge_index, _PYG_LAYOUT
    adj_t = getattr(data, "adj_t", None)
    if edge_index is None and is_sparse_adjacency(adj_t):  # T.ToSparseTensor's output
        edge_index, layout = edge_index_from_adj_t(adj_t), (*layout, "adj_t")
    if edge_index is None:
        edge_index = torch.zeros(2, 0, dtype=torch.int64)
    out = cls(
        edge_index,
        x=data.x,
        edge_attr=getattr(data, "edge_attr", None),
        batch=batch,
        ptr=ptr,
        total_nodes=None if (batch is not None or ptr is not None or data.x is not None) else data.num_nodes,
    )
    out.extras = {key: data[key] for key in data.keys() if key not in layout}
    # Batch.from_data_list's slicing metadata lets to_pyg() results call to_data_list().
    out._pyg_meta = tuple(getattr(data, name, None) for name in ("_slice_dict", "_inc_dict"))
    return out

def to_pyg(batch):
    """A ``torch_geometric.data.Batch`` with ``x``, ``edge_index``, ``edge_attr``, ``batch``,
    ``ptr`` and the ``extras``, sharing this batch's tensors (no copy)."""
    from torch_geometric.data import Batch

    fields = dict(batch.extras)
    fields.update(edge_index=batch.edge_index, batch=batch.batch, ptr=batch._ptr)
    if batch.x is not None:
        fields["x"] = batch.x
    if batch.edge_attr is not None:
        fields["edge_attr"] = batch.edge_attr
    out = Batch(**fields)
    if batch.x is None:
        out.num_nodes = batch.total_nodes
    out._num_graphs = batch.num_graphs
    slices, incs = batch.__dict__.get("_pyg_meta", (None, None))
    if slices is not None and incs is not None:
        out._slice_dict, out._inc_dict = slices, incs
    return out


def _attr_rows(items, attr: str, where: str, arg: str) -> Tensor:
    """``[len(items), D]`` from ``(description, attribute dict)`` pairs of networkx nodes/edges;
    ``arg`` names the argument that chose ``attr``."""
    values = []
    for what, d in items:
        if attr not in d:
            raise ValueError(f"{arg}={attr!r}: {where} {what} has no attribute {attr!r}")
        values.append(d[attr])
    try:
        t = torch.tensor(values, dtype=torch.get_default_dtype())
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"{arg}={attr!r}: the values in {where} must be numbers or equal-length vectors "
                         f"({error})") from None
    return t.reshape(len(values), -1) if values else t.reshape(0, 0)
