"""Training steps captured once per batch shape and replayed: :func:`~rpfast.experiments.training.fit`'s
``cuda_graphs`` mode.

A small GNN's step on a GPU is hundreds of tiny launches, each waiting for the host to issue it.
A CUDA graph records the launches of one step (forward, backward, optimizer step) once and
replays them with one call. Replaying needs static shapes: the graph reads its inputs from fixed
tensors, into which every batch is copied first. So the steps are bucketed by their batch's
*signature*, everything a captured step depends on besides the data itself:

* the shape, dtype and device of every tensor of the batch (a ``GraphBatch``'s tensors and the
  cached views it carries, the targets), the batch's plain values (ints, strings, None), and
* the graph sizes on the host (``GraphBatch.host_ptr``): relabelings are drawn per graph.

CSL's mini-batches (graphs of one size) have two signatures (full batches and the last one),
``rpfast pairs`` one per pair. A signature seen a second time is captured (the first step runs
eagerly and serves as the warm-up that creates the optimizer's state); up to ``capacity``
signatures are kept, later ones run eagerly, as does a step that cannot be captured. What stops a
capture is kept in :attr:`StepGraphs.eager` (the reason, per signature), for instance a layer that
groups nodes on the host (:mod:`rpfast._capture`) or an optimizer that is not capturable.

A capture refused in Python (:class:`~rpfast._capture.NotCapturable`) leaves that signature to
eager steps; one that fails on the device stops the mode for the rest of the run (a CUDA error
may leave state behind), as does a learning rate replaced instead of updated in place. Either
way the generators go back to where the capture found them, so the eager step draws what it
would have drawn.

Random relabelings stay those of the eager step: their seeds go through a
:class:`~rpfast.ops.seed_tape.SeedTape`. A replayed step computes what the eager step computes, to
the rounding of the kernels (the same kernels run, so on one device the results are equal).
"""
from typing import Any, Callable, Dict, Hashable, List, Optional, Tuple

import torch
from torch import Tensor, nn

from rpfast._capture import NotCapturable, capturing
from rpfast.data import GraphBatch
from rpfast.data.moves import HOST_RECORDS, HOST_VIEWS
from rpfast.ops.seed_tape import SeedTape

__all__ = ["CudaGraph", "StepGraphs", "signature"]

_HOST_PTR = HOST_VIEWS + "_ptr"
_PLAIN = (bool, int, float, str, torch.dtype, torch.device, type(None))


class CudaGraph:
    """One ``torch.cuda.CUDAGraph``: :meth:`capture` records ``step()`` (nothing runs), and
    :meth:`replay` runs what it recorded."""

    @staticmethod
    def check(optimizer: torch.optim.Optimizer) -> None:
        """NotCapturable unless every parameter group is capturable with a tensor learning rate
        on its parameters' device (a float, or a CPU tensor the step reads on the host, would be
        frozen into the graph, and a schedule's changes lost)."""
        for group in optimizer.param_groups:
            lr, params = group.get("lr"), group["params"]
            if (not group.get("capturable", False) or not isinstance(lr, Tensor)
                    or (params and lr.device != params[0].device)):
                raise NotCapturable("the optimizer is not capturable: build it with capturable=True and a tensor "
                                    "learning rate on the parameters' device "
                                    "(rpfast.experiments.training.adam(..., capturable=True))")

    def __init__(self):
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, step: Callable[[], Tensor]) -> Tensor:
        stream = torch.cuda.current_stream()
        try:
            with torch.cuda.graph(self.graph):
                return step()
        except BaseException:  # a capture that CUDA invalidated may leave its side stream current
            torch.cuda.set_stream(stream)
            raise

    def replay(self) -> None:
        self.graph.replay()


def signature(batch: Any) -> Tuple[Hashable, List[Tensor]]:
    """``(key, leaves)``: what a captured step for ``batch`` is keyed by, and the tensors that
    are copied into its static batch (in a fixed order); NotCapturable for a batch holding an
    object this cannot copy."""
    key: List[Hashable] = []
    leaves: List[Tensor] = []
    _walk(batch, "", key, leaves)
    return tuple(key), leaves


