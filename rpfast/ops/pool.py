"""Max pooling of Duvenaud et al.'s model: over each atom's neighbourhood (DeepChem's
GraphPool) and over each graph (the max half of GraphGather).

Both maxima are locally linear: with the tie mask fixed, ``out = J x`` where row ``i`` of ``J``
averages the entries that attain the maximum. The backward is ``J^T g`` (one C++ pass); it is
itself a Function whose backward, ``J v``, runs in torch, so second derivatives work (the
mask is piecewise constant: its own derivative is zero almost everywhere).

Registered ops (:mod:`rpfast.ops._registry`): ``neighbour_max`` and ``graph_max`` (each returns
the maxima and their tie counts) and their adjoints. C++ on the CPU; elsewhere
``scatter_reduce(..., "amax")`` and ``index_add_``.
"""
import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast import _backend
from rpfast.ops._registry import declare
from rpfast.ops.gin import graph_csr
from rpfast.ops.segment import check_node_tensor, graph_of_rows

__all__ = ["neighbour_max", "graph_max"]


def _targets(in_rowptr: Tensor, in_col: Tensor) -> Tensor:
    """``[E]`` the target (row) of every entry of the incoming-edge CSR."""
    return graph_of_rows(in_rowptr, in_col.shape[0])


def _share(grad: Tensor, ties: Tensor) -> Tensor:
    """Each maximum's gradient split evenly among the entries that attain it (none: no NaN)."""
    return torch.where(ties > 0, grad / ties.clamp(min=1), 0)


# ------------------------------------------------------------------ over neighbourhoods
def _neighbour_kernel(x, in_rowptr, in_col, out_rowptr, out_col):
    out, ties = torch.empty_like(x), torch.empty_like(x)
    _backend.call("neighbour_max", x, in_rowptr, in_col, out, ties)
    return out, ties


def _neighbour_composed(x, in_rowptr, in_col, out_rowptr, out_col):
    target = _targets(in_rowptr, in_col)
    index = target.unsqueeze(1).expand(-1, x.shape[1])
    out = x.scatter_reduce(0, index, x[in_col], "amax", include_self=True)
    ties = (x == out).to(x.dtype).index_add_(0, target, (x[in_col] == out[target]).to(x.dtype))
    return out, ties


def _neighbour_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], *output, *inputs[1:])


def _neighbour_backward(ctx, grad, grad_ties=None):
    return neighbour_max_adjoint_op(grad.contiguous(), *ctx.saved_tensors), None, None, None, None


def _adjoint_kernel(grad, x, out, ties, in_rowptr, in_col, out_rowptr, out_col):
    grad_x = torch.empty_like(x)
    _backend.call("neighbour_max_backward", x, out, ties, grad, out_rowptr, out_col, grad_x)
    return grad_x


def _adjoint_composed(grad, x, out, ties, in_rowptr, in_col, out_rowptr, out_col):
    """``J^T g``: every maximum's share goes to the entries (the node, its sources) attaining it."""
    target = _targets(in_rowptr, in_col)
    share = _share(grad, ties)
    grad_x = torch.where(x == out, share, 0)
    return grad_x.index_add_(0, in_col, torch.where(x[in_col] == out[target], share[target], 0))


def _adjoint_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[1:6])


def _adjoint_backward(ctx, v):
    """``J v``: each row's average of ``v`` over the entries attaining its maximum (torch ops)."""
    x, out, ties, in_rowptr, in_col = ctx.saved_tensors
    target = _targets(in_rowptr, in_col)
    jv = torch.where(x == out, v, 0).index_add(0, target, torch.where(x[in_col] == out[target], v[in_col], 0))
    return jv / ties, None, None, None, None, None, None, None  # the adjoint is linear in grad


neighbour_max_op = declare(
    "neighbour_max", "(Tensor x, Tensor in_rowptr, Tensor in_col, Tensor out_rowptr, Tensor out_col) "
                     "-> (Tensor, Tensor)",
    kernels={"cpu": _neighbour_kernel}, composed=_neighbour_composed,
    fake=lambda x, *graph: (torch.empty_like(x), torch.empty_like(x)),
    setup=_neighbour_setup, backward=_neighbour_backward)
