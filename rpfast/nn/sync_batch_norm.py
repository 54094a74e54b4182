"""BatchNorm whose training statistics span every process of a ``torch.distributed`` group."""
import torch
import torch.distributed as dist
from torch import Tensor, nn

from rpfast.nn._unsupported import NotScriptable

__all__ = ["SyncBatchNorm", "convert_sync_batch_norm"]


class _AllReduceSum(torch.autograd.Function):
    """``y = sum over processes of x`` on every process; the gradient of a sum that every
    process uses is the sum of their gradients, so the backward is the same all-reduce."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        total = x.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total


class SyncBatchNorm(NotScriptable, nn.BatchNorm1d):
    r"""``BatchNorm1d`` over the union of all processes' batches, on CPU as on GPU
    (``torch.nn.SyncBatchNorm`` runs on GPUs only).

    In training inside an initialised process group, one differentiable all-reduce sums
    :math:`(\sum_i x_i, \sum_i x_i^2, n)` over the processes, so every process normalises with

    .. math:: \mu = \tfrac1n \textstyle\sum_i x_i,\qquad \sigma^2 = \tfrac1n \sum_i x_i^2 - \mu^2

    and gradients flow through the statistics as in a one-process BatchNorm on the whole
    global batch. Running statistics are updated as ``BatchNorm1d`` updates them (unbiased
    variance). Outside a group, or in eval mode, it is ``BatchNorm1d``.

    Shapes: ``x [M, C]``.
    """

    def forward(self, x: Tensor) -> Tensor:
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        if x.dim() != 2:
            raise ValueError(f"SyncBatchNorm takes [M, C], got {tuple(x.shape)}")
        C = x.shape[1]
        local = torch.cat([x.sum(0), (x * x).sum(0), x.new_tensor([float(x.shape[0])])])
        total = _AllReduceSum.apply(local)
        n = total[-1]
        if float(n.detach()) < 2:
            raise ValueError("SyncBatchNorm in training mode needs more than one value per channel in all")
        mean = total[:C] / n
        var = (total[C:2 * C] / n - mean * mean).clamp(min=0)
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            momentum = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
            self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
            count = n.detach()
            self.running_var.mul_(1 - momentum).add_(var.detach() * (count / (count - 1)), alpha=momentum)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


def convert_sync_batch_norm(module: nn.Module) -> nn.Module:
    """``module`` with every ``BatchNorm1d`` replaced by a :class:`SyncBatchNorm` holding the same
    parameters and statistics (in place; returns ``module``, or the replacement if it is one).
    Models with flat parameters (``GIN(flat_parameters=True)``) are refused before anything is
    converted: their BatchNorm parameters are views of one flat tensor that a new module cannot
    take over."""
    for name, child in module.named_modules():
        flat = getattr(child, "flat_parameters", False) is True
        if flat or (type(child) is nn.BatchNorm1d and child.affine and not isinstance(child.weight, nn.Parameter)):
            raise ValueError(f"convert_sync_batch_norm cannot convert {name or 'the module'}: it belongs to a model "
                             f"built with flat_parameters=True (its BatchNorm parameters are views of one flat "
                             f"tensor); build the model with flat_parameters=False to synchronise BatchNorm")
    return _convert(module)


def _convert(module: nn.Module) -> nn.Module:
    if type(module) is nn.BatchNorm1d:
        if not (module.affine and module.track_running_stats):
            raise ValueError("convert_sync_batch_norm needs affine BatchNorm1d with running statistics")
        sync = SyncBatchNorm(module.num_features, module.eps, module.momentum)
        sync.load_state_dict(module.state_dict())
        return sync.to(module.weight.dtype)
    for name, child in module.named_children():
        setattr(module, name, _convert(child))
    return module
