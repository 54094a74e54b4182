"""What `rpfast molecules` learns and how it is scored: task types, losses and metrics.

Labels are a float tensor ``[molecules, tasks]`` with NaN for a missing label (multi-task data
sets label some molecules for some tasks only); every loss and metric uses the labelled
entries alone.

* **classification**: labels 0 or 1; the model's outputs are logits, predictions
  ``sigmoid(logit)``; the loss is binary cross-entropy with each task's positives weighted by
  ``n_negative / n_positive`` over the training labels; metrics ``roc-auc``, ``prc-auc``
  (average precision, MUV's recommended metric) and ``accuracy`` (threshold 0.5).
* **regression**: any finite labels; targets are standardised per task with the training
  labels' mean and sd (``(y - mean) / sd``; sd 1 where it is 0 or undefined); the loss is the
  mean squared error of the standardised targets; predictions are ``output * sd + mean``;
  metrics ``rmse``, ``mae`` and ``r2``.

A metric is computed per task and averaged over the tasks where it is defined (ROC-AUC and
PRC-AUC need both classes, R^2 two distinct labels, the others one label).
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

TASK_TYPES = ("classification", "regression")


@dataclass(frozen=True)
class Metric:
    """A per-task score ``score(y_true, y_pred)`` over one task's labelled molecules;
    ``defined(y_true)`` says whether it exists (``needs`` in words); ``higher_is_better``
    orients model selection."""

    name: str
    task_type: str
    score: Callable[[np.ndarray, np.ndarray], float]
    defined: Callable[[np.ndarray], bool]
    needs: str
    higher_is_better: bool


def _sklearn(name: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """``sklearn.metrics.<name>``, imported on first use (scikit-learn costs every ``rpfast``
    command a second of start-up otherwise)."""
    def score(y: np.ndarray, p: np.ndarray) -> float:
        import sklearn.metrics

        return getattr(sklearn.metrics, name)(y, p)

    score.__name__ = name
    return score


def _two_classes(y: np.ndarray) -> bool:
    return bool((y == 0).any() and (y == 1).any())


def _some(y: np.ndarray) -> bool:
    return len(y) > 0


def _varies(y: np.ndarray) -> bool:
    return len(y) > 1 and bool((y != y[0]).any())


METRICS: Dict[str, Metric] = {m.name: m for m in (
    Metric("roc-auc", "classification", _sklearn("roc_auc_score"), _two_classes, "both classes 0 and 1", True),
    Metric("prc-auc", "classification", _sklearn("average_precision_score"), _two_classes, "both classes 0 and 1", True),
    Metric("accuracy", "classification", lambda y, p: float(np.mean((p >= 0.5) == (y == 1))), _some, "a label",
           True),
    Metric("rmse", "regression", lambda y, p: math.sqrt(float(np.mean((p - y) ** 2))), _some, "a label", False),
    Metric("mae", "regression", _sklearn("mean_absolute_error"), _some, "a label", False),
    Metric("r2", "regression", _sklearn("r2_score"), _varies, "two different labels", True),
)}
DEFAULT_METRIC = {"classification": "roc-auc", "regression": "rmse"}


def metrics_of(task_type: str) -> List[str]:
    """The metric names of a task type, the default (model selection) one first."""
    names = [name for name, m in METRICS.items() if m.task_type == task_type]
    return sorted(names, key=lambda name: name != DEFAULT_METRIC[task_type])


def check_metric(name: Optional[str], task_type: str) -> str:
    """``name`` (default: the task type's default), refused with a clear ValueError when it
    does not exist or does not score ``task_type``."""
    if name is None:
        return DEFAULT_METRIC[task_type]
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}: choose from {', '.join(METRICS)}")
    if METRICS[name].task_type != task_type:
        raise ValueError(f"metric {name!r} scores {METRICS[name].task_type}, but the task is {task_type}: "
                         f"choose from {', '.join(metrics_of(task_type))}")
    return name


def infer_task_type(labels: torch.Tensor) -> str:
    """``classification`` when every known label is 0 or 1, else ``regression``."""
    known = labels[~labels.isnan()]
    return "classification" if bool(((known == 0) | (known == 1)).all()) else "regression"


def task_scores(metric: str, predictions: np.ndarray, labels: np.ndarray) -> List[Optional[float]]:
    """``metric`` per task (column) over the labelled molecules; None where it is undefined (or
    a prediction is not finite: a diverged model). ``predictions`` and ``labels`` are
    ``[molecules, tasks]`` (labels NaN where missing)."""
    spec = METRICS[metric]
    out: List[Optional[float]] = []
    for t in range(labels.shape[1]):
        known = ~np.isnan(labels[:, t])
        y, p = labels[known, t], predictions[known, t]
        out.append(float(spec.score(y, p)) if spec.defined(y) and np.isfinite(p).all() else None)
    return out


def usable_tasks(metric: str, labels: np.ndarray) -> np.ndarray:
    """Per task, whether ``metric`` is defined on ``labels [molecules, tasks]``."""
    spec = METRICS[metric]
    return np.array([spec.defined(labels[~np.isnan(labels[:, t]), t]) for t in range(labels.shape[1])], dtype=bool)


def mean_defined(values: Sequence[Optional[float]]) -> Optional[float]:
    """The mean of the values that are defined; None (null in results.json) if none is."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def mean_sd(values: Sequence[Optional[float]]) -> tuple:
    """``(mean, sample sd, count)`` of the defined values (None where undefined; the sd needs two)."""
    defined = [v for v in values if v is not None]
    return mean_defined(defined), (float(np.std(defined, ddof=1)) if len(defined) > 1 else None), len(defined)


@dataclass(frozen=True)
class Targets:
    """How labels become training targets and outputs become predictions for one task type:
    ``mean``/``sd`` ``[tasks]`` (float64) standardise regression targets; classification keeps
    labels and weights each task's positives by ``pos_weight``."""

    task_type: str
    mean: torch.Tensor
    sd: torch.Tensor
    pos_weight: torch.Tensor

    @classmethod
    def fit(cls, task_type: str, train_labels: torch.Tensor) -> "Targets":
        """From the training labels ``[molecules, tasks]`` (NaN = missing)."""
        labels = train_labels.double()
        known = ~labels.isnan()
        count = known.sum(dim=0)
        if task_type == "regression":
            mean = labels.nan_to_num(0).sum(dim=0) / count.clamp(min=1)
            var = ((labels - mean).nan_to_num(0) ** 2).sum(dim=0) / (count - 1).clamp(min=1)
            sd = torch.where(var > 0, var.sqrt(), torch.ones_like(var))
            return cls(task_type, mean, sd, torch.ones(labels.shape[1]))
        positive = ((labels == 1) & known).sum(dim=0).float()
        negative = ((labels == 0) & known).sum(dim=0).float()
        weight = torch.where(positive > 0, negative / positive.clamp(min=1), torch.ones_like(positive))
        return cls(task_type, torch.zeros(labels.shape[1], dtype=torch.float64),
                   torch.ones(labels.shape[1], dtype=torch.float64), weight)

    def to(self, device: torch.device) -> "Targets":
        """The same targets with their tensors on ``device`` (where the training outputs are)."""
        return Targets(self.task_type, self.mean.to(device), self.sd.to(device), self.pos_weight.to(device))

    def loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean loss over the labelled entries of a batch (``outputs``, ``labels``: ``[B, tasks]``)."""
        known = ~labels.isnan()
        if self.task_type == "regression":
            targets = ((labels.double() - self.mean) / self.sd).to(outputs.dtype).nan_to_num(0)
            losses = (outputs - targets) ** 2
        else:
            losses = nn.functional.binary_cross_entropy_with_logits(
                outputs, labels.nan_to_num(0), pos_weight=self.pos_weight, reduction="none")
        return (losses * known).sum() / known.sum().clamp(min=1)

    def predictions(self, outputs: torch.Tensor) -> np.ndarray:
        """Model outputs ``[B, tasks]`` as float64 predictions: probabilities or label units."""
        if self.task_type == "regression":
            return (outputs.double() * self.sd + self.mean).numpy()
        return torch.sigmoid(outputs).double().numpy()

    def state(self) -> dict:
        """Plain values for a checkpoint (:meth:`from_state` reads them back)."""
        return {"task_type": self.task_type, "mean": self.mean.tolist(), "sd": self.sd.tolist(),
                "pos_weight": self.pos_weight.tolist()}

    @classmethod
    def from_state(cls, state: dict) -> "Targets":
        return cls(state["task_type"], torch.tensor(state["mean"], dtype=torch.float64),
                   torch.tensor(state["sd"], dtype=torch.float64), torch.tensor(state["pos_weight"]))
