"""Graph readout."""
import torch
from torch import Tensor

from rpfast.data import GraphBatch


def sum_pool(h: Tensor, graph: GraphBatch) -> Tensor:
    """Sum node embeddings per graph: ``[..., N, F] -> [..., B, F]`` (deterministic)."""
    out = h.new_zeros(h.shape[:-2] + (graph.num_graphs, h.shape[-1]))
    return out.index_add_(h.dim() - 2, graph.batch, h)
