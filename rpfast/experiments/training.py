"""Generic mini-batch training and evaluation of graph classifiers on GraphBatches."""
from typing import Callable, Sequence, Tuple

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch

BatchFn = Callable[[Sequence[int]], GraphBatch]


def train_epoch(model: nn.Module, make_batch: BatchFn, labels: Tensor, indices: Tensor,
                optimizer: torch.optim.Optimizer, batch_size: int, generator: torch.Generator) -> float:
    """One pass over ``indices`` in shuffled mini-batches; returns the mean loss."""
    model.train()
    order = indices[torch.randperm(len(indices), generator=generator)]
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
def evaluate(model: nn.Module, make_batch: BatchFn, labels: Tensor, indices: Tensor) -> Tuple[float, Tensor]:
    """Accuracy on ``indices`` in eval mode and the graph embeddings ``[len, D]``."""
    model.eval()
    graph = make_batch(indices.tolist())
    predictions = model(graph.x, graph).argmax(dim=-1)
    accuracy = float((predictions == labels[indices]).float().mean())
    return accuracy, model.graph_embedding(graph.x, graph)
