"""Fused BatchNorm + ReLU with a deterministic C++ forward and backward."""
import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast import _backend
from rpfast._validation import check_real, require_flag, require_float, require_kernel_device, require_tensor

__all__ = ["batch_norm_relu"]


def bn_relu_forward(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                    training: bool, momentum: float, eps: float):
    """The fused kernel on validated ``x [M, H]``: returns ``(y, xhat, invstd)``, the output,
    the normalised input and ``1 / sqrt(var + eps)`` (saved for the backward). Running
    statistics are updated in place in training."""
    y, xhat = torch.empty_like(x), torch.empty_like(x)
    invstd = x.new_empty(x.shape[1])
    _backend.call("batch_norm_relu_forward", x, weight, bias, running_mean, running_var, training, momentum, eps,
                  y, xhat, invstd)
    return y, xhat, invstd


def bn_relu_backward(grad: Tensor, y: Tensor, xhat: Tensor, weight: Tensor, invstd: Tensor, training: bool):
    """Gradients ``(grad_x [M, H], grad_weight [H], grad_bias [H])`` of the fused forward."""
    grad_x = torch.empty_like(grad)
    grad_w, grad_b = torch.empty_like(invstd), torch.empty_like(invstd)
    _backend.call("batch_norm_relu_backward", grad, y, xhat, weight, invstd, training, grad_x, grad_w, grad_b)
    return grad_x, grad_w, grad_b


class _BatchNormReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
        y, xhat, invstd = bn_relu_forward(x, weight, bias, running_mean, running_var, training, momentum, eps)
        ctx.save_for_backward(y, xhat, weight, invstd)
        ctx.training = training
        return y

    @staticmethod
    @once_differentiable  # a clear error, not a numpy() failure, on double backward
    def backward(ctx, grad):
        y, xhat, weight, invstd = ctx.saved_tensors
        grad_x, grad_w, grad_b = bn_relu_backward(grad.contiguous(), y, xhat, weight, invstd, ctx.training)
        return grad_x, grad_w, grad_b, None, None, None, None, None


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
    require_kernel_device(x, "x")
    require_float(x, "x")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension [..., H]")
    H = x.shape[-1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        require_tensor(t, name)
        if t.shape != (H,) or t.dtype != x.dtype or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous {x.dtype} tensor of shape ({H},), got {tuple(t.shape)} {t.dtype}")
    training = require_flag(training, "training")
    if momentum is None:
        raise ValueError("momentum=None (cumulative average) needs a batch counter the functional op does not "
                         "have; pass momentum=1 / num_batches_tracked (after incrementing it), as "
                         "torch.nn.BatchNorm1d does")
    momentum, eps = check_real(momentum, "momentum"), check_real(eps, "eps")
    rows = math.prod(x.shape[:-1])
    if training and rows < 2:
        raise ValueError("batch_norm_relu needs more than one value per channel in training mode")
    out = _BatchNormReLU.apply(x.reshape(rows, H).contiguous(), weight, bias, running_mean, running_var,
                               training, momentum, eps)
    return out.reshape(x.shape)
