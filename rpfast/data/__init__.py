"""Graph data: batches in PyTorch Geometric's layout with cached CSR and dense views."""
from rpfast.data.batch import GraphBatch
from rpfast.data.csl import PAPER_SKIPS, csl_batch, csl_dataset, csl_graph

__all__ = ["GraphBatch", "csl_graph", "csl_dataset", "csl_batch", "PAPER_SKIPS"]
