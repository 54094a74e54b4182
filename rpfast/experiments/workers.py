"""Independent training runs (folds x initialisations x models) in worker processes, and what
every process rpfast starts shares (a clear failure when one dies, no orphans, no leaks).

A run of the paper's small models keeps about one core busy, so a machine with C cores
trains C runs at once. Workers are started with ``spawn`` (a fork of a process whose OpenMP
thread pools already run can hang), each with its share of the threads; each talks to this
process over its own pipe (a run to do; every finished epoch, so one progress bar covers all
of them; the run's result or exception), and this process watches the pipes and the
processes together, so a worker that dies (killed by a signal) ends the call at once with
:class:`ProcessFailed` instead of leaving its run waiting forever.
"""
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time
import traceback
from typing import Any, Callable, List, Optional, Sequence

import torch

__all__ = ["ProcessFailed", "default_jobs", "run_in_workers"]

STOP_GRACE_S = 5.0  # how long a process may take to end after SIGTERM before SIGKILL


class ProcessFailed(ChildProcessError):
    """A process rpfast started died without reporting an exception: killed by a signal or
    exited with a non-zero status. The message names it: ``rank 1 was killed by SIGKILL``."""


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_description(code: int) -> str:
    """How a process ended, from ``Process.exitcode``: 'was killed by SIGKILL', 'exited with status 1'."""
    return f"was killed by {signal_name(-code)}" if code < 0 else f"exited with status {code}"


def prepare_child(parent: int) -> None:
    """First thing in a process rpfast spawned (``parent``: the pid of the process that did).

    * Linux: SIGTERM when the parent dies (PR_SET_PDEATHSIG), so a killed ``rpfast`` leaves no
      orphans training on.
    * tqdm's lock becomes a thread lock: its default is a multiprocessing semaphore registered
      with the resource tracker, which a process killed by a signal leaves behind ("leaked
      semaphore objects to clean up at shutdown").
    """
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    else:
        if os.getppid() != parent:  # it died before prctl
            os._exit(128 + signal.SIGTERM)
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def end_by_sigint() -> None:
    """End this (child) process by SIGINT, as Ctrl-C would without Python's handler: the parent
    sees the signal, and no traceback is printed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def portable(error: BaseException, where: str) -> BaseException:
    """``error`` with its traceback in a note, as it is to arrive in the parent (an exception
    that does not survive pickling becomes a RuntimeError with its text)."""
    text = "".join(traceback.format_exception(error))
    try:
        error.add_note(f"raised in {where}:\n{text}")
        if type(pickle.loads(pickle.dumps(error))) is type(error):
            return error
    except Exception:  # noqa: BLE001 - any failure to pickle
        pass
    return RuntimeError(f"{where}: {type(error).__name__}: {error}")


def stop(processes) -> None:
    """SIGTERM the processes still running, SIGKILL any that outlive :data:`STOP_GRACE_S`, reap all."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _send(connection, message) -> None:
    """Send ``message`` by value (plain pickle). multiprocessing's own pickler would share
    tensors through file descriptors, which a background thread of the sender hands over on
    request; a process stopped during that hand-over makes the thread print a traceback."""
    connection.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(connection):
    return pickle.loads(connection.recv_bytes())


def _serve(connection, threads: int, parent: int) -> None:
    """A worker: run the calls the parent sends (``None``: stop) and send back progress, then
    the result or the exception."""
    prepare_child(parent)
    torch.set_num_threads(threads)

    def report(count: int) -> None:
        _send(connection, ("progress", count))

    try:
        while True:
            task = _receive(connection)
            if task is None:
                return
            index, function, args = task
            try:
                value = function(*args, report=report)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # noqa: BLE001 - every failure goes to the parent
                _send(connection, ("error", index, portable(error, f"worker process {os.getpid()}")))
                return
            _send(connection, ("result", index, value))
    except KeyboardInterrupt:
        end_by_sigint()
    except (EOFError, BrokenPipeError):  # the parent is gone
        return


def _has_message(connection) -> bool:
    """Whether a worker's pipe holds a message to read (a killed worker's may reset instead)."""
    try:
        return connection.poll()
    except (EOFError, ConnectionResetError):
        return False


def run_in_workers(function: Callable, calls: Sequence[tuple], jobs: int, threads: int, bar,
                   on_result: Optional[Callable[[int, Any], None]] = None) -> List[Any]:
    """``[function(*args, report=...) for args in calls]`` in ``jobs`` spawned processes with
    ``threads`` threads each; ``report(n)`` in a worker advances ``bar`` by n. Results come
    back in the order of ``calls``, and ``on_result(index, result)`` (optional) sees each as it
    arrives (to stream it out); a worker's exception is raised here, a worker killed by a
    signal raises :class:`ProcessFailed`, and either way, Ctrl-C and the CLI's SIGTERM too,
    every worker is stopped."""
    context = multiprocessing.get_context("spawn")
    jobs = max(1, min(jobs, len(calls)))
    processes, connections = [], []
    try:
        for _ in range(jobs):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, threads, os.getpid()), daemon=True,
                                      name="rpfast-worker")
            process.start()
            theirs.close()
            processes.append(process)
            connections.append(mine)
        todo = list(enumerate(calls))[::-1]
        results, ended = {}, set()  # ended: slots whose pipe is at its end (the worker exited)

        def give(slot: int) -> None:
            if todo:
                index, args = todo.pop()
                try:
                    _send(connections[slot], (index, function, args))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # it died: its sentinel says how

        for slot in range(jobs):
            give(slot)
        slots = {connection: slot for slot, connection in enumerate(connections)}
        while len(results) < len(calls):
            sentinels = {process.sentinel: slot for slot, process in enumerate(processes)}
            ready = multiprocessing.connection.wait([*slots, *sentinels])
            for item in sorted(ready, key=lambda item: item in sentinels):  # messages before deaths
                if item in sentinels:
                    slot = sentinels[item]
                    if slot not in ended and _has_message(connections[slot]):
                        continue  # read what it sent first
                    processes[slot].join()
                    raise ProcessFailed(f"worker process {processes[slot].pid} "
                                        f"{exit_description(processes[slot].exitcode)}")
                try:
                    message = _receive(item)
                except (EOFError, ConnectionResetError):  # a killed worker's socket resets
                    ended.add(slots.pop(item))
                    continue  # it exited: its sentinel says how
                if message[0] == "progress":
                    bar.update(message[1])
                elif message[0] == "error":
                    raise message[2]
                else:
                    results[message[1]] = message[2]
                    if on_result is not None:
                        on_result(message[1], message[2])
                    give(slots[item])
        for connection in connections:
            _send(connection, None)
        for process in processes:
            process.join(STOP_GRACE_S)
        return [results[i] for i in range(len(calls))]
    finally:
        stop(processes)
        for connection in connections:
            connection.close()
