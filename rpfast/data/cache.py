"""Reuse one GraphBatch (and its CSR) per distinct edge_index tensor.

A model calls ``GINConv.forward(x, edge_index)`` once per layer and per step with the
same ``edge_index`` object; converting it to CSR every time would cost more than the
aggregation. Entries are keyed by tensor identity, invalidated when the tensor is
modified in place through torch (its version counter changes) and dropped when it is freed.

Limitation: writes that bypass torch's version counter are not seen, e.g. through
``edge_index.numpy()``, a NumPy array the tensor was made from with ``torch.from_numpy``,
or ``.data``. After such an edit call :func:`clear_graph_cache` (or build the layer with
``GINConv(..., cache=False)``), otherwise the stale CSR is used.
"""
import weakref
from typing import Dict, Optional, Tuple

import torch

from rpfast.data.batch import GraphBatch
from rpfast.data.sparse import edge_index_from_adj_t, is_sparse_adjacency

__all__ = ["graph_for_edge_index", "clear_graph_cache", "cache_size"]

_CACHE: Dict[int, Tuple[weakref.ref, int, int, GraphBatch]] = {}


def graph_for_edge_index(edge_index: torch.Tensor, num_nodes: Optional[int]) -> GraphBatch:
    """The cached single-graph GraphBatch for ``edge_index [2, E]`` with ``num_nodes`` nodes, or
    for PyG's sparse ``adj_t`` in its place (:func:`rpfast.data.sparse.edge_index_from_adj_t`)."""
    sparse = is_sparse_adjacency(edge_index)
    if not sparse and (not isinstance(edge_index, torch.Tensor) or edge_index.layout != torch.strided):
        return GraphBatch(edge_index, num_nodes=num_nodes)  # validates and explains
    key = id(edge_index)
    entry = _CACHE.get(key)
    if entry is not None:
        ref, version, n, graph = entry
        if ref() is edge_index and version == getattr(edge_index, "_version", 0) and n == num_nodes:
            return graph
    # The batch keeps a copy: holding edge_index itself would keep it alive forever.
    graph = GraphBatch(edge_index_from_adj_t(edge_index, num_nodes) if sparse else edge_index.detach().clone(),
                       num_nodes=num_nodes)
    _CACHE[key] = (weakref.ref(edge_index, lambda _, key=key: _CACHE.pop(key, None)),
                   getattr(edge_index, "_version", 0), num_nodes, graph)
    return graph


def clear_graph_cache() -> None:
    """Forget every cached CSR (needed after editing an ``edge_index`` behind torch's back)."""
    _CACHE.clear()


def cache_size() -> int:
    """Number of cached graphs."""
    return len(_CACHE)
