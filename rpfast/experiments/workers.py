"""Independent training runs (folds x initialisations x models) in worker processes.

A run of the paper's small models keeps about one core busy, so a machine with C cores
trains C runs at once. Workers are started with ``spawn`` (a fork of a process whose OpenMP
thread pools already run can hang), each with its share of the threads; they report every
finished epoch through a queue, so one progress bar covers all of them.
"""
import multiprocessing
import os
import queue as queue_module
from typing import Any, Callable, List, Sequence

import torch

__all__ = ["default_jobs", "run_in_workers"]

_progress = None  # the worker's end of the progress queue


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _init_worker(progress, threads: int) -> None:
    global _progress
    _progress = progress
    torch.set_num_threads(threads)


def _report(count: int) -> None:
    _progress.put(count)


def _call(function: Callable, args: tuple) -> Any:
    return function(*args, report=_report)


def run_in_workers(function: Callable, calls: Sequence[tuple], jobs: int, threads: int, bar) -> List[Any]:
    """``[function(*args, report=...) for args in calls]`` in ``jobs`` spawned processes with
    ``threads`` threads each; ``report(n)`` in a worker advances ``bar`` by n. Results come
    back in the order of ``calls``; a worker's exception is raised here, and Ctrl-C stops
    every worker."""
    context = multiprocessing.get_context("spawn")
    progress = context.Queue()
    with context.Pool(jobs, initializer=_init_worker, initargs=(progress, threads)) as pool:
        pending = [pool.apply_async(_call, (function, args)) for args in calls]
        while not all(result.ready() for result in pending):
            try:
                bar.update(progress.get(timeout=0.1))
            except queue_module.Empty:
                pass
            for result in pending:
                if result.ready() and not result.successful():
                    result.get()  # raises the worker's exception; leaving the block terminates the pool
        while True:  # epochs reported just before the last run finished
            try:
                bar.update(progress.get_nowait())
            except queue_module.Empty:
                break
        return [result.get() for result in pending]
