"""Fused BatchNorm + ReLU with a deterministic C++ forward and backward.

Registered ops (:mod:`rpfast.ops._registry`): ``batch_norm_relu`` (functional: it returns the
updated running statistics, which the caller copies into the buffers) and its backward
``batch_norm_relu_backward``, not itself differentiable. C++ on the CPU; elsewhere
``torch.native_batch_norm`` (torch's statistics and running-average update), the ReLU, and
torch's batch-norm backward. The CUDA kernels of csrc/cuda/norm.cu (two launches each way) are
built and callable (the kernel functions below take CUDA tensors) but not yet declared for
the ops: that is one entry each, ``"cuda": _forward_kernel`` and ``"cuda": _backward_kernel``,
once ``scripts/gpu_check.sh`` has compared them with the CPU on a GPU.
"""
import math

import torch
from torch import Tensor

from rpfast import _backend
from rpfast.ops._registry import declare
from rpfast._validation import check_real, require_flag, require_float, require_tensor

__all__ = ["batch_norm_relu"]


def _forward_kernel(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                    training: bool, momentum: float, eps: float):
    mean, var = running_mean.clone(), running_var.clone()  # functional: the caller copies them back
    y, xhat = torch.empty_like(x), torch.empty_like(x)
    invstd = x.new_empty(x.shape[1])
    scratch = (x.new_empty(x.shape[1]),) if x.is_cuda else ()  # the CUDA kernels' column means
    _backend.call("batch_norm_relu_forward", x, weight, bias, mean, var, training, momentum, eps, y, xhat, invstd,
                  *scratch)
    return y, xhat, invstd, mean, var


def _forward_composed(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                      training: bool, momentum: float, eps: float):
    """torch's own batch norm (its statistics, its running-average update, its output, NaN and
    infinities included), then the ReLU; ``xhat`` and ``invstd`` beside it for the backward."""
    new_mean, new_var = running_mean.clone(), running_var.clone()
    if x.shape[1] == 0:  # no channels: nothing to normalise (torch's batch norm refuses empty input)
        return x.clone(), x.clone(), x.new_empty(0), new_mean, new_var
    out, mean, invstd = torch.native_batch_norm(x, weight, bias, new_mean, new_var, training, momentum, eps)
    if not training:  # torch saves no statistics in evaluation
        mean, invstd = running_mean, 1 / torch.sqrt(running_var + eps)
    return torch.relu(out), (x - mean) * invstd, invstd, new_mean, new_var


def _forward_fake(x, weight, bias, running_mean, running_var, training, momentum, eps):
    return (torch.empty_like(x), torch.empty_like(x), x.new_empty(x.shape[1]), torch.empty_like(running_mean),
            torch.empty_like(running_var))


def _backward_kernel(grad: Tensor, y: Tensor, xhat: Tensor, weight: Tensor, invstd: Tensor, training: bool):
    grad_x = torch.empty_like(grad)
    grad_w, grad_b = torch.empty_like(invstd), torch.empty_like(invstd)
    scratch = (invstd.new_empty(2 * invstd.shape[0]),) if grad.is_cuda else ()  # the CUDA kernels' column means
    _backend.call("batch_norm_relu_backward", grad, y, xhat, weight, invstd, training, grad_x, grad_w,
                  grad_b, *scratch)
    return grad_x, grad_w, grad_b


def _backward_composed(grad: Tensor, y: Tensor, xhat: Tensor, weight: Tensor, invstd: Tensor, training: bool):
    """``g = 0 where y <= 0, else grad`` (torch's ReLU backward: a NaN output passes the
    gradient); ``grad_bias = sum g``, ``grad_weight = sum g xhat`` and
    ``grad_x = (g - mean(g) - xhat mean(g xhat)) invstd weight`` in training (the batch statistics
    depend on ``x``) or ``g invstd weight`` in evaluation.

    In training, torch's own batch-norm backward computes all three in one call (one launch on
    a GPU, not a dozen) when handed the normalised input ``xhat`` with mean 0 and inverse
    deviation 1, and ``invstd * weight`` as the weight: its formula is then this one, so
    non-finite values land where autograd through ``relu(F.batch_norm(...))`` puts them."""
    g = torch.where(y <= 0, 0, grad)
    if not training:
        return g * invstd * weight, (g * xhat).sum(0), g.sum(0)
    if g.numel() == 0:  # no rows or no channels: torch's CPU backward divides by zero (SIGFPE)
        return (g - g.mean(0) - xhat * (g * xhat).mean(0)) * invstd * weight, (g * xhat).sum(0), g.sum(0)
    zero, one = invstd.new_zeros(invstd.shape), invstd.new_ones(invstd.shape)
    return torch.ops.aten.native_batch_norm_backward(g, xhat, invstd * weight, None, None, zero, one, True, 0.0,
                                                     [True, True, True])


