"""Graph data: batches in PyTorch Geometric's layout with cached CSR and dense views."""
from rpfast.data.batch import GraphBatch

__all__ = ["GraphBatch"]