def _walk(value: Any, path: str, key: List[Hashable], leaves: List[Tensor]) -> None:
    if isinstance(value, Tensor):
        key.append((path, tuple(value.shape), value.dtype, value.device))
        leaves.append(value)
    elif isinstance(value, GraphBatch):
        value.host_ptr  # the sizes on the host are part of the key (a batch moved by to() has them)
        key.append((path, "GraphBatch"))
        for name, item in sorted(_copied(value).items()):
            if name == _HOST_PTR:  # the sizes, by value: relabelings are drawn per graph on the host
                key.append((path + "." + name, tuple(item.tolist())))
            else:
                _walk(item, path + "." + name, key, leaves)
    elif isinstance(value, (tuple, list)):
        key.append((path, type(value).__name__, len(value)))
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", key, leaves)
    elif isinstance(value, dict):
        key.append((path, "dict", tuple(sorted(map(str, value)))))
        for name in sorted(value, key=str):
            _walk(value[name], f"{path}[{name!r}]", key, leaves)
    elif isinstance(value, _PLAIN):
        key.append((path, value))
    else:
        raise NotCapturable(f"the batch holds a {type(value).__name__} at {path or 'its top'}, which a captured "
                            "step cannot copy")


def _copied(batch: GraphBatch) -> Dict[str, Any]:
    """The attributes of a batch that a static copy has: its data and device views, and the
    sizes on the host; not its host copies and host views of data, which a capture refuses."""
    return {name: item for name, item in batch.__dict__.items()
            if name not in HOST_RECORDS and (name == _HOST_PTR or not name.startswith(HOST_VIEWS))}


