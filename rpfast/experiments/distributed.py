"""Multi-process training on ``torch.distributed``: process groups, launching, reductions.

``rpfast csl --nproc N`` and ``rpfast molecules --nproc N`` start N processes on this machine
(gloo over loopback: the models train on CPU; NCCL would serve models on CUDA); the same
commands run under ``torchrun --nproc-per-node N -m rpfast ...`` (or on a cluster with ``--nnodes``), which sets
``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` itself. Every process trains one replica of the model
under ``DistributedDataParallel`` on its shard of each global batch; rank 0 alone prints and
writes files.
"""
import multiprocessing
import multiprocessing.connection
import os
import pickle
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from rpfast.nn import convert_sync_batch_norm
from rpfast.experiments.workers import (STOP_GRACE_S, ProcessFailed, end_by_sigint, exit_description, portable,
                                       prepare_child, stop)

__all__ = ["Context", "current", "launch", "prepare", "run_experiment", "under_launcher", "main_process", "rank_seed"]


@dataclass(frozen=True)
class Context:
    """This process's place in the group (rank 0 of 1 without ``torch.distributed``)."""

    rank: int = 0
    world_size: int = 1

    @property
    def main(self) -> bool:
        """Whether this process prints and writes the outputs."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``values`` over all processes (a copy; float64 for exact counts)."""
        total = values.detach().to(torch.float64).clone()
        if self.distributed:
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def all_gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Every process's ``rows [n_rank, ...]`` (CPU, same dtype and trailing shape, any
        ``n_rank``) concatenated along dim 0 in rank order; ``rows`` itself in one process. Each
        piece travels padded to the longest, so the peak is ``world_size`` times the longest."""
        if not self.distributed:
            return rows
        rows = rows.contiguous()
        if rows.dtype not in _GATHERED_DTYPES:  # gloo has no int16: the bytes travel, the dtype stays
            return self.all_gather_rows(rows.view(torch.uint8)).view(rows.dtype)
        counts = torch.zeros(self.world_size, dtype=torch.int64)
        counts[self.rank] = rows.shape[0]
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
        longest = int(counts.max())
        padded = rows.new_zeros((longest, *rows.shape[1:]))
        padded[:rows.shape[0]] = rows
        pieces = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(pieces, padded)
        del padded
        return torch.cat([piece[:int(n)] for piece, n in zip(pieces, counts)])

    def mean(self, value: float) -> float:
        """The mean of a number over all processes."""
        return float(self.all_reduce_sum(torch.tensor([value], dtype=torch.float64))[0]) / self.world_size


#: dtypes every backend (gloo included) gathers as they are
_GATHERED_DTYPES = (torch.uint8, torch.int8, torch.int32, torch.int64, torch.float32, torch.float64)


def current() -> Context:
    """The context of this process: from the initialised default process group, if any."""
    if dist.is_available() and dist.is_initialized():
        return Context(dist.get_rank(), dist.get_world_size())
    return Context()


def rank_seed(seed: int, rank: int) -> int:
    """A seed for rank ``rank``'s own random stream (relabelings), distinct for every rank and
    equal to ``seed`` on rank 0, so a 1-process run draws what rank 0 of N draws."""
    return seed + 1_000_003 * rank


def prepare(model: nn.Module, context: Context, sync_bn: bool = False, find_unused_parameters: bool = False
            ) -> Tuple[nn.Module, nn.Module]:
    """``(model, trained)``: the model to evaluate and save, and the module whose forward trains it.

    In one process both are ``model``. In a process group ``trained`` is
    ``DistributedDataParallel(model)`` (which averages the gradients over the processes;
    ``find_unused_parameters`` where a step may leave some parameters without a gradient), and
    with ``sync_bn`` the BatchNorm layers are replaced by SyncBatchNorm first (new parameters:
    build the optimizer on the returned ``model``)."""
    if not context.distributed:
        return model, model
    if sync_bn:
        model = convert_sync_batch_norm(model)
    return model, nn.parallel.DistributedDataParallel(model, find_unused_parameters=find_unused_parameters)


def under_launcher() -> bool:
    """Whether ``torchrun`` (or another launcher) started this process as one of a group."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def main_process() -> bool:
    """Whether this process writes a command's outputs: always, except in a launcher's group,
    where rank 0 does."""
    return not under_launcher() or os.environ.get("RANK") == "0"


