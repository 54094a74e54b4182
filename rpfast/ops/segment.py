"""Segment sums over node-sorted batches: the sum readout of a GNN."""
import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast import _backend
from rpfast.ops import library
from rpfast._validation import (
    index_tensor,
    require_float,
    require_kernel_device,
    require_ndim,
    require_tensor,
)

__all__ = ["segment_sum", "graph_sum"]


class _SegmentSum(torch.autograd.Function):
    """``[R, N, F] -> [R, B, F]``; backward is :class:`_SegmentBroadcast` (and vice versa), so
    double backward works."""

    @staticmethod
    def forward(ctx, x: Tensor, ptr: Tensor) -> Tensor:
        R, N, F = x.shape
        out = x.new_empty((R, ptr.numel() - 1, F))
        _backend.call("segment_sum", x, ptr, out)
        ctx.save_for_backward(ptr)
        ctx.num_nodes = N
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        (ptr,) = ctx.saved_tensors
        return _SegmentBroadcast.apply(grad.contiguous(), ptr, ctx.num_nodes), None


class _SegmentBroadcast(torch.autograd.Function):
    """``[R, B, F] -> [R, N, F]``: row ``i`` of graph ``b`` gets ``grad[:, b]``."""

    @staticmethod
    def forward(ctx, grad: Tensor, ptr: Tensor, num_nodes: int) -> Tensor:
        out = grad.new_empty((grad.shape[0], num_nodes, grad.shape[2]))
        _backend.call("segment_broadcast", grad, ptr, out)
        ctx.save_for_backward(ptr)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        (ptr,) = ctx.saved_tensors
        return _SegmentSum.apply(grad.contiguous(), ptr), None, None


def segment_sum(x: Tensor, ptr) -> Tensor:
    r"""Sum rows of ``x`` within the node ranges of every graph.

    .. math:: \text{out}[r, b] = \sum_{i=\text{ptr}[b]}^{\text{ptr}[b+1]-1} x[r, i]

    Args:
        x: ``[N, F]`` or ``[R, N, F]`` float32/float64, nodes sorted by graph.
        ptr: ``[B + 1]`` node offsets (``GraphBatch.ptr``), non-decreasing, ``ptr[-1] = N``.

    Returns:
        ``[B, F]`` or ``[R, B, F]``; deterministic, backward a broadcast (no atomics) that is
        itself differentiable (double backward).
    """
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[N, F] or [R, N, F]")
    require_kernel_device(x, "x")
    require_float(x, "x")
    if torch.compiler.is_compiling():  # ptr's values are checked by the kernel (no sync in a graph)
        return _sum(x, ptr)
    ptr = index_tensor(ptr, "ptr", ndim=1)
    if ptr.numel() < 1 or int(ptr[0]) != 0 or int(ptr[-1]) != x.shape[-2]:
        raise ValueError(f"ptr must start at 0 and end at N = {x.shape[-2]}, got {ptr.tolist()[:3]}...")
    if bool((ptr.diff() < 0).any()):
        raise ValueError("ptr must be non-decreasing")
    return _sum(x, ptr)


def graph_sum(x: Tensor, graph: GraphBatch) -> Tensor:
    """:func:`segment_sum` over the graphs of a :class:`~rpfast.data.GraphBatch`: ``x [N, F]`` or
    ``[R, N, F]`` -> ``[B, F]`` or ``[R, B, F]``. The batch checked its ``ptr`` when it was built,
    so only ``x`` is checked here (a readout runs every layer of every step)."""
    check_node_tensor(x, graph)
    return _sum(x, graph.ptr)


def check_node_tensor(x: Tensor, graph: GraphBatch) -> None:
    """``x`` must be a float ``[N, F]`` or ``[R, N, F]`` tensor for the ``N`` nodes of ``graph``."""
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[N, F] or [R, N, F]")
    require_kernel_device(x, "x")
    require_float(x, "x")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if x.shape[-2] != graph.total_nodes:
        raise ValueError(f"x has {x.shape[-2]} nodes (dim -2) but the graph has {graph.total_nodes}")


def _sum(x: Tensor, ptr: Tensor) -> Tensor:
    squeeze = x.dim() == 2
    x3 = (x.unsqueeze(0) if squeeze else x).contiguous()
    out = library.segment_sum(x3, ptr) if torch.compiler.is_compiling() else _SegmentSum.apply(x3, ptr)
    return out.squeeze(0) if squeeze else out
