"""Circulant Skip Links graphs (Murphy et al. 2019, Definition 2.1) and the CSL dataset.

CSL(M, R): vertices 0..M-1 on a cycle (edges i - i+1 mod M) plus skip links
s_1 = 0, s_{i+1} = s_i + R mod M, i.e. edges i - i+R mod M. With M and R coprime and
2 <= R <= M - 2 every graph is 4-regular, so the 1-WL test (and plain GIN) cannot tell
the classes apart, while graphs with different R are non-isomorphic.
"""
import math
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from rpfast.data.batch import GraphBatch

__all__ = ["csl_graph", "csl_dataset", "csl_batch", "PAPER_SKIPS"]

#: The paper's ten skip lengths R of CSL(41, R), one class each.
PAPER_SKIPS = (2, 3, 4, 5, 6, 9, 11, 12, 13, 16)


def csl_graph(M: int, R: int) -> Tensor:
    """``edge_index [2, 4M]`` (both directions) of the circulant skip-link graph CSL(M, R)."""
    for name, value in (("M", M), ("R", R)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if M < 5:
        raise ValueError(f"M must be >= 5 for a 4-regular CSL graph, got {M}")
    if not 2 <= R <= M - 2:
        raise ValueError(f"skip length R must satisfy 2 <= R <= M - 2 = {M - 2}, got {R}")
    if math.gcd(M, R) != 1:
        raise ValueError(f"M = {M} and R = {R} must be coprime (gcd is {math.gcd(M, R)})")
    i = torch.arange(M)
    src = torch.cat([i, i])
    dst = torch.cat([(i + 1) % M, (i + R) % M])
    return torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])


def csl_dataset(M: int = 41, skips: Sequence[int] = PAPER_SKIPS, per_class: int = 15,
                seed: int = 0) -> Tuple[List[Tuple[Tensor, int]], Tensor]:
    """The CSL classification dataset: one class per skip length.

    Each class holds the canonical CSL(M, R) and ``per_class - 1`` uniformly random
    relabelings of it (seeded). Returns ``(graphs, labels)`` with graphs a list of
    ``(edge_index, M)`` pairs (feed to :meth:`GraphBatch.from_edge_lists`) and
    ``labels [len(skips) * per_class]`` the class index of each graph.
    """
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, got {per_class}")
    if len(set(skips)) != len(skips) or not skips:
        raise ValueError(f"skips must be distinct and non-empty, got {tuple(skips)}")
    gen = torch.Generator().manual_seed(seed)
    graphs, labels = [], []
    for label, R in enumerate(skips):
        edge_index = csl_graph(M, R)
        graphs.append((edge_index, M))
        for _ in range(per_class - 1):
            new_label_of = torch.randperm(M, generator=gen)  # vertex v becomes new_label_of[v]
            graphs.append((new_label_of[edge_index], M))
        labels += [label] * per_class
    return graphs, torch.tensor(labels)


def csl_batch(graphs: List[Tuple[Tensor, int]], indices: Sequence[int]) -> GraphBatch:
    """The GraphBatch of ``graphs[indices]`` with constant node features (CSL has none)."""
    chosen = [graphs[i] for i in indices]
    return GraphBatch.from_edge_lists(chosen, x=[torch.ones(n, 1) for _, n in chosen])
