"""Graph data: batches in PyTorch Geometric's layout with cached CSR and dense views, and their
conversions (edge lists, PyG's sparse ``adj_t``, networkx and PyG objects). Data sets (CSL,
molecules, MoleculeNet, graph pairs) live in :mod:`rpfast.datasets`."""
from rpfast.data.batch import GraphBatch
from rpfast.data.cache import clear_graph_cache
from rpfast.data.readers import read_edge_list
from rpfast.data.sparse import edge_index_from_adj_t

__all__ = [
    "GraphBatch",
    "clear_graph_cache",
    "read_edge_list",
    "edge_index_from_adj_t",
]
