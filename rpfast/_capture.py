"""Whether a training step is being captured as a CUDA graph, and the one rule while it is.

A captured graph replays the device work of one step on new data copied into the same tensors;
the step's Python does not run again. So anything the step computes on the host from a batch's
*data* (degree groups, root sets, traversals) would be frozen at the values of the batch it was
captured with. :class:`~rpfast.data.GraphBatch`'s host views of data (``host_in_degree``,
``host_extra``, ``host()``) therefore raise :class:`NotCapturable` during a capture, and the
caller (:mod:`rpfast.experiments.step_graphs`) runs such a step eagerly instead; so does
:func:`rpfast._uploads.upload`, the one way host-made data enters a step (a captured copy would
replay the same host memory at every step). ``host_ptr`` stays readable: the graph sizes are part
of what a captured step is keyed by.
"""
from contextlib import contextmanager

__all__ = ["NotCapturable", "capturing", "is_capturing", "refuse_while_capturing"]

_capturing = False


class NotCapturable(RuntimeError):
    """This step cannot be replayed as a CUDA graph (it reads data on the host, say); the
    message says what. Raised only while a step is being captured."""


@contextmanager
def capturing():
    """Mark the enclosed code as a step being captured (nested uses are refused)."""
    global _capturing
    if _capturing:
        raise RuntimeError("a step is already being captured")
    _capturing = True
    try:
        yield
    finally:
        _capturing = False


def is_capturing() -> bool:
    return _capturing


def refuse_while_capturing(what: str) -> None:
    """NotCapturable naming ``what`` while a step is captured; nothing otherwise."""
    if _capturing:
        raise NotCapturable(f"{what}: a replayed CUDA graph cannot follow what the host computes from the "
                            "data, so this step runs eagerly")
