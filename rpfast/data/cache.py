"""Reuse one GraphBatch (and its CSR) per distinct edge_index tensor.

A model calls ``GINConv.forward(x, edge_index)`` once per layer and per step with the
same ``edge_index`` object; converting it to CSR every time would cost more than the
aggregation. Entries are keyed by tensor identity, invalidated when the tensor is
modified in place (its version counter changes) and dropped when it is freed.
"""
import weakref
from typing import Dict, Optional, Tuple

import torch

from rpfast.data.batch import GraphBatch

_CACHE: Dict[int, Tuple[weakref.ref, int, int, GraphBatch]] = {}


def graph_for_edge_index(edge_index: torch.Tensor, num_nodes: Optional[int]) -> GraphBatch:
    """The cached single-graph GraphBatch for ``edge_index`` with ``num_nodes`` nodes."""
    if not isinstance(edge_index, torch.Tensor):
        return GraphBatch(edge_index, num_nodes=num_nodes)
    key = id(edge_index)
    entry = _CACHE.get(key)
    if entry is not None:
        ref, version, n, graph = entry
        if ref() is edge_index and version == edge_index._version and n == num_nodes:
            return graph
    # The batch keeps a copy: holding edge_index itself would keep it alive forever.
    graph = GraphBatch(edge_index.detach().clone(), num_nodes=num_nodes)
    _CACHE[key] = (weakref.ref(edge_index, lambda _, key=key: _CACHE.pop(key, None)),
                   edge_index._version, num_nodes, graph)
    return graph


def cache_size() -> int:
    return len(_CACHE)
