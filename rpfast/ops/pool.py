"""Max pooling of Duvenaud et al.'s model: over each atom's neighbourhood (DeepChem's
GraphPool) and over each graph (the max half of GraphGather)."""
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast.data import GraphBatch
from rpfast.ops import _backend
from rpfast.ops.segment import check_node_tensor

__all__ = ["neighbour_max", "graph_max"]


class _NeighbourMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, in_rowptr: Tensor, in_col: Tensor, out_rowptr: Tensor, out_col: Tensor) -> Tensor:
        out, ties = torch.empty_like(x), torch.empty_like(x)
        _backend.call("neighbour_max", x, in_rowptr, in_col, out, ties)
        ctx.save_for_backward(x, out, ties, out_rowptr, out_col)
        return out

    @staticmethod
    @once_differentiable  # the tie mask is piecewise constant; a second derivative is not offered
    def backward(ctx, grad: Tensor):
        x, out, ties, out_rowptr, out_col = ctx.saved_tensors
        grad_x = torch.empty_like(x)
        _backend.call("neighbour_max_backward", x, out, ties, grad.contiguous(), out_rowptr, out_col, grad_x)
        return grad_x, None, None, None, None


def neighbour_max(x: Tensor, graph: GraphBatch) -> Tensor:
    r"""Every atom's channel-wise maximum over itself and the atoms with an edge into it:

    .. math:: \text{out}_{i} = \max\big(x_i, \max_{j \to i} x_j\big)

    equal to ``x.scatter_reduce(0, target, x[source], "amax", include_self=True)`` (values and
    gradient: a tied maximum shares its gradient evenly, NaN propagates) in one C++ pass each
    way, without the ``[E, F]`` gather and its scatter-add backward.

    Shapes: ``x [N, F]`` float32/float64 for the ``N`` nodes of ``graph`` -> ``[N, F]``.
    Not twice differentiable.
    """
    _check_rows(x, graph)
    if torch.compiler.is_compiling():  # the same op in torch: the Function is not traceable
        source, target = graph.edge_index
        return x.scatter_reduce(0, target.unsqueeze(1).expand(-1, x.shape[1]), x[source], "amax", include_self=True)
    return _NeighbourMax.apply(x.contiguous(), graph.t_rowptr, graph.t_col, graph.rowptr, graph.col)


class _GraphMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, ptr: Tensor) -> Tensor:
        B = ptr.numel() - 1
        out, ties = x.new_empty((B, x.shape[1])), x.new_empty((B, x.shape[1]))
        _backend.call("segment_max", x, ptr, out, ties)
        ctx.save_for_backward(x, ptr, out, ties)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        x, ptr, out, ties = ctx.saved_tensors
        grad_x = torch.empty_like(x)
        _backend.call("segment_max_backward", x, ptr, out, ties, grad.contiguous(), grad_x)
        return grad_x, None


def graph_max(x: Tensor, graph: GraphBatch) -> Tensor:
    r"""Every graph's channel-wise maximum over its nodes, 0 for a graph without nodes:

    .. math:: \text{out}_{b} = \max_{i \in G_b} x_i

    equal to ``zeros.scatter_reduce(0, batch, x, "amax", include_self=False)`` (values and
    gradient: a tied maximum shares its gradient evenly among the graph's nodes that attain it)
    in one C++ pass each way. One difference: where a graph's maximum is exactly 0, torch's
    backward also counts the discarded initial zero as a tie; here only the nodes count.

    Shapes: ``x [N, F]`` float32/float64 for the ``N`` nodes of ``graph`` -> ``[B, F]``.
    Not twice differentiable.
    """
    _check_rows(x, graph)
    if torch.compiler.is_compiling():  # the same op in torch: the Function is not traceable
        index = graph.batch.unsqueeze(1).expand(-1, x.shape[1])
        return x.new_zeros(graph.num_graphs, x.shape[1]).scatter_reduce(0, index, x, "amax", include_self=False)
    return _GraphMax.apply(x.contiguous(), graph.ptr)


def _check_rows(x: Tensor, graph: GraphBatch) -> None:
    """``x`` must be a float ``[N, F]`` tensor for the ``N`` nodes of ``graph`` (no replica axis)."""
    check_node_tensor(x, graph)
    if x.dim() != 2:
        raise ValueError(f"x must have shape [N, F], got {tuple(x.shape)}")
