"""A whole GIN layer as one autograd node: aggregation, then linear -> BatchNorm -> ReLU stages.

For small graphs and widths (the RP paper's models) a GIN layer is a dozen tiny tensor
ops whose dispatch and autograd bookkeeping cost more than the arithmetic. Here the
forward runs the C++ aggregation and fused BatchNorm-ReLU kernels and the backward is
written out by hand, so a layer is one node in the autograd graph. That node is an eager
fast path (:func:`rpfast.ops._registry.eager_kernels`); elsewhere (other devices,
``RPFAST_BACKEND=torch``, compiled code) the layer composes the registered ops, one node each.
"""
from typing import List, Sequence, Union

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast.data import GraphBatch
from rpfast import _backend
from rpfast._validation import (
    check_real,
    eps_tensor,
    require_flag,
    require_float,
    require_tensor,
)
from rpfast.ops._registry import eager_kernels
from rpfast.ops.dense import linear_op, rows_product
from rpfast.ops.gin import gin_aggregate_op, graph_csr
from rpfast.ops.norm import bn_relu_backward, bn_relu_forward, bn_relu_forward_op, copy_statistics

__all__ = ["gin_mlp"]


class _GINMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, eps, in_rowptr, in_col, out_rowptr, out_col, stats, training, momenta, bn_eps, *params):
        # params = L - 1 weights, then L BatchNorm weights and L BatchNorm biases; the
        # affine parameters are inputs so autograd routes their gradients. ``stats`` holds
        # the L (running_mean, running_var) pairs, updated in place in training.
        L = len(stats)
        weights, gammas, betas = params[: L - 1], params[L - 1: 2 * L - 1], params[2 * L - 1:]
        M, H = z.shape[0] * z.shape[1], z.shape[2]
        if in_rowptr is None:  # the caller aggregated already (edge-feature messages)
            h = z.view(M, H)
        else:
            aggregated = torch.empty_like(z)
            _backend.call("gin_aggregate", z, in_rowptr, in_col, eps.detach(), aggregated)
            h = aggregated.view(M, H)
        saved: List[Tensor] = []
        for stage, (running_mean, running_var) in enumerate(stats):
            if stage:
                h = rows_product.run(h, weights[stage - 1].t())
            y, xhat, invstd = bn_relu_forward(h, gammas[stage].detach(), betas[stage].detach(), running_mean,
                                              running_var, training, momenta[stage], bn_eps[stage])
            saved += [y, xhat, invstd]
            h = y
        ctx.num_stages, ctx.training = L, training
        ctx.needs_eps = ctx.needs_input_grad[1] and in_rowptr is not None
        ctx.aggregates = in_rowptr is not None
        if not ctx.aggregates:
            out_rowptr = out_col = torch.empty(0, dtype=torch.int64)
        ctx.save_for_backward(z, eps, out_rowptr, out_col, *params, *saved)
        return h.view(z.shape[0], z.shape[1], h.shape[-1])

    @staticmethod
    @once_differentiable  # BatchNorm-ReLU's backward is C++: a second derivative raises a clear error
    def backward(ctx, grad):
        L = ctx.num_stages
        z, eps, out_rowptr, out_col, *rest = ctx.saved_tensors
        weights, gammas, saved = rest[: L - 1], rest[L - 1: 2 * L - 1], rest[3 * L - 1:]
        R, N = z.shape[0], z.shape[1]
        g = grad.reshape(R * N, grad.shape[-1]).contiguous()
        grad_weights: List[Tensor] = [None] * len(weights)
        grad_gammas: List[Tensor] = [None] * L
        grad_betas: List[Tensor] = [None] * L
        for stage in range(L - 1, -1, -1):
            y, xhat, invstd = saved[3 * stage: 3 * stage + 3]
            grad_pre, grad_gammas[stage], grad_betas[stage] = bn_relu_backward(
                g, y, xhat, gammas[stage].detach(), invstd, ctx.training)
            if stage:
                previous = saved[3 * (stage - 1)]
                grad_weights[stage - 1] = torch.empty_like(weights[stage - 1])
                _backend.call("matmul_tn", grad_pre, previous, grad_weights[stage - 1])
                g = rows_product.run(grad_pre, weights[stage - 1])
            else:
                g = grad_pre
        g = g.view(R, N, g.shape[-1])
        grad_eps = None
        if ctx.aggregates:
            grad_z = torch.empty_like(g)
            if ctx.needs_eps:  # grad_eps = sum(g * z), in the same pass over g
                grad_eps = torch.empty_like(eps)
                _backend.call("gin_aggregate_adjoint", g, out_rowptr, out_col, eps.detach(), z, grad_z,
                              grad_eps)
            else:
                _backend.call("gin_aggregate", g, out_rowptr, out_col, eps.detach(), grad_z)
        else:
            grad_z = g
            if ctx.needs_eps:
                grad_eps = torch.empty_like(eps)
                _backend.call("sum_product", g, z, grad_eps)
        return (grad_z, grad_eps, None, None, None, None, None, None, None, None,
                *grad_weights, *grad_gammas, *grad_betas)


Number = Union[float, int]


