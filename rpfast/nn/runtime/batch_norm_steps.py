"""The one rule for BatchNorm steps in rpfast's GIN code.

A training forward counts one step in every BatchNorm it runs (``num_batches_tracked += 1``,
:func:`count_batches`) *before* any kernel runs, and then hands the kernels the step's
momenta (:func:`step_momenta`): a module's ``momentum``, or for ``momentum=None`` (torch's
cumulative average) ``1 / num_batches_tracked`` as counted. Every GIN path follows it: the
layer-by-layer ops, the whole-network C++ call (which never counts), and compiled code, where
a cumulative momentum travels as NaN with its counter because a traced counter cannot be
read while tracing. The only other counter is a BatchNorm module running itself (the
``SyncBatchNorm`` of multi-process training), which counts as torch's modules do.
"""
from typing import List, Sequence

import torch
from torch import nn

from rpfast.ops._registry import compiling
from rpfast._validation import require_flag

__all__ = ["count_batches", "step_momenta", "batch_norm_arguments", "check_norms"]


def check_norms(norms: Sequence[nn.Module]) -> None:
    """TypeError unless every module is an affine BatchNorm with running statistics."""
    for i, bn in enumerate(norms):
        if not isinstance(bn, nn.modules.batchnorm._BatchNorm) or not bn.affine or not bn.track_running_stats:
            raise TypeError(f"norms[{i}] must be an affine BatchNorm module with running statistics "
                            f"(track_running_stats=True), got {bn!r}")


def count_batches(norms: Sequence[nn.Module]) -> None:
    """Add one to every BatchNorm module's ``num_batches_tracked`` (one fused op for all)."""
    counters = [bn.num_batches_tracked for bn in norms]
    if counters:
        torch._foreach_add_(counters, 1)


def step_momenta(norms: Sequence[nn.Module], training: bool, cumulative_as_nan: bool = False) -> List[float]:
    """This step's momentum per BatchNorm, after :func:`count_batches` counted it: 0 in eval
    mode; ``bn.momentum``; for ``momentum=None`` ``1 / num_batches_tracked``, or NaN with
    ``cumulative_as_nan`` (compiled code: the op reads the counter itself)."""
    if not training:
        return [0.0] * len(norms)
    if not cumulative_as_nan:
        _check_traceable(norms)
    return [float(bn.momentum) if bn.momentum is not None
            else float("nan") if cumulative_as_nan else 1.0 / float(bn.num_batches_tracked) for bn in norms]


def _check_traceable(norms: Sequence[nn.Module]) -> None:
    if compiling() and any(bn.momentum is None for bn in norms):
        # 1 / num_batches_tracked would be read from a traced counter (a data-dependent float)
        raise NotImplementedError("torch.compile supports BatchNorm momentum=None (a cumulative average) in the "
                                  "whole-network GIN (widths <= 64) only; give the BatchNorm a momentum, or train "
                                  "this model eagerly")


def batch_norm_arguments(norms: Sequence[nn.Module], training: bool, count: bool = True) -> dict:
    """:func:`rpfast.ops.gin_mlp`'s BatchNorm arguments (``bn_weights``, ``bn_biases``,
    ``running_means``, ``running_vars``, ``momentum``, ``bn_eps``) from ``L`` BatchNorm modules,
    the step counted first (unless ``count=False``: the caller counted already). Accepts
    ``BatchNorm1d`` and the ``SyncBatchNorm`` that replaces it in multi-process training."""
    training = require_flag(training, "training")
    norms = list(norms)
    check_norms(norms)
    if training:
        _check_traceable(norms)  # before counting: a refused step counts nothing
    if training and count:
        count_batches(norms)
    return {"bn_weights": [bn.weight for bn in norms], "bn_biases": [bn.bias for bn in norms],
            "running_means": [bn.running_mean for bn in norms], "running_vars": [bn.running_var for bn in norms],
            "momentum": step_momenta(norms, training), "bn_eps": [float(bn.eps) for bn in norms]}