neighbour_max_adjoint_op = declare(
    "neighbour_max_adjoint", "(Tensor grad, Tensor x, Tensor out, Tensor ties, Tensor in_rowptr, Tensor in_col, "
                             "Tensor out_rowptr, Tensor out_col) -> Tensor",
    kernels={"cpu": _adjoint_kernel}, composed=_adjoint_composed, fake=lambda grad, x, *rest: torch.empty_like(x),
    setup=_adjoint_setup, backward=_adjoint_backward)
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
    return neighbour_max_op(x.contiguous(), *graph_csr(graph))[0]


# ------------------------------------------------------------------ over graphs
def _graph_kernel(x, ptr):
    B = ptr.shape[0] - 1
    out, ties = x.new_empty((B, x.shape[1])), x.new_empty((B, x.shape[1]))
    _backend.call("segment_max", x, ptr, out, ties)
    return out, ties


def _graph_composed(x, ptr):
    graph_of = graph_of_rows(ptr, x.shape[0])
    out = x.new_zeros((ptr.shape[0] - 1, x.shape[1]))
    out = out.scatter_reduce(0, graph_of.unsqueeze(1).expand(-1, x.shape[1]), x, "amax", include_self=False)
    ties = torch.zeros_like(out).index_add_(0, graph_of, (x == out[graph_of]).to(x.dtype))
    return out, ties


def _graph_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1], *output)


def _graph_backward(ctx, grad, grad_ties=None):
    return graph_max_adjoint_op(grad.contiguous(), *ctx.saved_tensors), None


def _graph_adjoint_kernel(grad, x, ptr, out, ties):
    grad_x = torch.empty_like(x)
    _backend.call("segment_max_backward", x, ptr, out, ties, grad, grad_x)
    return grad_x


def _graph_adjoint_composed(grad, x, ptr, out, ties):
    graph_of = graph_of_rows(ptr, x.shape[0])
    return torch.where(x == out[graph_of], _share(grad, ties)[graph_of], 0)


def _graph_adjoint_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[1:])


def _graph_adjoint_backward(ctx, v):
    """``J v``: each graph's average of ``v`` over the nodes attaining its maximum (torch ops)."""
    x, ptr, out, ties = ctx.saved_tensors
    graph_of = graph_of_rows(ptr, x.shape[0])
    jv = out.new_zeros(out.shape).index_add(0, graph_of, torch.where(x == out[graph_of], v, 0))
    return jv / ties.clamp(min=1), None, None, None, None  # an empty graph: ties 0, no entries


graph_max_op = declare(
    "graph_max", "(Tensor x, Tensor ptr) -> (Tensor, Tensor)",
    kernels={"cpu": _graph_kernel, "cuda": _graph_kernel}, composed=_graph_composed,
    fake=lambda x, ptr: (x.new_empty((ptr.shape[0] - 1, x.shape[1])), x.new_empty((ptr.shape[0] - 1, x.shape[1]))),
    setup=_graph_setup, backward=_graph_backward)
graph_max_adjoint_op = declare(
    "graph_max_adjoint", "(Tensor grad, Tensor x, Tensor ptr, Tensor out, Tensor ties) -> Tensor",
    kernels={"cpu": _graph_adjoint_kernel, "cuda": _graph_adjoint_kernel}, composed=_graph_adjoint_composed,
    fake=lambda grad, x, *rest: torch.empty_like(x),
    setup=_graph_adjoint_setup, backward=_graph_adjoint_backward)


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
    return graph_max_op(x.contiguous(), graph.ptr)[0]


def _check_rows(x: Tensor, graph: GraphBatch) -> None:
    """``x`` must be a float ``[N, F]`` tensor for the ``N`` nodes of ``graph`` (no replica axis)."""
    check_node_tensor(x, graph)
    if x.dim() != 2:
        raise ValueError(f"x must have shape [N, F], got {tuple(x.shape)}")
