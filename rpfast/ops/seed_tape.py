"""The relabeling seeds of a training step captured as a CUDA graph.

Eagerly, every draw of random relabelings (:func:`rpfast.ops.random.graph_positions`) takes a
fresh 64-bit seed from a CPU generator and hands it to the kernel as an argument. A captured
graph would replay that argument, and with it the same relabelings, at every step. While a
:class:`SeedTape` records, a draw instead takes one slot of the tape's ``buffer`` (an int64
tensor on the step's device) and the kernel reads its seed from there; before every replay
:meth:`SeedTape.refill` draws the seeds again, from the same generators in the same order, and
copies them into the buffer. So a replayed step draws exactly the relabelings that the same step
run eagerly would have drawn, and the generators advance exactly as they would have.

Seeds drawn while recording are those of the step being captured: they are written into the
buffer after the capture (:meth:`SeedTape.captured`), and a failed capture puts the generators
back (:meth:`SeedTape.undo`), so the eager step that replaces it draws the same seeds.
"""
from contextlib import contextmanager
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from rpfast._capture import NotCapturable

__all__ = ["SeedTape", "active"]

_active: Optional["SeedTape"] = None

Draw = Callable[[], int]  # one signed 64-bit seed from the slot's generator


def active() -> Optional["SeedTape"]:
    """The tape a step's draws go to now, or None (the draws pass their seeds as arguments)."""
    return _active


class SeedTape:
    """``capacity`` seed slots in ``buffer`` (int64 ``[capacity]`` on ``device``), handed out in
    the order a captured step draws."""

    def __init__(self, device, capacity: int = 64):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.buffer = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.draws: List[Tuple[Optional[torch.Generator], Draw]] = []
        self._pending: List[int] = []  # the captured step's own seeds, for the buffer
        self._states: Dict[int, Tuple[torch.Generator, Tensor]] = {}  # generators before the capture
        self._cursor: Optional[int] = None  # while a re-run of the step takes its slots again

    @contextmanager
    def recording(self):
        """Draws made in the block take new slots (and draw their seed now)."""
        with self._as_active():
            yield self

    @contextmanager
    def replaying(self):
        """Draws made in the block take the recorded slots again, in order, without drawing
        (for a step whose Python runs again on its static inputs instead of a CUDA replay)."""
        self._cursor = 0
        try:
            with self._as_active():
                yield self
            if self._cursor not in (0, len(self.draws)):  # 0: a CUDA replay, where no Python runs
                raise RuntimeError(f"the step drew {self._cursor} seeds where its capture drew {len(self.draws)}")
        finally:
            self._cursor = None

    def slot(self, generator: Optional[torch.Generator], draw: Draw) -> Tensor:
        """The one-element view of ``buffer`` that this draw's kernel reads its seed from."""
        if self._cursor is not None:
            index, self._cursor = self._cursor, self._cursor + 1
            if index >= len(self.draws) or self.draws[index][0] is not generator:
                raise RuntimeError("the step draws its relabelings in another order than when it was captured")
            return self.buffer[index:index + 1]
        index = len(self.draws)
        if index >= self.buffer.numel():
            raise NotCapturable(f"the step draws relabelings more than {self.buffer.numel()} times")
        source = generator if generator is not None else torch.default_generator
        self._states.setdefault(id(source), (source, source.get_state()))
        self.draws.append((generator, draw))
        seed = draw()
        if self.buffer.device.type == "cpu":
            self.buffer[index] = seed
        else:  # a copy into the buffer now would itself be captured: it follows the capture
            self._pending.append(seed)
        return self.buffer[index:index + 1]

    def captured(self) -> None:
        """The capture succeeded: its seeds go into the buffer, for the replay of this step."""
        self._write(self._pending)
        self._pending, self._states = [], {}

    def undo(self) -> None:
        """The capture failed: the generators go back to where it found them; the tape empties."""
        for source, state in self._states.values():
            source.set_state(state)
        self.draws, self._pending, self._states = [], [], {}

    def refill(self) -> None:
        """Draw the next step's seeds, slot by slot, into the buffer (before a replay)."""
        self._write([draw() for _, draw in self.draws])

    def _write(self, seeds: List[int]) -> None:
        if not seeds:
            return
        host = torch.tensor(seeds, dtype=torch.int64)
        if self.buffer.is_cuda:  # pinned: the copy does not wait, and the host allocator keeps
            host = host.pin_memory()  # the block until the copy has run
        self.buffer[:len(seeds)].copy_(host, non_blocking=True)

    @contextmanager
    def _as_active(self):
        global _active
        if _active is not None:
            raise RuntimeError("another seed tape is active")
        _active = self
        try:
            yield
        finally:
            _active = None
