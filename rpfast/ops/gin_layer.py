"""A whole GIN layer as one autograd node: aggregation, then linear -> BatchNorm -> ReLU stages.

For small graphs and widths (the RP paper's models) a GIN layer is a dozen tiny tensor
ops whose dispatch and autograd bookkeeping cost more than the arithmetic. Here the
forward runs the C++ aggregation and fused BatchNorm-ReLU kernels (matrix products go to
torch's BLAS) and the backward is written out by hand, so a layer is one node in the
autograd graph.
"""
from typing import List, Sequence

import torch
from torch import Tensor, nn

from rpfast import _C
from rpfast.data import GraphBatch
from rpfast.ops._checks import eps_tensor, require_cpu, require_flag, require_float, require_tensor
from rpfast.ops._threads import kernel_threads

__all__ = ["gin_mlp"]


def _bn_relu_forward(x: Tensor, bn: nn.BatchNorm1d, training: bool, threads: int):
    y, xhat = torch.empty_like(x), torch.empty_like(x)
    invstd = x.new_empty(x.shape[1])
    if training:
        bn.num_batches_tracked.add_(1)
        momentum = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
    else:
        momentum = 0.0
    _C.batch_norm_relu_forward(x.numpy(), bn.weight.detach().numpy(), bn.bias.detach().numpy(),
                               bn.running_mean.numpy(), bn.running_var.numpy(), training, momentum,
                               bn.eps, y.numpy(), xhat.numpy(), invstd.numpy(), threads)
    return y, xhat, invstd


class _GINMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, eps, in_rowptr, in_col, out_rowptr, out_col, norms, training, *params):
        # params = L - 1 weights, then L BatchNorm weights and L BatchNorm biases; the
        # affine parameters are inputs so autograd routes their gradients.
        weights = params[: len(norms) - 1]
        threads = kernel_threads()
        M, H = z.shape[0] * z.shape[1], z.shape[2]
        aggregated = torch.empty_like(z)
        _C.gin_aggregate(z.numpy(), in_rowptr.numpy(), in_col.numpy(), float(eps), aggregated.numpy(), threads)
        h = aggregated.view(M, H)
        saved: List[Tensor] = []
        for stage, bn in enumerate(norms):
            if stage:
                h = h @ weights[stage - 1].detach().t()
            y, xhat, invstd = _bn_relu_forward(h, bn, training, threads)
            saved += [y, xhat, invstd]
            h = y
        ctx.norms, ctx.training = norms, training
        ctx.needs_eps = ctx.needs_input_grad[1]
        ctx.save_for_backward(z, eps, out_rowptr, out_col, *params, *saved)
        return h.view(z.shape[0], z.shape[1], h.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        threads = kernel_threads()
        norms = ctx.norms
        L = len(norms)
        z, eps, out_rowptr, out_col, *rest = ctx.saved_tensors
        weights, gammas, saved = rest[: L - 1], rest[L - 1: 2 * L - 1], rest[3 * L - 1:]
        R, N = z.shape[0], z.shape[1]
        g = grad.reshape(R * N, grad.shape[-1]).contiguous()
        grad_weights: List[Tensor] = [None] * len(weights)
        grad_gammas: List[Tensor] = [None] * L
        grad_betas: List[Tensor] = [None] * L
        for stage in range(len(norms) - 1, -1, -1):
            y, xhat, invstd = saved[3 * stage: 3 * stage + 3]
            grad_pre = torch.empty_like(g)
            grad_gammas[stage], grad_betas[stage] = torch.empty_like(invstd), torch.empty_like(invstd)
            _C.batch_norm_relu_backward(g.numpy(), y.numpy(), xhat.numpy(), gammas[stage].detach().numpy(),
                                        invstd.numpy(), ctx.training, grad_pre.numpy(),
                                        grad_gammas[stage].numpy(), grad_betas[stage].numpy(), threads)
            if stage:
                previous = saved[3 * (stage - 1)]
                grad_weights[stage - 1] = torch.empty_like(weights[stage - 1])
                _C.matmul_tn(grad_pre.numpy(), previous.numpy(), grad_weights[stage - 1].numpy(), threads)
                g = grad_pre @ weights[stage - 1].detach()
            else:
                g = grad_pre
        g = g.view(R, N, g.shape[-1])
        grad_z = torch.empty_like(g)
        _C.gin_aggregate(g.numpy(), out_rowptr.numpy(), out_col.numpy(), float(eps), grad_z.numpy(), threads)
        grad_eps = None
        if ctx.needs_eps:
            grad_eps = torch.full_like(eps, _C.sum_product(g.numpy(), z.numpy(), threads))
        return (grad_z, grad_eps, None, None, None, None, None, None, *grad_weights, *grad_gammas, *grad_betas)


def gin_mlp(z: Tensor, graph: GraphBatch, eps: Tensor, weights: Sequence[Tensor],
            norms: Sequence[nn.BatchNorm1d], training: bool) -> Tensor:
    r"""One GIN layer after its first linear map, as a single autograd node.

    .. math::
        a = (1 + \epsilon) z + A z, \quad h_1 = \mathrm{ReLU}(\mathrm{BN}_1(a)), \quad
        h_k = \mathrm{ReLU}(\mathrm{BN}_k(h_{k-1} W_k^\top)),\ k = 2..L

    Args:
        z: ``[R, N, H]`` the projected node states (first linear map already applied).
        graph: the :class:`~rpfast.data.GraphBatch` with ``N`` nodes.
        eps: a float or a one-element float tensor (learnable if it requires grad).
        weights: ``L - 1`` matrices ``[H, H]`` (bias-free: each is followed by BatchNorm).
        norms: ``L`` ``BatchNorm1d(H)`` modules (statistics over all ``R * N`` rows).
        training: batch statistics (and running-stat updates) or running statistics.

    Returns ``[R, N, H]``. Gradients flow to ``z``, ``eps``, ``weights`` and the BatchNorm
    affine parameters; all reductions are deterministic.
    """
    require_tensor(z, "z")
    training = require_flag(training, "training")
    require_cpu(z, "z")
    require_float(z, "z")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if len(norms) != len(weights) + 1:
        raise ValueError(f"need one BatchNorm per stage: {len(weights) + 1} expected, got {len(norms)}")
    if z.dim() != 3 or z.shape[1] != graph.total_nodes:
        raise ValueError(f"z must have shape [R, N={graph.total_nodes}, H], got {tuple(z.shape)}")
    H = z.shape[2]
    for i, w in enumerate(weights):
        if not isinstance(w, Tensor) or w.shape != (H, H) or w.dtype != z.dtype:
            raise ValueError(f"weights[{i}] must be a {z.dtype} tensor of shape ({H}, {H}), "
                             f"got {getattr(w, 'shape', type(w).__name__)}")
    for i, bn in enumerate(norms):
        if not isinstance(bn, nn.BatchNorm1d) or bn.num_features != H or bn.weight is None or bn.weight.dtype != z.dtype:
            raise ValueError(f"norms[{i}] must be a {z.dtype} BatchNorm1d({H}) with affine=True")
    if training and z.shape[0] * z.shape[1] < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")
    z = z.contiguous()
    eps = eps_tensor(eps, z.dtype)
    if not all(bn.track_running_stats for bn in norms):
        raise ValueError("gin_mlp needs BatchNorm1d modules with track_running_stats=True")
    params = [*weights, *(bn.weight for bn in norms), *(bn.bias for bn in norms)]
    return _GINMLP.apply(z, eps, graph.t_rowptr, graph.t_col, graph.rowptr, graph.col, tuple(norms),
                         bool(training), *params)
