"""The one training loop of the experiments (``rpfast csl``, ``molecules`` and ``pairs``):
:func:`fit` trains a model for some epochs on shuffled (in a process group: sharded)
mini-batches, optionally selects the epoch with the best validation metric, optionally stops
when the metric (or the loss) has stopped improving (patience), and returns the history.
Training stops at the first batch or epoch whose loss is not finite (it diverged), and no epoch
with a non-finite metric or non-finite weights is ever selected."""
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, List, Optional

import torch
from torch import Tensor, nn

from rpfast.experiments.batches import Batches
from rpfast.experiments.distributed import Context, current, prepare
from rpfast.experiments.step_graphs import StepGraphs

__all__ = ["Batches", "Epoch", "FitResult", "Snapshot", "TrainingDiverged", "adam", "check_learning_rate", "improves",
           "diverged_warning", "fit"]

#: The largest learning rate the optimizers take: float32's largest value (torch's Adam cannot
#: convert a larger step size to a float32 parameter's type).
MAX_LEARNING_RATE = float(torch.finfo(torch.float32).max)

LossFn = Callable[[nn.Module, Any], Tensor]
MetricFn = Callable[[nn.Module], Optional[float]]


def _step_graphs(cuda_graphs, model: nn.Module, trained: nn.Module, loss: LossFn,
                 optimizer: torch.optim.Optimizer, context: Context) -> Optional[StepGraphs]:
    """fit's ``cuda_graphs`` checked: None (steps run as usual) or the :class:`StepGraphs`."""
    if cuda_graphs is False:
        return None
    if context.distributed:
        raise ValueError("cuda_graphs captures the steps of one process; a process group trains without it")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if cuda_graphs is True:
        if device.type != "cuda":
            raise ValueError(f"cuda_graphs needs the model on a CUDA device, got its parameters on {device}")
        return StepGraphs(trained, loss, optimizer, device)
    if not isinstance(cuda_graphs, type):
        raise TypeError(f"cuda_graphs must be True, False or a graph class, got {type(cuda_graphs).__name__}")
    return StepGraphs(trained, loss, optimizer, device, graph_type=cuda_graphs)


