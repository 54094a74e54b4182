"""Generic mini-batch training and evaluation of graph classifiers on GraphBatches."""
import math
from typing import Callable, Iterable, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.utils.data import DistributedSampler

from rpfast.data import GraphBatch
from rpfast.experiments.distributed import Context

BatchFn = Callable[[Sequence[int]], GraphBatch]


def adam(parameters: Iterable[Tensor], lr: float) -> torch.optim.Adam:
    """Adam with torch's fused kernel when this torch has it for the parameters' device (one
    call updates every tensor; the per-tensor loop costs more than a small GIN's step)."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - torch without fused CPU Adam
        return torch.optim.Adam(parameters, lr=lr)


def train_epoch(model: nn.Module, make_batch: BatchFn, labels: Tensor, indices: Tensor,
                optimizer: torch.optim.Optimizer, batch_size: int, generator: torch.Generator,
                context: Optional[Context] = None, epoch: int = 0, shuffle_seed: int = 0) -> float:
    """One pass over ``indices`` in shuffled mini-batches; returns the mean loss.

    With ``batch_size >= len(indices)`` (full batch, the RP paper's CSL protocol) the one
    batch keeps the order of ``indices``, so ``make_batch`` can cache it across epochs.

    In a process group (``context.distributed``; ``model`` wrapped in
    ``DistributedDataParallel``) a ``DistributedSampler`` (seeded by ``shuffle_seed`` and
    ``epoch``, the same on every rank) gives each process its shard of the shuffled indices,
    and every global batch of ``batch_size`` graphs is split evenly across the processes; the
    returned loss is the mean over all processes.
    """
    model.train()
    if context is not None and context.distributed:
        sampler = DistributedSampler(indices, num_replicas=context.world_size, rank=context.rank,
                                     shuffle=True, seed=shuffle_seed)
        sampler.set_epoch(epoch)
        order = indices[list(sampler)]
        batch_size = max(1, math.ceil(min(batch_size, len(indices)) / context.world_size))
    else:
        full_batch = batch_size >= len(indices)
        order = indices if full_batch else indices[torch.randperm(len(indices), generator=generator)]
    total = 0.0
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size].tolist()
        graph = make_batch(chunk)
        loss = nn.functional.cross_entropy(model(graph.x, graph), labels[chunk])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(chunk)
    mean = total / len(order)
    return context.mean(mean) if context is not None and context.distributed else mean


@torch.no_grad()
def evaluate(model: nn.Module, make_batch: BatchFn, labels: Tensor, indices: Tensor,
             context: Optional[Context] = None) -> float:
    """Accuracy on ``indices`` in eval mode (an RP model averages its ``eval_samples`` relabelings).
    In a process group every process scores its share of ``indices`` and the counts are summed."""
    model.eval()
    if context is not None and context.distributed:
        indices = indices[context.rank::context.world_size]
    correct = 0.0
    if len(indices):
        graph = make_batch(indices.tolist())
        correct = float((model(graph.x, graph).argmax(dim=-1) == labels[indices]).sum())
    if context is not None and context.distributed:
        counts = context.all_reduce_sum(torch.tensor([correct, float(len(indices))]))
        return float(counts[0] / counts[1])
    return correct / max(len(indices), 1)


@torch.no_grad()
def graph_embeddings(model: nn.Module, make_batch: BatchFn, indices: Tensor) -> Tensor:
    """The model's graph embeddings ``[len(indices), D]`` in eval mode."""
    model.eval()
    graph = make_batch(indices.tolist())
    return model.graph_embedding(graph.x, graph)
