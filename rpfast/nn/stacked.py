r"""Many small models trained as one: the parameters of ``P`` modules of one architecture stacked
along a leading axis, and their forward as batched products.

A :class:`StackedLinear` built from ``P`` ``nn.Linear`` maps ``x [P, m, in]`` to
``y[p] = x[p] W_p^T + b_p`` (``[P, m, out]``, one ``baddbmm``); :class:`StackedBatchNorm1d`
normalises each replica's ``m`` rows with its own batch statistics (training) or its own running
ones (eval), exactly as ``P`` separate ``nn.BatchNorm1d`` would. Replicas never mix: the gradient
of replica ``p``'s loss reaches only row ``p`` of each stacked parameter, and an element-wise
optimizer (Adam) updates each replica as it would alone. Every module takes ``part``, a slice of
the replicas, so a stack too large for one pass runs in chunks of replicas.

:func:`stack_modules` stacks ``Linear``, ``BatchNorm1d``, the parameter-free activations
(``ReLU``, ``Tanh``) and ``Sequential`` containers of them.
"""
from typing import List, Sequence

import torch
from torch import Tensor, nn

__all__ = ["StackedLinear", "StackedBatchNorm1d", "StackedSequential", "stack_modules", "ALL"]

#: ``part`` for every replica
ALL = slice(None)


def _same_type(modules: Sequence[nn.Module], kind: type) -> None:
    if not modules:
        raise ValueError("a stack needs at least one module")
    if not all(type(m) is kind for m in modules):
        raise TypeError(f"a stack holds modules of one type: got {sorted({type(m).__name__ for m in modules})}")


def _check_rows(x: Tensor, replicas: int, width: int, owner: str) -> None:
    if x.dim() != 3 or x.shape[0] != replicas or x.shape[2] != width:
        raise ValueError(f"{owner} takes x [P={replicas}, m, {width}], got {tuple(x.shape)}")


class StackedLinear(nn.Module):
    """``P`` linear maps: ``weight [P, out, in]``, ``bias [P, out]``; ``forward(x [p, m, in],
    part)`` -> ``[p, m, out]`` for the replicas ``part`` selects."""

    def __init__(self, layers: Sequence[nn.Linear]):
        super().__init__()
        _same_type(layers, nn.Linear)
        shapes = {tuple(layer.weight.shape) for layer in layers}
        if len(shapes) != 1 or any(layer.bias is None for layer in layers):
            raise ValueError(f"stacked linear maps need one shape and a bias each, got shapes {sorted(shapes)}")
        self.weight = nn.Parameter(torch.stack([layer.weight.detach() for layer in layers]).clone(),
                                   requires_grad=layers[0].weight.requires_grad)
        self.bias = nn.Parameter(torch.stack([layer.bias.detach() for layer in layers]).clone(),
                                 requires_grad=layers[0].bias.requires_grad)

    def forward(self, x: Tensor, part: slice = ALL) -> Tensor:
        weight, bias = self.weight[part], self.bias[part]
        _check_rows(x, weight.shape[0], weight.shape[2], "StackedLinear")
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class StackedBatchNorm1d(nn.Module):
    r"""``P`` batch norms over ``[p, m, C]``: in training, each replica's rows normalised by their
    own mean and (biased) variance, its running statistics moved by ``momentum`` towards them
    (the unbiased variance, as torch does); in eval mode, by its running statistics."""

    def __init__(self, norms: Sequence[nn.BatchNorm1d]):
        super().__init__()
        _same_type(norms, nn.BatchNorm1d)
        first = norms[0]
        if first.momentum is None or any((n.num_features, n.eps, n.momentum, n.affine, n.track_running_stats) !=
                                         (first.num_features, first.eps, first.momentum, True, True) for n in norms):
            raise ValueError("stacked batch norms need one shape, eps and momentum (a number), affine, with running "
                             "statistics")
        self.eps, self.momentum = first.eps, first.momentum
        self.weight = nn.Parameter(torch.stack([n.weight.detach() for n in norms]).clone())
        self.bias = nn.Parameter(torch.stack([n.bias.detach() for n in norms]).clone())
        self.register_buffer("running_mean", torch.stack([n.running_mean for n in norms]).clone())
        self.register_buffer("running_var", torch.stack([n.running_var for n in norms]).clone())

    def forward(self, x: Tensor, part: slice = ALL) -> Tensor:
        weight, bias = self.weight[part], self.bias[part]
        _check_rows(x, weight.shape[0], weight.shape[1], "StackedBatchNorm1d")
        if self.training:
            rows = x.shape[1]
            if rows < 2:
                raise ValueError("StackedBatchNorm1d in training needs at least two rows per replica")
            mean = x.mean(dim=1, keepdim=True)
            variance = x.var(dim=1, unbiased=False, keepdim=True)
            with torch.no_grad():
                running_mean, running_var = self.running_mean[part], self.running_var[part]
                running_mean.lerp_(mean.squeeze(1), self.momentum)
                running_var.lerp_(variance.squeeze(1) * (rows / (rows - 1)), self.momentum)
        else:
            mean, variance = self.running_mean[part].unsqueeze(1), self.running_var[part].unsqueeze(1)
        return (x - mean) * torch.rsqrt(variance + self.eps) * weight.unsqueeze(1) + bias.unsqueeze(1)


class StackedSequential(nn.Module):
    """Stacked layers applied in order, each with the same ``part``."""

    def __init__(self, layers: List[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, part: slice = ALL) -> Tensor:
        for layer in self.layers:
            stacked = isinstance(layer, (StackedLinear, StackedBatchNorm1d, StackedSequential))
            x = layer(x, part) if stacked else layer(x)
        return x


def stack_modules(modules: Sequence[nn.Module]) -> nn.Module:
    """The stack of ``modules``, ``P`` modules of one architecture (their parameters copied):
    ``Linear`` -> :class:`StackedLinear`, ``BatchNorm1d`` -> :class:`StackedBatchNorm1d`,
    ``Sequential`` -> :class:`StackedSequential` of its stacked layers; ``ReLU`` and ``Tanh``
    as they are. A TypeError names any other module."""
    if not modules:
        raise ValueError("a stack needs at least one module")
    kind = type(modules[0])
    _same_type(modules, kind)
    if kind is nn.Linear:
        return StackedLinear(modules)
    if kind is nn.BatchNorm1d:
        return StackedBatchNorm1d(modules)
    if kind in (nn.ReLU, nn.Tanh):
        return kind()
    if kind is nn.Sequential:
        lengths = {len(m) for m in modules}
        if len(lengths) != 1:
            raise ValueError(f"stacked Sequentials need one length, got {sorted(lengths)}")
        return StackedSequential([stack_modules([m[i] for m in modules]) for i in range(len(modules[0]))])
    raise TypeError(f"stack_modules stacks Linear, BatchNorm1d, ReLU, Tanh and Sequential, got {kind.__name__}")