def _backend(device: torch.device = torch.device("cpu")) -> str:
    """The process group's backend for models on ``device``: NCCL carries CUDA tensors only, so
    gloo unless the model is on CUDA (the experiments train on CPU, even on a machine with GPUs)."""
    return "nccl" if device.type == "cuda" and dist.is_nccl_available() else "gloo"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, threads: int, function: Callable, args: tuple, channel,
            stderr, parent: int) -> None:
    """One process of the group: run ``function(*args)``; rank 0 sends ``("result", result)``
    and a rank that fails sends ``("error", time, exception)`` over ``channel`` (before it tears
    its process group down, so the errors this causes in its peers come later) and exits 1.
    Ctrl-C ends the process by SIGINT (the parent reports the run interrupted), without a
    traceback. Its stderr goes to the pipe ``stderr``, which the parent relays (:func:`_relay`)."""
    os.dup2(stderr.fileno(), 2)
    stderr.close()
    prepare_child(parent)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    torch.set_num_threads(threads)
    reported = []

    def report(error: BaseException) -> None:
        if not reported:
            reported.append(error)
            try:  # CLOCK_MONOTONIC is one clock for all processes of the machine
                channel.send_bytes(pickle.dumps(("error", time.monotonic(),
                                                 portable(error, f"rank {rank} of the launched group"))))
            except BaseException:  # noqa: BLE001 - the parent is gone: nobody to tell
                pass

    try:
        dist.init_process_group(_backend(), rank=rank, world_size=world_size)
        try:
            result = function(*args)
            if rank == 0:  # by value: torch's pickling would share tensors with a process about to exit
                channel.send_bytes(pickle.dumps(("result", result)))
            # Every rank is past its last collective before any tears the group down: gloo can
            # abort a process ("terminate called without an active exception") whose peer closes
            # the connection under it.
            dist.barrier()
        except Exception as error:
            report(error)
            raise
        finally:
            dist.destroy_process_group()
    except KeyboardInterrupt:
        end_by_sigint()
    except BaseException as error:  # noqa: BLE001 - every failure goes to the parent
        report(error)
        _leave(channel, 1)
    _leave(channel, 0)


def _leave(channel, status: int) -> None:
    """End a rank without the interpreter's teardown (``os._exit``): its work is done, its result
    or error sent and its process group destroyed. A finished rank that went on through the
    interpreter's exit (C++ static destructors, torch's and gloo's background threads) was killed
    now and then by SIGABRT ("terminate called without an active exception"; twice in the CI
    runs of the test suite), which failed a run whose results had all arrived."""
    channel.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to say
            pass
    os._exit(status)


_FAILURE_GRACE_S = 1.0  # after a first failure, how long the others may take to report theirs
# What libstdc++ prints when gloo aborts a rank whose peer died mid-collective: noise after the
# failure the parent reports itself (a rank that aborts on its own is reported as killed by SIGABRT).
_ABORT_NOISE = (b"terminate called without an active exception", b"terminate called after throwing",
                b"  what():  ")


# DDP's performance hint when find_unused_parameters=True found none in a step: the molecule
# models need the flag (a shard may miss an element's or a degree's weights), so the hint is noise.
_DDP_HINT = b"find_unused_parameters=True was specified in DDP constructor"


def _relay(reader, aborts: dict, rank: int) -> None:
    """Copy a rank's stderr to this process's (progress bar, warnings) until the rank exits,
    without gloo's abort messages (kept in ``aborts[rank]``, one line, for the report of a rank
    that died of one) and DDP's unused-parameter hint."""
    fd = reader.fileno()
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            return
        if not chunk:
            return
        if _DDP_HINT in chunk:
            chunk = b"".join(line for line in chunk.splitlines(keepends=True) if _DDP_HINT not in line)
        if chunk.startswith(_ABORT_NOISE):
            aborts[rank] = " ".join(chunk.decode("utf-8", "replace").split())[:300]
        elif chunk:
            try:
                os.write(2, chunk)
            except OSError:
                pass