def gin_mlp(z: Tensor, graph: GraphBatch, eps, weights: Sequence[Tensor], bn_weights: Sequence[Tensor],
            bn_biases: Sequence[Tensor], running_means: Sequence[Tensor], running_vars: Sequence[Tensor],
            training: bool, momentum: Union[Number, Sequence[Number]] = 0.1,
            bn_eps: Union[Number, Sequence[Number]] = 1e-5, aggregate: bool = True) -> Tensor:
    r"""One GIN layer after its first linear map, as a single autograd node.

    .. math::
        a = (1 + \epsilon) z + A z, \quad h_1 = \mathrm{ReLU}(\mathrm{BN}_1(a)), \quad
        h_k = \mathrm{ReLU}(\mathrm{BN}_k(h_{k-1} W_k^\top)),\ k = 2..L

    with :math:`\mathrm{BN}_k` the batch normalisation of stage k over all ``R * N`` rows
    (:func:`rpfast.ops.batch_norm_relu` semantics). The op takes the BatchNorm state as
    tensors and numbers; the module that holds it keeps its own bookkeeping
    (``num_batches_tracked``). The statistics are this process's batch only: a layer whose
    norms synchronise across processes (``rpfast.nn.SyncBatchNorm``) runs its norm modules
    instead (:class:`rpfast.nn.GINLayer` does).

    Args:
        z: ``[R, N, H]`` the projected node states (first linear map already applied).
        graph: the :class:`~rpfast.data.GraphBatch` with ``N`` nodes.
        eps: a float or a one-element float tensor (learnable if it requires grad).
        weights: ``L - 1`` matrices ``[H, H]`` (bias-free: each is followed by BatchNorm).
        bn_weights, bn_biases: ``L`` affine tensors ``[H]`` each (gradients flow to them).
        running_means, running_vars: ``L`` statistics tensors ``[H]`` each, updated in place
            in training with ``momentum`` (as ``F.batch_norm``).
        training: batch statistics (and running-stat updates) or running statistics.
        momentum: the running-average factor of this call, one number or one per stage
            (a module with ``momentum=None`` passes ``1 / num_batches_tracked``).
        bn_eps: BatchNorm's variance epsilon, one number or one per stage.
        aggregate: False when ``z`` is already the aggregate ``a`` (GINE-style layers, whose
            edge-dependent messages are summed by the caller); ``eps`` is then unused.

    Returns ``[R, N, H]``. Gradients flow to ``z``, ``eps``, ``weights`` and the BatchNorm
    affine tensors; all reductions are deterministic.
    """
    require_tensor(z, "z")
    training = require_flag(training, "training")
    aggregate = require_flag(aggregate, "aggregate")
    require_float(z, "z")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if z.dim() != 3 or z.shape[1] != graph.total_nodes:
        raise ValueError(f"z must have shape [R, N={graph.total_nodes}, H], got {tuple(z.shape)}")
    H = z.shape[2]
    weights = list(weights)
    L = len(weights) + 1
    for i, w in enumerate(weights):
        if not isinstance(w, Tensor) or w.shape != (H, H) or w.dtype != z.dtype:
            raise ValueError(f"weights[{i}] must be a {z.dtype} tensor of shape ({H}, {H}), "
                             f"got {getattr(w, 'shape', type(w).__name__)}")
    state = {}
    for name, tensors in (("bn_weights", bn_weights), ("bn_biases", bn_biases),
                          ("running_means", running_means), ("running_vars", running_vars)):
        tensors = list(tensors)
        if len(tensors) != L:
            raise ValueError(f"{name} needs one tensor per stage: {L} expected ({len(weights)} weights + 1), "
                             f"got {len(tensors)}")
        for i, t in enumerate(tensors):
            require_tensor(t, f"{name}[{i}]")
            if t.shape != (H,) or t.dtype != z.dtype or not t.is_contiguous():
                raise ValueError(f"{name}[{i}] must be a contiguous {z.dtype} tensor of shape ({H},), "
                                 f"got {tuple(t.shape)} {t.dtype}")
        state[name] = tensors
    momenta = _per_stage(momentum, L, "momentum")
    bn_eps = _per_stage(bn_eps, L, "bn_eps")
    if training and z.shape[0] * z.shape[1] < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")
    z = z.contiguous()
    eps = eps_tensor(eps, z.dtype, z.device)
    stats = tuple(zip(state["running_means"], state["running_vars"]))
    params = [*weights, *state["bn_weights"], *state["bn_biases"]]
    if eager_kernels(z):
        csr = (graph.t_rowptr, graph.t_col, graph.rowptr, graph.col) if aggregate else (None,) * 4
        return _GINMLP.apply(z, eps, *csr, stats, training, momenta, bn_eps, *params)
    a = gin_aggregate_op(z, *graph_csr(graph), eps) if aggregate else z
    return _composed_stages(a, weights, state["bn_weights"], state["bn_biases"], stats, training, momenta, bn_eps)


def _composed_stages(a: Tensor, weights, gammas, betas, stats, training: bool, momenta, bn_eps) -> Tensor:
    """The MLP stages from registered ops, one autograd node each (any device, compiled code)."""
    R, N, H = a.shape
    h = a.reshape(R * N, H)
    for stage, (running_mean, running_var) in enumerate(stats):
        if stage:
            h = linear_op(h, weights[stage - 1], None)
        h, _, _, mean, var = bn_relu_forward_op(h, gammas[stage], betas[stage], running_mean, running_var, training,
                                                momenta[stage], bn_eps[stage])
        if training:
            copy_statistics(running_mean, running_var, mean, var)
    return h.view(R, N, h.shape[-1])


def _per_stage(value, stages: int, name: str) -> tuple:
    """A number for every stage: one number repeated, or a sequence of ``stages`` numbers."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * stages
    if len(values) != stages:
        raise ValueError(f"{name} needs one number or {stages} (one per stage), got {len(values)}")
    return tuple(check_real(v, f"{name}[{i}]" if isinstance(value, (list, tuple)) else name)
                 for i, v in enumerate(values))