def _backward_fake(grad, y, xhat, weight, invstd, training):
    return torch.empty_like(grad), torch.empty_like(invstd), torch.empty_like(invstd)


def _setup(ctx, inputs, output):
    x, weight, bias, running_mean, running_var, training, momentum, eps = inputs
    y, xhat, invstd = output[:3]
    ctx.save_for_backward(y, xhat, weight, invstd)
    ctx.training = training


def _backward(ctx, grad, *unused):
    y, xhat, weight, invstd = ctx.saved_tensors
    grad_x, grad_w, grad_b = bn_relu_backward_op(grad.contiguous(), y, xhat, weight, invstd, ctx.training)
    return grad_x, grad_w, grad_b, None, None, None, None, None


bn_relu_forward_op = declare(
    "batch_norm_relu", "(Tensor x, Tensor weight, Tensor bias, Tensor running_mean, Tensor running_var, "
                       "bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    kernels={"cpu": _forward_kernel}, composed=_forward_composed, fake=_forward_fake, setup=_setup, backward=_backward,
    double_backward=False)
bn_relu_backward_op = declare(
    "batch_norm_relu_backward", "(Tensor grad, Tensor y, Tensor xhat, Tensor weight, Tensor invstd, bool training) "
                                "-> (Tensor, Tensor, Tensor)",
    kernels={"cpu": _backward_kernel}, composed=_backward_composed, fake=_backward_fake)


def bn_relu_forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                    training: bool, momentum: float, eps: float):
    """The op on validated ``x [M, H]`` without autograd: returns ``(y, xhat, invstd)``, the
    output, the normalised input and ``1 / sqrt(var + eps)`` (saved for a backward). Running
    statistics are updated in place in training."""
    y, xhat, invstd, mean, var = bn_relu_forward_op.run(x, weight, bias, running_mean, running_var, training,
                                                        momentum, eps)
    if training:
        copy_statistics(running_mean, running_var, mean, var)
    return y, xhat, invstd


def bn_relu_backward(grad: Tensor, y: Tensor, xhat: Tensor, weight: Tensor, invstd: Tensor, training: bool):
    """Gradients ``(grad_x [M, H], grad_weight [H], grad_bias [H])`` of :func:`bn_relu_forward`."""
    return bn_relu_backward_op.run(grad, y, xhat, weight, invstd, training)


def copy_statistics(running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor) -> None:
    """The op's updated statistics into the BatchNorm buffers (the op itself is functional)."""
    with torch.no_grad():
        running_mean.copy_(mean)
        running_var.copy_(var)


def batch_norm_relu(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                    training: bool, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    r"""``relu(batch_norm(x))`` over the last dimension of ``x [..., H]``, fused.

    .. math:: y = \max\big(0,\ \gamma\, (x - \mu) / \sqrt{\sigma^2 + \epsilon} + \beta\big)

    with :math:`\mu, \sigma^2` the batch statistics over all leading dimensions in training
    (running statistics updated in place with ``momentum``, as ``torch.nn.BatchNorm1d``)
    and the running statistics in eval. Same result as
    ``torch.relu(F.batch_norm(x.reshape(-1, H), running_mean, running_var, weight, bias,
    training, momentum, eps))``; reductions are deterministic for any thread count.

    ``momentum`` must be a number: like ``F.batch_norm`` (which raises ``TypeError``), the
    functional form has no batch counter for ``BatchNorm1d(momentum=None)``'s cumulative
    average, so ``None`` is a ``ValueError`` telling to pass ``1 / num_batches_tracked``.
    Not twice differentiable (double backward raises a ``RuntimeError``).
    """
    require_tensor(x, "x")
    require_float(x, "x")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension [..., H]")
    H = x.shape[-1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        require_tensor(t, name)
        if t.shape != (H,) or t.dtype != x.dtype or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous {x.dtype} tensor of shape ({H},), got {tuple(t.shape)} "
                             f"{t.dtype}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}; put them on one device")
    training = require_flag(training, "training")
    if momentum is None:
        raise ValueError("momentum=None (cumulative average) needs a batch counter the functional op does not "
                         "have; pass momentum=1 / num_batches_tracked (after incrementing it), as "
                         "torch.nn.BatchNorm1d does")
    momentum, eps = check_real(momentum, "momentum"), check_real(eps, "eps")
    rows = math.prod(x.shape[:-1])
    if training and rows < 2:
        raise ValueError("batch_norm_relu needs more than one value per channel in training mode")
    out, _, _, mean, var = bn_relu_forward_op(x.reshape(rows, H).contiguous(), weight, bias, running_mean,
                                              running_var, training, momentum, eps)
    if training:
        copy_statistics(running_mean, running_var, mean, var)
    return out.reshape(x.shape)
