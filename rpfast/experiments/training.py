"""Generic mini-batch training and evaluation of graph classifiers on GraphBatches."""
from typing import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch

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
                optimizer: torch.optim.Optimizer, batch_size: int, generator: torch.Generator) -> float:
    """One pass over ``indices`` in shuffled mini-batches; returns the mean loss.

    With ``batch_size >= len(indices)`` (full batch, the RP paper's CSL protocol) the one
    batch keeps the order of ``indices``, so ``make_batch`` can cache it across epochs.
    """
    model.train()
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
    return total / len(order)


@torch.no_grad()
def evaluate(model: nn.Module, make_batch: BatchFn, labels: Tensor, indices: Tensor) -> float:
    """Accuracy on ``indices`` in eval mode (an RP model averages its ``eval_samples`` relabelings)."""
    model.eval()
    graph = make_batch(indices.tolist())
    predictions = model(graph.x, graph).argmax(dim=-1)
    return float((predictions == labels[indices]).float().mean())


@torch.no_grad()
def graph_embeddings(model: nn.Module, make_batch: BatchFn, indices: Tensor) -> Tensor:
    """The model's graph embeddings ``[len(indices), D]`` in eval mode."""
    model.eval()
    graph = make_batch(indices.tolist())
    return model.graph_embedding(graph.x, graph)
