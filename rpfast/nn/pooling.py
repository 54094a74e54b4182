"""Graph readout."""
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast.ops.segment import graph_sum


def sum_pool(h: Tensor, graph: GraphBatch) -> Tensor:
    """Sum node embeddings per graph: ``[..., N, F] -> [..., B, F]`` (C++ segment sum, deterministic);
    ``graph`` as :func:`rpfast.ops.graph_sum` takes it (also a PyG batch or its batch vector)."""
    return graph_sum(h, graph)
