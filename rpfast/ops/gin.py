"""Batched GIN aggregation: (1 + eps) * x + A x over a GraphBatch's cached CSR."""
from typing import Union

import torch
from torch import Tensor

from rpfast.ops import _backend, library
from rpfast.ops.segment import check_node_tensor
from rpfast.data import GraphBatch
from rpfast._validation import eps_tensor

__all__ = ["gin_aggregate", "graph_csr"]


def graph_csr(graph: GraphBatch):
    """``(in_rowptr, in_col, out_rowptr, out_col)`` of a batch: its cached CSRs in eager mode; in
    compiled code one custom op builds them (a lazily cached attribute cannot be traced)."""
    if torch.compiler.is_compiling():
        return tuple(library.csr(graph.edge_index, graph.total_nodes))
    return graph.t_rowptr, graph.t_col, graph.rowptr, graph.col


class _GINAggregate(torch.autograd.Function):
    """``out = (1 + eps) x + A x`` with ``A`` given by ``(in_rowptr, in_col)`` (incoming edges).

    An autograd.Function rather than a torch.library custom op: on molecule-sized graphs
    the custom-op dispatch (~20 us a call, forward and backward) costs as much as the kernel.
    The op is linear in ``x``, so its backward is the same op over the swapped CSRs
    (``(1 + eps) g + A^T g``), applied as a Function again: double backward works.
    """

    @staticmethod
    def forward(ctx, x: Tensor, in_rowptr: Tensor, in_col: Tensor, out_rowptr: Tensor, out_col: Tensor,
                eps: Tensor) -> Tensor:
        out = torch.empty_like(x)
        _backend.call("gin_aggregate", x, in_rowptr, in_col, float(eps.detach()), out)
        ctx.save_for_backward(x, in_rowptr, in_col, out_rowptr, out_col, eps)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, in_rowptr, in_col, out_rowptr, out_col, eps = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = grad_eps = None
        if ctx.needs_input_grad[0]:
            if torch.is_grad_enabled():  # create_graph=True: the adjoint as a Function again (double backward)
                grad_x = _GINAggregate.apply(grad, out_rowptr, out_col, in_rowptr, in_col, eps)
            else:
                grad_x = torch.empty_like(grad)
                _backend.call("gin_aggregate", grad, out_rowptr, out_col, float(eps.detach()), grad_x)
        if ctx.needs_input_grad[5]:
            if torch.is_grad_enabled():  # create_graph=True: keep grad_eps differentiable
                grad_eps = (grad * x).sum().reshape(eps.shape)
            else:
                grad_eps = torch.full_like(eps, _backend.call("sum_product", grad, x))
        return grad_x, None, None, None, None, grad_eps


def gin_aggregate(x: Tensor, graph: GraphBatch, eps: Union[float, Tensor] = 0.0) -> Tensor:
    r"""GIN neighbourhood aggregation, fused in C++.

    .. math:: \text{out}_i = (1 + \epsilon)\, x_i + \sum_{j \to i} x_j

    summing over the edges ``j -> i`` of ``graph.edge_index`` (PyG's ``source_to_target``
    flow; multi-edges count with multiplicity). Backward: ``grad_x = (1 + eps) g + A^T g``
    over the cached outgoing-edge CSR and ``grad_eps = sum(g * x)``, both deterministic.
    The backward is itself differentiable (``create_graph=True``, double backward).

    Args:
        x: ``[N, F]`` or ``[R, N, F]`` float32/float64; ``R`` replicas (e.g. relabelings)
            share the graph structure.
        graph: a :class:`~rpfast.data.GraphBatch` with ``N`` nodes in total.
        eps: float or 0-d tensor (learnable if it requires grad).

    Returns:
        Tensor shaped like ``x``.
    """
    check_node_tensor(x, graph)
    eps_t = eps_tensor(eps, x.dtype)
    squeeze = x.dim() == 2
    x3 = (x.unsqueeze(0) if squeeze else x).contiguous()
    if torch.compiler.is_compiling():
        out = library.gin_aggregate(x3, *graph_csr(graph), eps_t)
    else:
        out = _GINAggregate.apply(x3, graph.t_rowptr, graph.t_col, graph.rowptr, graph.col, eps_t)
    return out.squeeze(0) if squeeze else out