def check_learning_rate(lr) -> float:
    """``lr`` if it is a positive finite number up to :data:`MAX_LEARNING_RATE`, else a ValueError."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be positive and finite, got {lr!r}")
    if lr > MAX_LEARNING_RATE:
        raise ValueError(f"lr must be at most {MAX_LEARNING_RATE:.4g} (float32's largest value), got {lr:g}")
    return float(lr)


def adam(parameters: Iterable[Tensor], lr: float, capturable: bool = False) -> torch.optim.Adam:
    """Adam with torch's fused kernel when this torch has it for the parameters' device (one
    call updates every tensor; the per-tensor loop costs more than a small GIN's step).
    ``capturable``: for steps captured as CUDA graphs (``fit(cuda_graphs=True)``): the step
    count and the learning rate live on the parameters' device, so a schedule's changes reach
    a replayed step."""
    parameters = list(parameters)
    if capturable:
        device = parameters[0].device if parameters else torch.device("cpu")
        return torch.optim.Adam(parameters, lr=torch.tensor(lr, device=device), fused=True, capturable=True)
    try:
        return torch.optim.Adam(parameters, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - torch without fused CPU Adam
        return torch.optim.Adam(parameters, lr=lr)


class TrainingDiverged(ValueError):
    """:func:`fit` stopped in the first epoch, whose training loss is not finite: no epoch's
    weights can be kept. ``epoch`` is 0; the message says what to change."""

    def __init__(self, message: str, epoch: int):
        super().__init__(message)
        self.epoch = epoch

    def __reduce__(self):  # pickles whole from a worker process (the default passes the message alone)
        return type(self), (self.args[0], self.epoch), self.__dict__


@dataclass(frozen=True)
class Epoch:
    """What :func:`fit`'s ``on_epoch`` callback sees after each epoch (numbered from 0)."""

    index: int
    loss: float  # mean training loss over the epoch's examples (over all processes); not finite: diverged
    metric: Optional[float]  # the validation metric; None without one, where it is undefined or not finite
    seconds: float  # the training pass (order, steps, loss reduction), without the metric


@dataclass
class FitResult:
    """:func:`fit`'s outcome: ``model`` (unwrapped from DDP; SyncBatchNorm-converted with
    ``sync_bn``) holds the state of ``best_epoch`` (without a metric, after a divergence: the
    state ``best_epoch`` started from); the histories have one entry per epoch trained
    (``metrics`` stays empty without a metric, and holds None for a diverged epoch).
    ``diverged_epoch``: the epoch (from 0) after which the mean loss or the weights were not
    finite, where training stopped early (``divergence`` says which); None when every epoch ran
    or the patience rule stopped it (``stopped_early``)."""

    model: nn.Module
    losses: List[float] = field(default_factory=list)
    metrics: List[Optional[float]] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    best_epoch: int = -1
    best_metric: Optional[float] = None
    diverged_epoch: Optional[int] = None
    divergence: Optional[str] = None  # what was not finite in the diverged epoch
    stopped_early: bool = False  # the patience rule ended training before ``epochs``
    step_graphs: Optional[dict] = None  # with ``cuda_graphs``: StepGraphs.summary()

    @property
    def finite_epochs(self) -> int:
        """The epochs trained whose loss was finite (all of them unless training diverged)."""
        return len(self.losses) - (self.diverged_epoch is not None)

    @property
    def final_loss(self) -> float:
        """The last epoch's mean training loss."""
        return self.losses[-1]


def fit(model: nn.Module, batches: Batches, loss: LossFn, *, epochs: int,
        optimizer: Callable[[List[nn.Parameter]], torch.optim.Optimizer],
        schedule: Optional[Callable[[torch.optim.Optimizer], Any]] = None,
        metric: Optional[MetricFn] = None, context: Optional[Context] = None, sync_bn: bool = False,
        find_unused_parameters: bool = False, on_epoch: Optional[Callable[[Epoch], None]] = None,
        maximize: bool = True, patience: Optional[int] = None, min_delta: float = 0.0,
        cuda_graphs=False) -> FitResult:
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
      undefined (NaN and infinity count as undefined and are recorded as None). The epoch with
      the best defined score is selected and its state restored at the end; an undefined score
      never replaces a defined one, so only while no epoch has a defined score is the latest
      epoch kept. Every process computes its own score: what the command reports comes from
      rank 0. Without a metric the last epoch is kept.
    * ``patience`` (optional): stop after ``patience`` epochs in a row that did not improve the
      watched value by more than ``min_delta``: the metric (in its direction) when there is one,
      else the mean training loss (lower is better). ``FitResult.stopped_early`` says it did.
    * Divergence: an epoch whose mean loss (over all processes, so every rank stops together)
      is NaN or infinite, or after which a weight or buffer is, stops training there
      (``diverged_epoch``); in one process on the CPU the epoch ends at its first batch whose
      loss is not finite, before that batch's step (on a device the losses are read once per
      epoch, so no step waits for the device: the epoch runs to its end). The selection is made
      among the epochs before it; without a metric the weights kept are those the last finite
      epoch started from (in full-batch training: the weights that gave its finite loss). In
      the first epoch nothing can be kept: :class:`TrainingDiverged` (a ``ValueError``) is raised.
    * ``context`` (default: :func:`~rpfast.experiments.distributed.current`): in a process
      group the model is prepared once by :func:`~rpfast.experiments.distributed.prepare`
      (``sync_bn``: SyncBatchNorm; ``find_unused_parameters`` for DDP) and each epoch's mean
      loss is averaged over the processes.
    * ``on_epoch(epoch)`` (optional): called after each epoch with its :class:`Epoch` (a
      progress bar's hook).

    * ``cuda_graphs``: capture each batch shape's whole step (forward, backward, optimizer step)
      as a CUDA graph and replay it (:mod:`rpfast.experiments.step_graphs`): for a model on a
      CUDA device, in one process, with a capturable optimizer (:func:`adam` with
      ``capturable=True``). A shape is captured the second time it comes; a step that cannot be
      captured runs as usual, and ``FitResult.step_graphs`` says how many of each and why. The
      losses are those of the steps run eagerly, to rounding. (A graph class instead of True runs
      the mode with it: the tests' CPU stand-in.)

    Each step is ``zero_grad``, ``backward``, ``step``; random numbers are drawn in this order:
    an epoch's order (``batches.generator``), the steps (the model's own generators), the metric.
    """
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if isinstance(optimizer, torch.optim.Optimizer) or not callable(optimizer):
        raise TypeError(f"optimizer must be a function of the parameters that builds the optimizer "
                        f"(lambda parameters: torch.optim.Adam(parameters, lr)), got {type(optimizer).__name__}")
    if patience is not None and (not isinstance(patience, int) or isinstance(patience, bool) or patience < 1):
        raise ValueError(f"patience must be a positive integer or None, got {patience!r}")
    if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not (
            math.isfinite(min_delta) and min_delta >= 0):
        raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta!r}")
    context = context if context is not None else current()
    model, trained = prepare(model, context, sync_bn=sync_bn, find_unused_parameters=find_unused_parameters)
    optimizer = optimizer(list(model.parameters()))
    schedule = schedule(optimizer) if schedule is not None else None
    graphs = _step_graphs(cuda_graphs, model, trained, loss, optimizer, context)
    result, best = FitResult(model), Snapshot(model)
    begun = Snapshot(model) if metric is None else None  # the weights each epoch starts from
    watched, stale = None, 0
    for index in range(epochs):
        if begun is not None:
            begun.take()
        start = time.perf_counter()
        mean_loss = _train_epoch(trained, batches, loss, optimizer, index, context, graphs)
        result.seconds.append(time.perf_counter() - start)
        result.losses.append(mean_loss)
        problem = _divergence(mean_loss, model, context)
        if problem is not None:
            result.diverged_epoch, result.divergence = index, problem
            if metric is not None:
                result.metrics.append(None)  # not evaluated: the histories stay aligned
            if on_epoch is not None:
                on_epoch(Epoch(index, mean_loss, None, result.seconds[-1]))
            break
        if schedule is not None:
            schedule.step()
        score = None
        if metric is not None:
            score = metric(model)
            score = None if score is None or not math.isfinite(score) else float(score)
            result.metrics.append(score)
        if metric is None:  # the latest epoch; its start weights are what a divergence keeps
            result.best_epoch = index
            best, begun = begun, best
        elif improves(score, result.best_metric, 0.0, maximize) or (result.best_metric is None and score is None):
            result.best_epoch, result.best_metric = index, score
            best.take()
        if on_epoch is not None:
            on_epoch(Epoch(index, mean_loss, score, result.seconds[-1]))
        if patience is not None:
            value = score if metric is not None else mean_loss
            if improves(value, watched, min_delta, maximize if metric is not None else False):
                watched, stale = value, 0
            else:
                stale += 1
            if stale >= patience:
                result.stopped_early = index < epochs - 1
                break
    result.step_graphs = None if graphs is None else graphs.summary()
    if result.best_epoch < 0:
        raise TrainingDiverged(f"training diverged in its first epoch ({result.divergence}): no epoch can be kept; "
                               "lower the learning rate", 0)
    diverged_without_metric = metric is None and result.diverged_epoch is not None
    earlier_epoch_selected = metric is not None and result.best_epoch != len(result.losses) - 1
    if diverged_without_metric or earlier_epoch_selected:
        best.restore()
    return result


class Snapshot:
    """A copy of a model's parameters and buffers: :meth:`take` copies them into tensors
    allocated at the first call (one pass over the weights, not a ``state_dict`` walk of the
    module tree), :meth:`restore` copies them back."""

    def __init__(self, model: nn.Module):
        self.tensors = list(model.parameters()) + list(model.buffers())
        self.copies = None

    def take(self) -> None:
        with torch.no_grad():
            if self.copies is None:
                self.copies = [t.detach().clone() for t in self.tensors]
            else:
                for copy, tensor in zip(self.copies, self.tensors):
                    copy.copy_(tensor)

    def restore(self) -> None:
        with torch.no_grad():
            for tensor, copy in zip(self.tensors, self.copies):
                tensor.copy_(copy)


def diverged_warning(what: str, diverged_epoch: int, divergence: str, kept: int, epochs: int) -> str:
    """The line a command prints for a :class:`FitResult` with a ``diverged_epoch``."""
    return (f"warning: {what}: training diverged in epoch {diverged_epoch} (of {epochs}, counting from 0; "
            f"{divergence}): it stopped there and epoch {kept} is kept; a lower --lr may help")


def improves(value: Optional[float], watched: Optional[float], min_delta: float, maximize: bool) -> bool:
    """Whether ``value`` beats the best value so far, ``watched``, by more than ``min_delta``
    (an undefined value never does; anything defined beats an undefined ``watched``): the
    selection of the best epoch (``min_delta`` 0) and the patience rule."""
    if value is None:
        return False
    if watched is None:
        return True
    return value > watched + min_delta if maximize else value < watched - min_delta


def _divergence(mean_loss: float, model: nn.Module, context: Context) -> Optional[str]:
    """Why an epoch diverged (its mean loss, or a floating-point parameter or buffer of ``model``
    on any process of a group, is NaN or infinite), or None. One read of the device per epoch."""
    if not math.isfinite(mean_loss):
        return f"the training loss is {mean_loss}"
    named = [(name, t) for name, t in (*model.named_parameters(), *model.named_buffers())
             if t.is_floating_point() and t.numel()]
    finite = torch.stack([torch.isfinite(t).all() for _, t in named]) if named else None
    ok = bool(finite.all()) if finite is not None else True
    if context.distributed:  # buffers may differ between the processes: all stop, or none
        ok = context.mean(float(ok)) == 1.0
    if ok:
        return None
    first = next((name for (name, _), f in zip(named, finite.tolist()) if not f), "a buffer on another process")
    return f"{first} is not finite after it; the mean training loss was {mean_loss:.4g}"


def _train_epoch(trained: nn.Module, batches: Batches, loss: LossFn, optimizer: torch.optim.Optimizer,
                 epoch: int, context: Context, graphs: Optional[StepGraphs] = None) -> float:
    """One pass over ``batches``' order for ``epoch``; the mean loss per example (over all
    processes in a group; NaN if no batch was trained). In one process on the CPU a batch whose
    loss is not finite ends the epoch before its step, with that loss (the weights stay as they
    gave it); in a group every rank steps (DistributedDataParallel's backward waits for all of
    them). With ``graphs`` the steps are theirs (:class:`StepGraphs`: captured and replayed)."""
    trained.train()
    total, on_device, count = 0.0, None, 0
    for chunk in batches.epoch(epoch, context):
        if graphs is not None:  # the step already ran (replayed or eagerly): its loss, read at the end
            value, read = graphs.step(batches.make(chunk)), False
        else:
            value = loss(trained, batches.make(chunk))
            read = _reads_each_step(value)
            if read:
                number = value.item()
                if not math.isfinite(number) and not context.distributed:
                    return number
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
        if read:
            total += number * len(chunk)
        else:  # summed where the loss is, in float64 as the host sums, and read once per epoch
            weighted = value.detach().double() * len(chunk)
            on_device = weighted if on_device is None else on_device + weighted
        count += len(chunk)
    if on_device is not None:
        total += on_device.item()
    mean = total / count if count else float("nan")
    return context.mean(mean) if context.distributed else mean


def _reads_each_step(loss: Tensor) -> bool:
    """Whether an epoch reads each batch's loss as it goes: on the CPU (free there; a non-finite
    loss then ends the epoch before its step), not on a device, where a read makes every step
    wait for the device: there the losses are read once, at the epoch's end."""
    return loss.device.type == "cpu"