def _static_copy(value: Any) -> Any:
    """A private copy of ``batch`` (new tensors), the captured step's inputs."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, GraphBatch):  # with its host views, which replicate() passes on unread
        out = object.__new__(GraphBatch)
        out.__dict__.update({name: _static_copy(item) for name, item in value.__dict__.items()
                             if name not in HOST_RECORDS})
        return out
    if isinstance(value, (tuple, list)):
        items = [_static_copy(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # a namedtuple too
    if isinstance(value, dict):
        return {name: _static_copy(item) for name, item in value.items()}
    return value


def _graph_batches(value: Any) -> List[GraphBatch]:
    if isinstance(value, GraphBatch):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return [batch for item in items for batch in _graph_batches(item)]


class _Captured:
    """A step to capture and replay: its static batch (a copy of ``batch``; ``leaves`` in
    signature order), seed tape, graph and loss (set by the capture)."""

    def __init__(self, batch: Any, tape: SeedTape):
        self.static = _static_copy(batch)
        self.leaves = signature(self.static)[1]
        self.tape = tape
        self.graph = None
        self.loss: Optional[Tensor] = None
        # the views a step derives from its inputs are recomputed by the graph at every replay
        self._inputs = [(graph, set(graph.__dict__)) for graph in _graph_batches(self.static)]

    def load(self, leaves: List[Tensor]) -> None:
        for static, new in zip(self.leaves, leaves):
            static.copy_(new, non_blocking=True)
        for batch, names in self._inputs:  # Python-side caches made during the capture go
            for name in set(batch.__dict__) - names:
                del batch.__dict__[name]

    def replay(self) -> Tensor:
        with self.tape.replaying():
            self.graph.replay()
        return self.loss


class StepGraphs:
    """Training steps of ``loss(trained, batch)`` with ``optimizer`` on ``device``, each batch
    signature captured once (:func:`signature`) and replayed; :meth:`step` runs one.

    ``graph_type`` makes the graphs (:class:`CudaGraph`; a test can pass one that reruns the
    step's Python on the CPU). ``capacity``: the signatures captured at most."""

    def __init__(self, trained: nn.Module, loss: Callable[[nn.Module, Any], Tensor],
                 optimizer: torch.optim.Optimizer, device: torch.device, graph_type=CudaGraph, capacity: int = 8):
        self.trained, self.loss, self.optimizer, self.device = trained, loss, optimizer, device
        self.graph_type, self.capacity = graph_type, capacity
        self.captured: Dict[Hashable, _Captured] = {}
        self.eager: Dict[Hashable, str] = {}  # signature -> why its steps run eagerly
        self.replays = 0
        self.eager_steps = 0
        self.stopped: Optional[str] = None  # why no step is captured or replayed any more
        self._seen = set()
        self._lrs: List[Tensor] = []  # the learning-rate tensors the graphs read

    def step(self, batch: Any) -> Tensor:
        """One training step on ``batch`` (replayed, captured, or eager); its loss, detached (a
        captured step's loss tensor is overwritten by its next replay: read or copy it before)."""
        if self.stopped is None and any(g["lr"] is not lr for g, lr in zip(self.optimizer.param_groups, self._lrs)):
            self._stop("the optimizer's learning rate was replaced (a schedule that does not update the tensor in "
                       "place: torch < 2.4?), which the captured steps would not see")
        if self.stopped is not None:
            return self._eager(batch)
        try:
            key, leaves = signature(batch)
        except NotCapturable as error:
            self.eager.setdefault(("unkeyed",), str(error))
            return self._eager(batch)
        captured = self.captured.get(key)
        if captured is not None:
            captured.load(leaves)
            captured.tape.refill()
            self.replays += 1
            return captured.replay()
        if key in self.eager or key not in self._seen or len(self.captured) >= self.capacity:
            self._seen.add(key)
            return self._eager(batch)
        return self._capture(key, batch)

    def _run(self, batch: Any) -> Tensor:
        self.optimizer.zero_grad(set_to_none=True)  # backward then writes fresh gradients: in a
        value = self.loss(self.trained, batch)  # graph, into tensors of its own pool
        value.backward()
        self.optimizer.step()
        return value.detach()

    def _eager(self, batch: Any) -> Tensor:
        self.eager_steps += 1
        return self._run(batch)

    def _capture(self, key: Hashable, batch: Any) -> Tensor:
        states = _generator_states(self.trained)  # draws a failed capture made are drawn again
        entry, failure = None, None
        try:
            entry = _Captured(batch, SeedTape(self.device))
            check = getattr(self.graph_type, "check", None)
            if check is not None:
                check(self.optimizer)
            entry.graph = self.graph_type()
            with capturing(), entry.tape.recording():
                entry.loss = entry.graph.capture(lambda: self._run(entry.static))
        except NotCapturable as error:  # refused in Python, before anything reached the device
            failure = str(error)
        except Exception as error:  # noqa: BLE001 - the device refused: no more captures in this run
            failure = f"{type(error).__name__}: {error}"
            self._stop(f"a capture failed on the device ({failure})")
        if failure is not None:
            if entry is not None:
                entry.tape.undo()
            for generator, state in states:
                generator.set_state(state)
            self.eager[key] = failure
            del entry
            return self._eager(batch)  # outside the handler: the failed capture's tensors are gone
        entry.tape.captured()
        self.captured[key] = entry
        # a graph reads its learning rates from these tensors: a schedule must change them in place
        self._lrs = [g["lr"] for g in self.optimizer.param_groups if isinstance(g["lr"], Tensor)]
        self.replays += 1
        entry.graph.replay()  # the capture recorded this step; this runs it (the tape holds its seeds)
        return entry.loss

    def _stop(self, why: str) -> None:
        """No more captures or replays: the graphs go, every later step runs eagerly."""
        self.stopped = why
        self.captured.clear()

    def summary(self) -> Dict[str, Any]:
        """What ran how: shapes captured, replays, eager steps and why (one line each)."""
        reasons = set(self.eager.values()) | ({self.stopped} if self.stopped else set())
        return {"captured": len(self.captured), "replays": self.replays, "eager_steps": self.eager_steps,
                "eager_reasons": sorted(reasons)}


def _generator_states(module: nn.Module) -> List[Tuple[torch.Generator, Tensor]]:
    """The states of every generator a step may draw from: torch's default ones (the CPU's and
    the GPUs') and those the modules hold."""
    generators = [torch.default_generator]
    if torch.cuda.is_available():
        generators += list(torch.cuda.default_generators)
    for sub in module.modules():
        generators += [value for value in vars(sub).values() if isinstance(value, torch.Generator)]
        strategy = getattr(sub, "strategy", None)
        generators += [value for value in vars(strategy).values() if isinstance(value, torch.Generator)] \
            if strategy is not None and hasattr(strategy, "__dict__") else []
    unique = {id(g): g for g in generators}
    return [(g, g.get_state()) for g in unique.values()]
