"""Batched GIN aggregation: (1 + eps) * x + A x over a GraphBatch's cached CSR.

Registered ops (:mod:`rpfast.ops._registry`):

* ``gin_aggregate(x [R, N, F], in_rowptr, in_col, out_rowptr, out_col, eps) -> [R, N, F]``, linear
  in ``x``, so its backward is the same op over the transpose CSR, and ``grad_eps = sum(g * x)``;
* ``gin_aggregate_backward``: both gradients in one pass over ``g`` (the kernel's fused adjoint),
  used when the backward itself needs no graph;
* ``sum_product(a, b) = sum(a * b)``;
* ``csr(edge_index, num_nodes)``: the CSRs of an ``edge_index``, for compiled code (a batch's
  lazily cached CSR cannot be traced); built by the CPU algorithm of
  :class:`~rpfast.data.GraphBatch` on CPU tensors.

C++ kernels on the CPU; elsewhere a gather of the source rows and ``torch.segment_reduce`` over
the CSR rows (deterministic: no atomics).
"""
import functools
from typing import List, Tuple, Union

import torch
from torch import Tensor

from rpfast import _backend
from rpfast.data import GraphBatch
from rpfast.data.cache import graph_for_edge_index
from rpfast.ops._registry import compiling, declare
from rpfast.ops.segment import check_node_tensor
from rpfast._validation import eps_tensor

__all__ = ["gin_aggregate", "graph_csr"]


# ------------------------------------------------------------------ the aggregation
def _aggregate_kernel(x: Tensor, rowptr: Tensor, col: Tensor, other_rowptr: Tensor, other_col: Tensor,
                      eps: Tensor) -> Tensor:
    out = torch.empty_like(x)
    _backend.call("gin_aggregate", x, rowptr, col, eps, out)
    return out


def _neighbour_sum(x: Tensor, rowptr: Tensor, col: Tensor) -> Tensor:
    """``sum_{j in row i} x[:, j]`` for ``x [R, N, F]``: a gather, then one segment sum."""
    R, N, F = x.shape
    rows = x.transpose(0, 1).reshape(N, R * F)
    summed = torch.segment_reduce(rows.index_select(0, col), "sum", offsets=rowptr, axis=0)
    return summed.view(N, R, F).transpose(0, 1)


def _aggregate_composed(x: Tensor, rowptr: Tensor, col: Tensor, other_rowptr: Tensor, other_col: Tensor,
                        eps: Tensor) -> Tensor:
    x3 = x.unsqueeze(0) if x.dim() == 2 else x
    return ((1 + eps) * x + _neighbour_sum(x3, rowptr, col).view(x.shape)).contiguous()


def _aggregate_fake(x, rowptr, col, other_rowptr, other_col, eps):
    return torch.empty_like(x)


def _aggregate_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _aggregate_backward(ctx, grad):
    x, in_rowptr, in_col, out_rowptr, out_col, eps = ctx.saved_tensors
    need_x, need_eps = ctx.needs_input_grad[0], ctx.needs_input_grad[5]
    grad = grad.contiguous()
    if torch.is_grad_enabled():  # create_graph=True: gradients built from differentiable ops
        grad_x = gin_aggregate_op(grad, out_rowptr, out_col, in_rowptr, in_col, eps) if need_x else None
        grad_eps = sum_product_op(grad, x).reshape(eps.shape) if need_eps else None
        return grad_x, None, None, None, None, grad_eps
    grad_x, grad_eps = gin_aggregate_backward_op(grad, x, out_rowptr, out_col, eps, need_eps)
    return (grad_x if need_x else None), None, None, None, None, (grad_eps if need_eps else None)


def _backward_kernel(grad: Tensor, x: Tensor, rowptr: Tensor, col: Tensor, eps: Tensor,
                     with_eps: bool) -> Tuple[Tensor, Tensor]:
    grad_x = torch.empty_like(grad)
    if not with_eps:
        _backend.call("gin_aggregate", grad, rowptr, col, eps, grad_x)
        return grad_x, torch.zeros_like(eps)
    grad_eps = torch.empty_like(eps)
    _backend.call("gin_aggregate_adjoint", grad, rowptr, col, eps, x, grad_x, grad_eps)
    return grad_x, grad_eps


def _backward_composed(grad: Tensor, x: Tensor, rowptr: Tensor, col: Tensor, eps: Tensor,
                       with_eps: bool) -> Tuple[Tensor, Tensor]:
    grad_x = _aggregate_composed(grad, rowptr, col, rowptr, col, eps)
    grad_eps = (grad * x).sum().reshape(eps.shape) if with_eps else torch.zeros_like(eps)
    return grad_x, grad_eps


