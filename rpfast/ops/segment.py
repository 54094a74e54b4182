"""Segment sums over node-sorted batches: the sum readout of a GNN.

Registered ops (:mod:`rpfast.ops._registry`): ``segment_sum`` ``[R, N, F] -> [R, B, F]`` and its
adjoint ``segment_broadcast`` ``[R, B, F] -> [R, N, F]``, each the other's backward (so double
backward works). C++ kernels on the CPU; elsewhere ``torch.segment_reduce`` over the node
ranges and an ``index_select`` (both deterministic: no atomics).
"""
import torch
from torch import Tensor

from rpfast import _backend
from rpfast._uploads import upload
from rpfast.data import GraphBatch
from rpfast.ops._registry import declare
from rpfast._validation import index_tensor, is_pyg_data, require_float, require_ndim, require_tensor

__all__ = ["segment_sum", "graph_sum", "check_node_tensor", "graph_of_rows"]


def graph_of_rows(ptr: Tensor, num_rows: int) -> Tensor:
    """``[num_rows]`` the segment of every row of ``ptr [B + 1]``'s ranges (on ``ptr``'s device)."""
    segments = torch.arange(ptr.shape[0] - 1, device=ptr.device)
    return torch.repeat_interleave(segments, ptr.diff(), output_size=num_rows)


def _sum_composed(x: Tensor, ptr: Tensor) -> Tensor:
    """``segment_sum`` from torch ops: one ``segment_reduce`` over ``x`` seen as ``[N, R * F]``."""
    R, N, F = x.shape
    rows = x.transpose(0, 1).reshape(N, R * F)
    summed = torch.segment_reduce(rows, "sum", offsets=ptr, axis=0)  # empty segments sum to 0
    return summed.view(ptr.shape[0] - 1, R, F).transpose(0, 1).contiguous()


def _sum_kernel(x: Tensor, ptr: Tensor) -> Tensor:
    out = x.new_empty((x.shape[0], ptr.shape[0] - 1, x.shape[2]))
    _backend.call("segment_sum", x.contiguous(), ptr, out)
    return out


def _sum_fake(x: Tensor, ptr: Tensor) -> Tensor:
    return x.new_empty((x.shape[0], ptr.shape[0] - 1, x.shape[2]))


def _sum_setup(ctx, inputs, output):
    x, ptr = inputs
    ctx.save_for_backward(ptr)
    ctx.num_nodes = x.shape[1]


def _sum_backward(ctx, grad):
    (ptr,) = ctx.saved_tensors
    return segment_broadcast_op(grad.contiguous(), ptr, ctx.num_nodes), None


def _broadcast_kernel(grad: Tensor, ptr: Tensor, num_nodes: int) -> Tensor:
    out = grad.new_empty((grad.shape[0], num_nodes, grad.shape[2]))
    _backend.call("segment_broadcast", grad.contiguous(), ptr, out)
    return out


def _broadcast_composed(grad: Tensor, ptr: Tensor, num_nodes: int) -> Tensor:
    return grad.index_select(1, graph_of_rows(ptr, num_nodes))


def _broadcast_fake(grad: Tensor, ptr: Tensor, num_nodes: int) -> Tensor:
    return grad.new_empty((grad.shape[0], num_nodes, grad.shape[2]))


def _broadcast_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _broadcast_backward(ctx, grad):
    (ptr,) = ctx.saved_tensors
    return segment_sum_op(grad.contiguous(), ptr), None, None


segment_sum_op = declare(
    "segment_sum", "(Tensor x, Tensor ptr) -> Tensor",
    kernels={"cpu": _sum_kernel, "cuda": _sum_kernel}, composed=_sum_composed, fake=_sum_fake, setup=_sum_setup,
    backward=_sum_backward)
segment_broadcast_op = declare(
    "segment_broadcast", "(Tensor grad, Tensor ptr, SymInt num_nodes) -> Tensor",
    kernels={"cpu": _broadcast_kernel}, composed=_broadcast_composed, fake=_broadcast_fake, setup=_broadcast_setup,
    backward=_broadcast_backward)


