"""Graph data: batches in PyTorch Geometric's layout with cached CSR and dense views."""
from rpfast.data.batch import GraphBatch
from rpfast.data.cache import clear_graph_cache
from rpfast.data.csl import PAPER_SKIPS, csl_batch, csl_dataset, csl_graph
from rpfast.data.moleculenet import MoleculeDataset, load_tox21, read_moleculenet_csv
from rpfast.data.molecules import batch_from_smiles, canonical_order_from_mol, graph_from_smiles
from rpfast.data.readers import read_edge_list
from rpfast.data.sparse import edge_index_from_adj_t

__all__ = [
    "GraphBatch",
    "clear_graph_cache",
    "csl_graph",
    "csl_dataset",
    "csl_batch",
    "PAPER_SKIPS",
    "read_edge_list",
    "edge_index_from_adj_t",
    "graph_from_smiles",
    "batch_from_smiles",
    "canonical_order_from_mol",
    "MoleculeDataset",
    "load_tox21",
    "read_moleculenet_csv",
]