def _spawn_group(function: Callable, nproc: int, args: tuple, threads: int) -> Any:
    """Spawn ``nproc`` ranks running ``function(*args)`` and return rank 0's result.

    Each rank reports over its own pipe (no semaphores: nothing a killed rank can leak). The
    first failure ends the group: after a short grace in which the other ranks may fail too, a
    rank killed by a signal is reported first (``ProcessFailed``; the others' errors are its
    consequences), then the exception a rank raised first (re-raised here, its traceback in
    a note), then a non-zero exit status. Whatever ends this call, Ctrl-C and the CLI's
    SIGTERM included, the ranks still running are stopped and reaped."""
    context = multiprocessing.get_context("spawn")
    port, parent = _free_port(), os.getpid()
    processes, readers, relays, aborts = [], {}, [], {}
    try:
        for rank in range(nproc):
            reader, writer = context.Pipe(duplex=False)
            err_reader, err_writer = context.Pipe(duplex=False)
            process = context.Process(target=_worker, args=(rank, nproc, port, threads, function, args, writer,
                                                            err_writer, parent),
                                      daemon=True, name=f"rpfast-rank-{rank}")
            process.start()
            writer.close()
            err_writer.close()
            processes.append(process)
            readers[reader] = rank
            relays.append((threading.Thread(target=_relay, args=(err_reader, aborts, rank), daemon=True), err_reader))
            relays[-1][0].start()
        messages, exits, failed_at = [], {}, None  # ("result", value), ("error", time, exception)

        def receive(reader) -> bool:
            """Take one message from ``reader``; False at its end (the rank has exited)."""
            try:
                messages.append(pickle.loads(reader.recv_bytes()))
                return True
            except EOFError:
                del readers[reader]
                reader.close()
                return False

        while len(exits) < nproc:
            timeout = None if failed_at is None else max(0.0, failed_at + _FAILURE_GRACE_S - time.monotonic())
            sentinels = {p.sentinel: rank for rank, p in enumerate(processes) if rank not in exits}
            ready = multiprocessing.connection.wait([*readers, *sentinels], timeout)
            if not ready and failed_at is not None:
                break  # the others are still running (waiting for the failed rank): stop them
            for item in ready:
                if item in readers:
                    receive(item)
                else:
                    rank = sentinels[item]
                    processes[rank].join()
                    exits[rank] = processes[rank].exitcode
            if failed_at is None and (any(message[0] == "error" for message in messages) or any(exits.values())):
                failed_at = time.monotonic()
        killed = [(rank, code) for rank, code in exits.items() if code is not None and code < 0]
        if killed:
            rank, code = killed[0]
            relays[rank][0].join(STOP_GRACE_S)  # the rank has exited: its last words are on their way
            said = f" ({aborts[rank]})" if rank in aborts else ""
            raise ProcessFailed(f"rank {rank} {exit_description(code)}{said}")
        for reader in list(readers):  # what a rank sent just before it exited
            while reader.poll() and receive(reader):
                pass
        errors = sorted((message[1:] for message in messages if message[0] == "error"), key=lambda e: e[0])
        if errors:  # the first raised: the others are likely its consequences (a peer's connection lost)
            raise errors[0][1]
        failed = [(rank, code) for rank, code in exits.items() if code]
        if failed:
            rank, code = failed[0]
            raise ProcessFailed(f"rank {rank} {exit_description(code)}")
        results = [message[1] for message in messages if message[0] == "result"]
        if not results:
            raise RuntimeError("the distributed run finished without a result from rank 0")
        return results[0]
    finally:
        stop(processes)
        for reader in readers:
            reader.close()
        for relay, err_reader in relays:
            relay.join(STOP_GRACE_S)  # the rank has exited: its pipe is at its end
            err_reader.close()


def launch(function: Callable[..., Any], nproc: int, *args, threads: Optional[int] = None) -> Optional[Any]:
    """Run ``function(*args)`` in ``nproc`` processes of one group and return rank 0's result.

    * ``nproc == 1`` and no launcher: a plain call in this process.
    * under ``torchrun``: this process joins the group the launcher set up (``nproc`` is
      ignored) and returns its own result (rank 0's is the one that matters).
    * otherwise: ``nproc`` processes are spawned on this machine (loopback), each with
      ``threads`` threads (default: this process's threads divided among them). An exception
      in a rank is raised here; a rank killed by a signal (or exiting without one) raises
      :class:`~rpfast.experiments.workers.ProcessFailed` naming it; the other ranks are
      stopped either way.
    """
    if under_launcher():
        if not dist.is_initialized():
            dist.init_process_group(_backend())
        try:
            result = function(*args)
            dist.barrier()  # as in _worker: nobody tears the group down under a peer
            return result
        finally:
            dist.destroy_process_group()
    if nproc == 1:
        return function(*args)
    threads = threads or max(1, torch.get_num_threads() // nproc)
    return _spawn_group(function, nproc, args, threads)


def run_experiment(function: Callable[..., Any], config, progress: bool):
    """A command's ``function(config, progress)`` in ``config.nproc`` processes (or the group a
    launcher made), after the preamble (:func:`rpfast.experiments.preamble.prepare`):
    ``config.nproc`` records the real group size, and ``config.threads`` is shared among the
    processes. Returns ``(results, writes)``: rank 0's results (this process's under a
    launcher) and whether this process prints and writes the outputs."""
    writes = main_process()
    if under_launcher():
        config = replace(config, nproc=int(os.environ["WORLD_SIZE"]))
    threads = max(1, config.threads // config.nproc) if config.threads else None
    return launch(function, config.nproc, config, progress, threads=threads), writes