def segment_sum(x: Tensor, ptr) -> Tensor:
    r"""Sum rows of ``x`` within the node ranges of every graph.

    .. math:: \text{out}[r, b] = \sum_{i=\text{ptr}[b]}^{\text{ptr}[b+1]-1} x[r, i]

    Args:
        x: ``[N, F]`` or ``[R, N, F]`` float32/float64, nodes sorted by graph, on any device.
        ptr: ``[B + 1]`` node offsets (``GraphBatch.ptr``), non-decreasing, ``ptr[-1] = N``.

    Returns:
        ``[B, F]`` or ``[R, B, F]``; deterministic, backward a broadcast (no atomics) that is
        itself differentiable (double backward). C++ on the CPU, ``torch.segment_reduce``
        elsewhere.
    """
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[N, F] or [R, N, F]")
    require_float(x, "x")
    if isinstance(ptr, Tensor) and ptr.device != x.device:
        raise ValueError(f"ptr is on {ptr.device} but x is on {x.device}; put them on one device")
    ptr = index_tensor(ptr, "ptr", ndim=1).to(x.device)
    if ptr.device.type != "meta":  # the values of a meta tensor are unknown
        if ptr.numel() < 1 or int(ptr[0]) != 0 or int(ptr[-1]) != x.shape[-2]:
            raise ValueError(f"ptr must start at 0 and end at N = {x.shape[-2]}, got {ptr.tolist()[:3]}...")
        if bool((ptr.diff() < 0).any()):
            raise ValueError("ptr must be non-decreasing")
    return _sum(x, ptr)


def graph_sum(x: Tensor, graph) -> Tensor:
    """:func:`segment_sum` over the graphs of a batch: ``x [N, F]`` or ``[R, N, F]`` -> ``[B, F]``
    or ``[R, B, F]``. ``graph``: a :class:`~rpfast.data.GraphBatch` (which checked its ``ptr``
    when it was built, so only ``x`` is checked here: a readout runs every layer of every step),
    or, as PyG's ``global_add_pool(x, batch)`` takes them, a PyG ``Data``/``Batch`` or its
    ``batch`` vector ``[N]`` (graph ids sorted, as PyG's batches are)."""
    if isinstance(graph, GraphBatch):
        check_node_tensor(x, graph)
        return _sum(x, graph.ptr)
    return segment_sum(x, _pyg_ptr(graph, x))


def _pyg_ptr(graph, x: Tensor) -> Tensor:
    """``ptr [B + 1]`` of a PyG ``Data``/``Batch`` or of a sorted ``batch`` vector."""
    if is_pyg_data(graph):
        ptr = getattr(graph, "ptr", None)
        if ptr is None:  # one graph
            return upload(torch.tensor([0, x.shape[-2]]), x.device)
        return ptr
    if isinstance(graph, Tensor) and graph.dim() == 1 and not graph.dtype.is_floating_point:
        batch = graph.to(torch.int64)
        if batch.numel() and bool((batch.diff() < 0).any()):
            raise ValueError("batch must list the graph id of every node in sorted order (as PyG's batches do)")
        counts = torch.bincount(batch) if batch.numel() else batch.new_zeros(0)
        return torch.cat([batch.new_zeros(1), counts.cumsum(0)])
    raise TypeError(f"graph must be an rpfast.data.GraphBatch, a PyG Data/Batch or a batch vector [N], got "
                    f"{type(graph).__name__}{list(graph.shape) if isinstance(graph, Tensor) else ''}")


def check_node_tensor(x: Tensor, graph: GraphBatch) -> None:
    """``x`` must be a float ``[N, F]`` or ``[R, N, F]`` tensor for the ``N`` nodes of ``graph``,
    on the graph's device."""
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[N, F] or [R, N, F]")
    require_float(x, "x")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if x.shape[-2] != graph.total_nodes:
        raise ValueError(f"x has {x.shape[-2]} nodes (dim -2) but the graph has {graph.total_nodes}")
    if x.device != graph.device:
        raise ValueError(f"x is on {x.device} but the graph is on {graph.device}; move one with .to()")


def _sum(x: Tensor, ptr: Tensor) -> Tensor:
    squeeze = x.dim() == 2
    out = segment_sum_op((x.unsqueeze(0) if squeeze else x).contiguous(), ptr)
    return out.squeeze(0) if squeeze else out
