"""An epoch's mini-batches: the training examples shuffled per epoch, sharded across the
processes of a group, cut into batches (what :func:`rpfast.experiments.training.fit` iterates)."""
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch import Tensor
from torch.utils.data import DistributedSampler

from rpfast.experiments.distributed import Context

__all__ = ["Batches"]


@dataclass(frozen=True)
class Batches:
    """The training examples ``indices`` (int64 ``[N]``) in batches of ``size`` per step.

    * ``make(chunk)`` turns a chunk of ``indices`` (int64 ``[b]``) into what the loss takes
      (a graph batch and its targets, say).
    * One process: every epoch draws a permutation of ``indices`` from ``generator``, except
      that a single full batch (``size >= N``) keeps the order of ``indices`` (so ``make`` can
      cache it) unless ``shuffle_full_batch``.
    * A process group: a ``DistributedSampler`` seeded by ``seed`` and the epoch (the same on
      every process) gives each process its shard of a shuffled order, and every global batch
      of ``min(size, N)`` examples is split evenly across the processes (rounded up).
    * Chunks with fewer than ``min_size`` examples are skipped (BatchNorm in training needs two
      rows; the shards are equal, so all processes skip the same step).
    """

    indices: Tensor
    make: Callable[[Tensor], Any]
    size: int
    generator: torch.Generator
    seed: int = 0
    min_size: int = 1
    shuffle_full_batch: bool = False

    def __post_init__(self):
        if not isinstance(self.indices, Tensor) or self.indices.dim() != 1 or self.indices.dtype != torch.int64:
            raise TypeError(f"indices must be a 1-D int64 tensor, got {_describe(self.indices)}")
        for name in ("size", "min_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(self.generator).__name__}")

    def epoch(self, epoch: int, context: Context) -> Iterator[Tensor]:
        """The chunks of ``indices`` that this process trains on in epoch ``epoch`` (from 0)."""
        order, step = self._order(epoch, context)
        for start in range(0, len(order), step):
            chunk = order[start:start + step]
            if len(chunk) >= self.min_size:
                yield chunk

    def _order(self, epoch: int, context: Context):
        n = len(self.indices)
        if context.distributed:
            sampler = DistributedSampler(self.indices, num_replicas=context.world_size, rank=context.rank,
                                         shuffle=True, seed=self.seed)
            sampler.set_epoch(epoch)
            return self.indices[list(sampler)], max(1, math.ceil(min(self.size, n) / context.world_size))
        if self.size >= n and not self.shuffle_full_batch:
            return self.indices, self.size
        return self.indices[torch.randperm(n, generator=self.generator)], self.size


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dim()}-D {value.dtype} tensor"
    return type(value).__name__
