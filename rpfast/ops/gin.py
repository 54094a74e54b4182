"""Batched GIN aggregation: (1 + eps) * x + A x over a GraphBatch's cached CSR."""
from typing import Union

import torch
from torch import Tensor

from rpfast import _backend
from rpfast.ops import library
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


_CPU_KERNELS = {name: _backend.cpu_kernel(name) for name in ("gin_aggregate", "gin_aggregate_adjoint")}


def _run(kernel: str, source: Tensor, csr: tuple, eps: float, *tensors: Tensor):
    """``kernel(source, rowptr, col, eps, *tensors)`` over a batch's prepared CSR buffers. On
    the CPU it calls the kernel itself: :func:`_backend.call`'s per-argument scan costs ~5 us,
    twice per GINConv step (``source`` and ``tensors`` are contiguous and on its device)."""
    if source.is_cpu and csr[0].is_cpu:
        return _CPU_KERNELS[kernel](source.detach().numpy(), csr[0].value, csr[1].value, eps,
                                    *[t.detach().numpy() for t in tensors], threads=_backend.num_threads())
    return _backend.call(kernel, source, *csr, eps, *tensors)


class _GINAggregate(torch.autograd.Function):
    """``out = (1 + eps) x + A x`` for a contiguous ``x [N, F]`` or ``[R, N, F]``, with ``A`` the
    batch's incoming-edge CSR, or with ``adjoint`` its transpose (the outgoing-edge CSR).

    An autograd.Function rather than a torch.library custom op: on molecule-sized graphs
    the custom-op dispatch (~20 us a call, forward and backward) costs as much as the kernel.
    The graph is passed as an object, not as four CSR tensors, which autograd would check one
    by one on every call. The op is linear in ``x``, so its backward is the same op over the
    other CSR (``(1 + eps) g + A^T g``); the kernel computes ``grad_eps = sum(g * x)`` in the
    same pass over ``g``. Under ``create_graph=True`` the backward is built from differentiable
    ops (this Function again, and a product-sum), so double backward works.
    """

    @staticmethod
    def forward(ctx, x: Tensor, eps: Tensor, graph: GraphBatch, adjoint: bool) -> Tensor:
        out = torch.empty_like(x)
        _run("gin_aggregate", x, graph.kernel_csr(incoming=not adjoint), float(eps), out)
        ctx.save_for_backward(x, eps)
        ctx.graph, ctx.adjoint = graph, adjoint
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, eps = ctx.saved_tensors
        grad = grad.contiguous()
        need_x, need_eps = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if torch.is_grad_enabled():  # create_graph=True: differentiable gradients (double backward)
            grad_x = _GINAggregate.apply(grad, eps, ctx.graph, not ctx.adjoint) if need_x else None
            grad_eps = (grad * x).sum().reshape(eps.shape) if need_eps else None
            return grad_x, grad_eps, None, None
        adjoint_csr = ctx.graph.kernel_csr(incoming=ctx.adjoint)
        grad_x = torch.empty_like(grad)
        if not need_eps:
            _run("gin_aggregate", grad, adjoint_csr, float(eps), grad_x)
            return grad_x, None, None, None
        grad_eps = _run("gin_aggregate_adjoint", grad, adjoint_csr, float(eps), x, grad_x)
        return (grad_x if need_x else None), torch.full_like(eps, grad_eps), None, None


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
    x = x.contiguous()
    if torch.compiler.is_compiling():
        squeeze = x.dim() == 2
        out = library.gin_aggregate(x.unsqueeze(0) if squeeze else x, *graph_csr(graph), eps_t)
        return out.squeeze(0) if squeeze else out
    return _GINAggregate.apply(x, eps_t, graph, False)