def _backward_cuda(grad: Tensor, x: Tensor, rowptr: Tensor, col: Tensor, eps: Tensor, with_eps: bool):
    """The aggregation over the transpose CSR; ``grad_eps = sum(grad * x)`` by torch's (deterministic) sum."""
    grad_x = torch.empty_like(grad)
    _backend.call("gin_aggregate", grad, rowptr, col, eps, grad_x)
    return grad_x, ((grad * x).sum().reshape(eps.shape).to(eps.dtype) if with_eps else torch.zeros_like(eps))


def _backward_fake(grad, x, rowptr, col, eps, with_eps):
    return torch.empty_like(grad), torch.empty_like(eps)


def _sum_product_kernel(a: Tensor, b: Tensor) -> Tensor:
    out = a.new_empty(())
    _backend.call("sum_product", a.contiguous(), b.contiguous(), out)
    return out


def _sum_product_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _sum_product_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * b, grad * a


gin_aggregate_op = declare(
    "gin_aggregate", "(Tensor x, Tensor in_rowptr, Tensor in_col, Tensor out_rowptr, Tensor out_col, Tensor eps) "
                     "-> Tensor",
    kernels={"cpu": _aggregate_kernel, "cuda": _aggregate_kernel}, composed=_aggregate_composed,
    fake=_aggregate_fake, setup=_aggregate_setup,
    backward=_aggregate_backward)
gin_aggregate_backward_op = declare(
    "gin_aggregate_backward", "(Tensor grad, Tensor x, Tensor rowptr, Tensor col, Tensor eps, bool with_eps) "
                              "-> (Tensor, Tensor)",
    kernels={"cpu": _backward_kernel, "cuda": _backward_cuda}, composed=_backward_composed, fake=_backward_fake)
sum_product_op = declare(
    "sum_product", "(Tensor a, Tensor b) -> Tensor",
    kernels={"cpu": _sum_product_kernel}, composed=lambda a, b: (a * b).sum(), fake=lambda a, b: a.new_empty(()),
    setup=_sum_product_setup, backward=_sum_product_backward)


# ------------------------------------------------------------------ the CSR of an edge_index
def _csr_impl(edge_index: Tensor, num_nodes: int) -> List[Tensor]:
    graph = graph_for_edge_index(edge_index, num_nodes)  # built once per edge_index
    return [graph.t_rowptr.clone(), graph.t_col.clone(), graph.rowptr.clone(), graph.col.clone()]


def _csr_fake(edge_index, num_nodes):
    E = edge_index.shape[1]
    new = edge_index.new_empty
    return [new((num_nodes + 1,)), new((E,)), new((num_nodes + 1,)), new((E,))]


csr_op = declare("csr", "(Tensor edge_index, SymInt num_nodes) -> Tensor[]",
                 kernels={"cpu": _csr_impl}, composed=_csr_impl, fake=_csr_fake)


def graph_csr(graph: GraphBatch) -> tuple:
    """``(in_rowptr, in_col, out_rowptr, out_col)`` of a batch: its cached CSRs in eager mode; in
    compiled code the ``csr`` op builds them."""
    if compiling():
        return tuple(csr_op(graph.edge_index, graph.total_nodes))
    return graph.t_rowptr, graph.t_col, graph.rowptr, graph.col


def gin_aggregate(x: Tensor, graph: GraphBatch, eps: Union[float, Tensor] = 0.0) -> Tensor:
    r"""GIN neighbourhood aggregation.

    .. math:: \text{out}_i = (1 + \epsilon)\, x_i + \sum_{j \to i} x_j

    summing over the edges ``j -> i`` of ``graph.edge_index`` (PyG's ``source_to_target``
    flow; multi-edges count with multiplicity). Backward: ``grad_x = (1 + eps) g + A^T g``
    over the cached outgoing-edge CSR and ``grad_eps = sum(g * x)``, both deterministic.
    The backward is itself differentiable (``create_graph=True``, double backward).
    C++ on the CPU (one fused pass each way); elsewhere a gather and ``torch.segment_reduce``.

    Args:
        x: ``[N, F]`` or ``[R, N, F]`` float32/float64 on the graph's device; ``R`` replicas
            (e.g. relabelings) share the graph structure.
        graph: a :class:`~rpfast.data.GraphBatch` with ``N`` nodes in total.
        eps: float or 0-d tensor (learnable if it requires grad).

    Returns:
        Tensor shaped like ``x``.
    """
    check_node_tensor(x, graph)
    eps_t = _eps_constant(eps, x.dtype, x.device) if type(eps) in (float, int) and not compiling() else \
        eps_tensor(eps, x.dtype, x.device)
    return gin_aggregate_op(x.contiguous(), *graph_csr(graph), eps_t)


@functools.lru_cache(maxsize=64)
def _eps_constant(eps, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A number's eps as a 0-d tensor, made once per (value, dtype, device): ``torch.tensor``
    costs more than the aggregation itself on a small graph. Ops never write their inputs."""
    return eps_tensor(eps, dtype, device)
