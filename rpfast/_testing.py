"""Hooks into the compiled kernels for tests, benchmarks and diagnostics, never for models.

They live in the extension's ``_testing`` submodule, off the production module's top level;
this facade is how tests and benchmarks reach them (only :mod:`rpfast._backend` imports the
extension).
"""
import contextlib
from typing import Iterator, List

from rpfast import _backend

__all__ = ["serial_work", "record_region", "record_round_trip", "item_threads", "thread_round_trip_ns",
           "set_interrupt_countdown", "without_avx512"]


def serial_work(threshold: int, adaptive: bool = True) -> int:
    """The operation count below which kernels run on one thread: a positive ``threshold``
    replaces it (returns the previous one; 0 only reads it). ``adaptive`` sets whether lagging
    threads or a far round trip between them make kernels run mid-sized loops serially for a
    while. Resets what the back-off has seen."""
    hooks = _backend.all_testing_hooks()
    for other in hooks[1:]:  # every module's kernels (rpfast._C_avx512 keeps its own)
        other.serial_work(threshold, adaptive=adaptive)
    return hooks[0].serial_work(threshold, adaptive=adaptive)


def record_region(lagging: bool) -> bool:
    """Record a parallel region whose other threads lagged (or kept up), as ``parallel_for``
    does; returns whether kernels now back off to serial loops."""
    hooks = _backend.all_testing_hooks()
    for other in hooks[1:]:
        other.record_region(lagging=lagging)
    return hooks[0].record_region(lagging=lagging)


def record_round_trip(ns: int) -> bool:
    """Record a round-trip probe of ``ns`` nanoseconds; returns whether kernels now back off."""
    hooks = _backend.all_testing_hooks()
    for other in hooks[1:]:
        other.record_round_trip(ns)
    return hooks[0].record_round_trip(ns)


def item_threads(n: int, threads: int, worker_delay_us: int) -> List[int]:
    """Run a parallel loop of ``n`` items on ``threads`` threads, every item a worker thread (not
    the calling one) runs taking ``worker_delay_us`` longer; the OpenMP thread of each item."""
    return _backend.testing_hooks().item_threads(n, threads, worker_delay_us=worker_delay_us)


def thread_round_trip_ns() -> int:
    """The median cache-line round trip between two OpenMP threads in ns, as the placement
    probe measures it, or -1 if the second thread did not run within 10 ms."""
    return _backend.testing_hooks().thread_round_trip_ns()


def set_interrupt_countdown(polls: int) -> None:
    """Raise the kernels' interrupt flag after ``polls`` further polls (<= 0: never), as a Ctrl-C
    would."""
    for hooks in _backend.all_testing_hooks():
        hooks.set_interrupt_countdown(polls)


@contextlib.contextmanager
def without_avx512() -> Iterator[None]:
    """Within it, every kernel runs from the module of every kernel (``rpfast._C_avx2`` or
    ``rpfast._C``), none from ``rpfast._C_avx512``: the AVX-512 build's baseline in benchmarks."""
    _backend.set_avx512_kernels(False)
    try:
        yield
    finally:
        _backend.set_avx512_kernels(True)
