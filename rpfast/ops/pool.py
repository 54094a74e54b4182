"""Max pooling of Duvenaud et al.'s model: over each atom's neighbourhood (DeepChem's
GraphPool) and over each graph (the max half of GraphGather).

Both maxima are locally linear: with the tie mask fixed, ``out = J x`` where row ``i`` of ``J``
averages the entries that attain the maximum. The backward is ``J^T g`` (one C++ pass); it is
itself a Function whose backward, ``J v``, runs in torch, so second derivatives work (the
mask is piecewise constant: its own derivative is zero almost everywhere).
"""
import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast import _backend
from rpfast.ops.segment import check_node_tensor

__all__ = ["neighbour_max", "graph_max"]


def _rows_of(rowptr: Tensor) -> Tensor:
    """``[E]`` the row of every CSR entry."""
    return torch.repeat_interleave(torch.arange(rowptr.numel() - 1), rowptr.diff(), output_size=int(rowptr[-1]))


class _NeighbourMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, in_rowptr: Tensor, in_col: Tensor, out_rowptr: Tensor, out_col: Tensor) -> Tensor:
        out, ties = torch.empty_like(x), torch.empty_like(x)
        _backend.call("neighbour_max", x, in_rowptr, in_col, out, ties)
        ctx.save_for_backward(x, out, ties, in_rowptr, in_col, out_rowptr, out_col)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _NeighbourMaxAdjoint.apply(grad, *ctx.saved_tensors), None, None, None, None


class _NeighbourMaxAdjoint(torch.autograd.Function):
    """``J^T g`` for neighbour_max's Jacobian ``J`` (C++, over the outgoing-edge CSR)."""

    @staticmethod
    def forward(ctx, grad, x, out, ties, in_rowptr, in_col, out_rowptr, out_col):
        grad_x = torch.empty_like(x)
        _backend.call("neighbour_max_backward", x, out, ties, grad.contiguous(), out_rowptr, out_col, grad_x)
        ctx.save_for_backward(x, out, ties, in_rowptr, in_col)
        return grad_x

    @staticmethod
    def backward(ctx, v: Tensor):
        """``J v``: each row's average of ``v`` over the entries attaining its maximum (torch ops)."""
        x, out, ties, in_rowptr, in_col = ctx.saved_tensors
        target = _rows_of(in_rowptr)
        jv = torch.where(x == out, v, 0).index_add(0, target, torch.where(x[in_col] == out[target], v[in_col], 0))
        return jv / ties, None, None, None, None, None, None, None


def neighbour_max(x: Tensor, graph: GraphBatch) -> Tensor:
    r"""Every atom's channel-wise maximum over itself and the atoms with an edge into it:

    .. math:: \text{out}_{i} = \max\big(x_i, \max_{j \to i} x_j\big)

    equal to ``x.scatter_reduce(0, target, x[source], "amax", include_self=True)`` in values (NaN
    propagates) and gradient (a tied maximum shares its gradient evenly), in one C++ pass each
    way, without the ``[E, F]`` gather and its scatter-add backward. Where a neighbourhood holds
    a NaN, torch's gradient there is NaN; here no gradient flows through that maximum.

    Shapes: ``x [N, F]`` float32/float64 for the ``N`` nodes of ``graph`` -> ``[N, F]``.
    Twice differentiable (the tie mask counts as constant).
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
    def backward(ctx, grad: Tensor):
        return _GraphMaxAdjoint.apply(grad, *ctx.saved_tensors), None


class _GraphMaxAdjoint(torch.autograd.Function):
    """``J^T g`` for graph_max's Jacobian ``J`` (C++)."""

    @staticmethod
    def forward(ctx, grad, x, ptr, out, ties):
        grad_x = torch.empty_like(x)
        _backend.call("segment_max_backward", x, ptr, out, ties, grad.contiguous(), grad_x)
        ctx.save_for_backward(x, ptr, out, ties)
        return grad_x

    @staticmethod
    def backward(ctx, v: Tensor):
        """``J v``: each graph's average of ``v`` over the nodes attaining its maximum (torch ops)."""
        x, ptr, out, ties = ctx.saved_tensors
        graph_of = _rows_of(ptr)
        jv = out.new_zeros(out.shape).index_add(0, graph_of, torch.where(x == out[graph_of], v, 0))
        return jv / ties.clamp(min=1), None, None, None, None  # an empty graph: ties 0, no entries


def graph_max(x: Tensor, graph: GraphBatch) -> Tensor:
    r"""Every graph's channel-wise maximum over its nodes, 0 for a graph without nodes:

    .. math:: \text{out}_{b} = \max_{i \in G_b} x_i

    equal to ``zeros.scatter_reduce(0, batch, x, "amax", include_self=False)`` in values and
    gradient (a tied maximum shares its gradient evenly among the graph's nodes that attain it),
    in one C++ pass each way. Two differences: where a graph's maximum is exactly 0, torch's
    backward also counts the discarded initial zero as a tie, and where a graph holds a NaN,
    torch's gradient is NaN; here only the nodes count, and no gradient flows through a NaN
    maximum.

    Shapes: ``x [N, F]`` float32/float64 for the ``N`` nodes of ``graph`` -> ``[B, F]``.
    Twice differentiable (the tie mask counts as constant).
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
