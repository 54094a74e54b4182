"""The one training loop of the experiments: :func:`fit` trains a model for some epochs on
shuffled (in a process group: sharded) mini-batches, optionally selects the epoch with the
best validation metric, and returns the history."""
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, List, Optional

import torch
from torch import Tensor, nn

from rpfast.experiments.batches import Batches
from rpfast.experiments.distributed import Context, current, prepare

__all__ = ["Batches", "Epoch", "FitResult", "adam", "fit"]

LossFn = Callable[[nn.Module, Any], Tensor]
MetricFn = Callable[[nn.Module], Optional[float]]


def adam(parameters: Iterable[Tensor], lr: float) -> torch.optim.Adam:
    """Adam with torch's fused kernel when this torch has it for the parameters' device (one
    call updates every tensor; the per-tensor loop costs more than a small GIN's step)."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - torch without fused CPU Adam
        return torch.optim.Adam(parameters, lr=lr)


@dataclass(frozen=True)
class Epoch:
    """What :func:`fit`'s ``on_epoch`` callback sees after each epoch (numbered from 0)."""

    index: int
    loss: float  # mean training loss over the epoch's examples (over all processes)
    metric: Optional[float]  # the validation metric; None without one or where it is undefined
    seconds: float  # the training pass (order, steps, loss reduction), without the metric


@dataclass
class FitResult:
    """:func:`fit`'s outcome: ``model`` (unwrapped from DDP; SyncBatchNorm-converted with
    ``sync_bn``) holds the state of ``best_epoch``; the histories have one entry per epoch
    (``metrics`` stays empty without a metric)."""

    model: nn.Module
    losses: List[float] = field(default_factory=list)
    metrics: List[Optional[float]] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    best_epoch: int = -1
    best_metric: Optional[float] = None

    @property
    def final_loss(self) -> float:
        """The last epoch's mean training loss."""
        return self.losses[-1]


def fit(model: nn.Module, batches: Batches, loss: LossFn, *, epochs: int,
        optimizer: Callable[[List[nn.Parameter]], torch.optim.Optimizer],
        schedule: Optional[Callable[[torch.optim.Optimizer], Any]] = None,
        metric: Optional[MetricFn] = None, context: Optional[Context] = None, sync_bn: bool = False,
        find_unused_parameters: bool = False, on_epoch: Optional[Callable[[Epoch], None]] = None,
        maximize: bool = True) -> FitResult:
    """Train ``model`` for ``epochs`` epochs; returns a :class:`FitResult`.

    * ``batches``: the training examples and how an epoch orders and batches them
      (:class:`~rpfast.experiments.batches.Batches`: shuffled per epoch; sharded across the
      processes of a group; a single full batch can keep its order so it can be cached).
    * ``loss(module, batch)``: the scalar loss of one batch (``batch`` is what
      ``batches.make`` returns), called with the module that trains (``DistributedDataParallel``
      in a process group), so it decides how the model is called.
    * ``optimizer(parameters)`` builds the optimizer and ``schedule(optimizer)`` (optional) a
      learning-rate schedule stepped once after every epoch; both after the model is prepared
      (``optimizer`` may return one built before, to carry its state across calls).
    * ``metric(model)`` (optional): a validation score of the unwrapped model after each epoch,
      higher is better (lower with ``maximize=False``, an error such as RMSE), None where
      undefined. The epoch with the best score is selected and
      its state restored at the end; an undefined score replaces the selection (and a defined
      one replaces an undefined one), so with no defined score the last epoch is kept. Every
      process computes its own score: what the command reports comes from rank 0. Without a
      metric the last epoch is kept.
    * ``context`` (default: :func:`~rpfast.experiments.distributed.current`): in a process
      group the model is prepared once by :func:`~rpfast.experiments.distributed.prepare`
      (``sync_bn``: SyncBatchNorm; ``find_unused_parameters`` for DDP) and each epoch's mean
      loss is averaged over the processes.
    * ``on_epoch(epoch)`` (optional): called after each epoch with its :class:`Epoch` (a
      progress bar's hook).

    Each step is ``zero_grad``, ``backward``, ``step``; random numbers are drawn in this order:
    an epoch's order (``batches.generator``), the steps (the model's own generators), the metric.
    """
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if isinstance(optimizer, torch.optim.Optimizer) or not callable(optimizer):
        raise TypeError(f"optimizer must be a function of the parameters that builds the optimizer "
                        f"(lambda parameters: torch.optim.Adam(parameters, lr)), got {type(optimizer).__name__}")
    context = context if context is not None else current()
    model, trained = prepare(model, context, sync_bn=sync_bn, find_unused_parameters=find_unused_parameters)
    optimizer = optimizer(list(model.parameters()))
    schedule = schedule(optimizer) if schedule is not None else None
    result, best_state = FitResult(model), None
    for index in range(epochs):
        start = time.perf_counter()
        mean_loss = _train_epoch(trained, batches, loss, optimizer, index, context)
        result.seconds.append(time.perf_counter() - start)
        result.losses.append(mean_loss)
        if schedule is not None:
            schedule.step()
        score = None
        if metric is not None:
            score = metric(model)
            result.metrics.append(score)
            better = score is not None and result.best_metric is not None and (
                score > result.best_metric if maximize else score < result.best_metric)
            if best_state is None or score is None or result.best_metric is None or better:
                result.best_epoch, result.best_metric = index, score
                best_state = {key: value.clone() for key, value in model.state_dict().items()}
        if on_epoch is not None:
            on_epoch(Epoch(index, mean_loss, score, result.seconds[-1]))
    if metric is None:
        result.best_epoch = epochs - 1
    elif result.best_epoch != epochs - 1:
        model.load_state_dict(best_state)
    return result


def _train_epoch(trained: nn.Module, batches: Batches, loss: LossFn, optimizer: torch.optim.Optimizer,
                 epoch: int, context: Context) -> float:
    """One pass over ``batches``' order for ``epoch``; the mean loss per example (over all
    processes in a group; NaN if no batch was trained)."""
    trained.train()
    total, count = 0.0, 0
    for chunk in batches.epoch(epoch, context):
        value = loss(trained, batches.make(chunk))
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
        total += value.item() * len(chunk)
        count += len(chunk)
    mean = total / count if count else float("nan")
    return context.mean(mean) if context.distributed else mean
