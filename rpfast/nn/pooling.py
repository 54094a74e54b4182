"""Graph readout."""
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast.ops import segment_sum


def sum_pool(h: Tensor, graph: GraphBatch) -> Tensor:
    """Sum node embeddings per graph: ``[..., N, F] -> [..., B, F]`` (C++ segment sum, deterministic)."""
    return segment_sum(h, graph.ptr)
