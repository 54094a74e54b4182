"""Graph readout."""
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast.ops.segment import graph_sum


def sum_pool(h: Tensor, graph: GraphBatch) -> Tensor:
    """Sum node embeddings per graph: ``[..., N, F] -> [..., B, F]`` (C++ segment sum, deterministic)."""
    return graph_sum(h, graph)
