"""Multi-process training on ``torch.distributed``: process groups, launching, reductions.

``rpfast csl --nproc N`` and ``rpfast molecules --nproc N`` start N processes on this machine
(gloo over loopback on CPU; NCCL when every process has a GPU); the same commands run under
``torchrun --nproc-per-node N -m rpfast ...`` (or on a cluster with ``--nnodes``), which sets
``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` itself. Every process trains one replica of the model
under ``DistributedDataParallel`` on its shard of each global batch; rank 0 alone prints and
writes files.
"""
import os
import pickle
import queue as queue_module
import socket
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from rpfast._io import prepare_output_dir

__all__ = ["Context", "current", "launch", "run_experiment", "under_launcher", "main_process", "rank_seed"]


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

    def mean(self, value: float) -> float:
        """The mean of a number over all processes."""
        return float(self.all_reduce_sum(torch.tensor([value]))[0]) / self.world_size


def current() -> Context:
    """The context of this process: from the initialised default process group, if any."""
    if dist.is_available() and dist.is_initialized():
        return Context(dist.get_rank(), dist.get_world_size())
    return Context()


def rank_seed(seed: int, rank: int) -> int:
    """A seed for rank ``rank``'s own random stream (relabelings), distinct for every rank and
    equal to ``seed`` on rank 0, so a 1-process run draws what rank 0 of N draws."""
    return seed + 1_000_003 * rank


def under_launcher() -> bool:
    """Whether ``torchrun`` (or another launcher) started this process as one of a group."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def main_process() -> bool:
    """Whether this process writes a command's outputs: always, except in a launcher's group,
    where rank 0 does."""
    return not under_launcher() or os.environ.get("RANK") == "0"


def _backend() -> str:
    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, threads: int, function: Callable, args: tuple, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    torch.set_num_threads(threads)
    dist.init_process_group(_backend(), rank=rank, world_size=world_size)
    try:
        result = function(*args)
        if rank == 0:  # by value: torch's queue pickling would share tensors with a process about to exit
            results.put(pickle.dumps(result))
        # Every rank is past its last collective before any tears the group down: gloo can
        # abort a process ("terminate called without an active exception") whose peer closes
        # the connection under it.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def launch(function: Callable[..., Any], nproc: int, *args, threads: Optional[int] = None) -> Optional[Any]:
    """Run ``function(*args)`` in ``nproc`` processes of one group and return rank 0's result.

    * ``nproc == 1`` and no launcher: a plain call in this process.
    * under ``torchrun``: this process joins the group the launcher set up (``nproc`` is
      ignored) and returns its own result (rank 0's is the one that matters).
    * otherwise: ``nproc`` processes are spawned on this machine (loopback), each with
      ``threads`` threads (default: this process's threads divided among them).
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
    results = torch.multiprocessing.get_context("spawn").Queue()
    processes = torch.multiprocessing.start_processes(
        _worker, args=(nproc, _free_port(), threads, function, args, results), nprocs=nproc, join=False,
        start_method="spawn")
    # Read rank 0's result while the processes run: a large result fills the pipe, and its
    # writer waits for a reader before it can exit.
    while True:
        try:
            result = pickle.loads(results.get(timeout=0.2))
            break
        except queue_module.Empty:
            if processes.join(timeout=0):  # every process has finished (a failure raises here)
                raise RuntimeError("the distributed run finished without a result from rank 0")
    while not processes.join():
        pass
    return result


def run_experiment(function: Callable[..., Any], config, progress: bool):
    """A command's ``function(config, progress)`` in ``config.nproc`` processes (or the group a
    launcher made): the output directory is checked first by the process that writes it,
    ``config.nproc`` records the real group size, and ``config.threads`` is shared among the
    processes. Returns ``(results, writes)``: rank 0's results (this process's under a
    launcher) and whether this process prints and writes the outputs."""
    writes = main_process()
    if writes:
        prepare_output_dir(config.out_dir)
    if under_launcher():
        config = replace(config, nproc=int(os.environ["WORLD_SIZE"]))
    threads = max(1, config.threads // config.nproc) if config.threads else None
    return launch(function, config.nproc, config, progress, threads=threads), writes
