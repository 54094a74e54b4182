"""Batched GIN aggregation: (1 + eps) * x + A x over a GraphBatch's cached CSR."""
from typing import Union

import torch
from torch import Tensor

from rpfast import _C
from rpfast.data import GraphBatch
from rpfast.ops._checks import require_cpu, require_float, require_ndim, require_tensor
from rpfast.ops._threads import kernel_threads

__all__ = ["gin_aggregate"]


class _GINAggregate(torch.autograd.Function):
    """An autograd.Function rather than a torch.library custom op: on molecule-sized graphs
    the custom-op dispatch (~20 us a call, forward and backward) costs as much as the kernel."""

    @staticmethod
    def forward(ctx, x: Tensor, in_rowptr: Tensor, in_col: Tensor, out_rowptr: Tensor, out_col: Tensor,
                eps: Tensor) -> Tensor:
        out = torch.empty_like(x)
        _C.gin_aggregate(x.numpy(), in_rowptr.numpy(), in_col.numpy(), float(eps), out.numpy(), kernel_threads())
        ctx.save_for_backward(x, out_rowptr, out_col, eps)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, out_rowptr, out_col, eps = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = torch.empty_like(grad)
        threads = kernel_threads()
        _C.gin_aggregate(grad.numpy(), out_rowptr.numpy(), out_col.numpy(), float(eps), grad_x.numpy(), threads)
        grad_eps = None
        if ctx.needs_input_grad[5]:
            grad_eps = torch.full_like(eps, _C.sum_product(grad.numpy(), x.numpy(), threads))
        return grad_x, None, None, None, None, grad_eps


def gin_aggregate(x: Tensor, graph: GraphBatch, eps: Union[float, Tensor] = 0.0) -> Tensor:
    r"""GIN neighbourhood aggregation, fused in C++.

    .. math:: \text{out}_i = (1 + \epsilon)\, x_i + \sum_{j \to i} x_j

    summing over the edges ``j -> i`` of ``graph.edge_index`` (PyG's ``source_to_target``
    flow; multi-edges count with multiplicity). Backward: ``grad_x = (1 + eps) g + A^T g``
    over the cached outgoing-edge CSR and ``grad_eps = sum(g * x)``, both deterministic.

    Args:
        x: ``[N, F]`` or ``[R, N, F]`` float32/float64; ``R`` replicas (e.g. relabelings)
            share the graph structure.
        graph: a :class:`~rpfast.data.GraphBatch` with ``N`` nodes in total.
        eps: float or 0-d tensor (learnable if it requires grad).

    Returns:
        Tensor shaped like ``x``.
    """
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[N, F] or [R, N, F]")
    require_cpu(x, "x")
    require_float(x, "x")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if x.shape[-2] != graph.total_nodes:
        raise ValueError(f"x has {x.shape[-2]} nodes (dim -2) but the graph has {graph.total_nodes}")
    if isinstance(eps, Tensor):
        require_cpu(eps, "eps")
        if eps.numel() != 1 or not eps.dtype.is_floating_point:
            raise ValueError(f"eps must be a float or a one-element float tensor, got {tuple(eps.shape)} {eps.dtype}")
        eps_t = eps.reshape(()).to(x.dtype)
    elif isinstance(eps, (int, float)) and not isinstance(eps, bool):
        eps_t = torch.tensor(float(eps), dtype=x.dtype)
    else:
        raise TypeError(f"eps must be a float or a tensor, got {type(eps).__name__}")
    squeeze = x.dim() == 2
    x3 = (x.unsqueeze(0) if squeeze else x).contiguous()
    out = _GINAggregate.apply(x3, graph.t_rowptr, graph.t_col, graph.rowptr, graph.col, eps_t)
    return out.squeeze(0) if squeeze else out
