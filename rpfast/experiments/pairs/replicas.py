"""One pair and seed of `rpfast pairs`: its seed, its relabelings and batches, and its row of
statistics from its trained model's embeddings; shared by the pair-by-pair protocol
(:mod:`~rpfast.experiments.pairs.protocol`) and the stacked one
(:mod:`~rpfast.experiments.pairs.batched`)."""
import math
import sys
from typing import Dict, List

import numpy as np
import torch

from rpfast.data.batch import GraphBatch
from rpfast.datasets.pairs import GraphPair
from rpfast.experiments.pairs.statistics import verdict

__all__ = ["relabeled", "batch_of", "pair_max_degree", "replica_seed", "pair_row"]


def relabeled(edge_index: torch.Tensor, n: int, count: int, generator: torch.Generator) -> List[torch.Tensor]:
    """``count`` random relabelings of one graph: vertex ``v`` becomes ``perm[v]`` and the edge
    order is shuffled (what the protocol feeds the model)."""
    out = []
    for _ in range(count):
        perm = torch.randperm(n, generator=generator)
        order = torch.randperm(edge_index.shape[1], generator=generator)
        out.append(perm[edge_index[:, order]])
    return out


def batch_of(graphs: List[torch.Tensor], n: int) -> GraphBatch:
    """A batch of graphs on ``n`` vertices with the constant node feature 1."""
    return GraphBatch.from_edge_lists([(g, n) for g in graphs], x=[torch.ones(n, 1) for _ in graphs])


def _max_degree(edge_index: torch.Tensor, n: int) -> int:
    """The largest degree of the simple graph on ``n`` vertices that ``edge_index [2, E]`` gives
    (each edge listed in one or both directions; self-loops and repeats ignored)."""
    if n == 0:
        return 0
    ends = torch.sort(edge_index, dim=0).values
    ends = torch.unique(ends[:, ends[0] != ends[1]], dim=1)
    return int(torch.bincount(ends.reshape(-1), minlength=n).max())


def pair_max_degree(pair: GraphPair) -> int:
    """The largest degree of the pair's two graphs (it sizes the oriented model's walk window)."""
    return max(_max_degree(pair.g, pair.n), _max_degree(pair.h, pair.n))


def replica_seed(pair: GraphPair, seed: int) -> int:
    """The seed of one pair and seed's generator and initial weights."""
    return seed * 1_000_003 + pair.index


def pair_row(pair: GraphPair, seed: int, epochs: int, loss_value: float, g_out: torch.Tensor, h_out: torch.Tensor,
             twice: torch.Tensor, ridge: float = 0.0) -> Dict:
    """The row of one pair and seed from its trained model's embeddings (float64 on the CPU):
    ``g_out, h_out [Q, p]`` of G's and H's relabelings and ``twice [2Q, p]`` of one member's."""
    differences = (g_out - h_out).numpy()
    reliability = (twice[0::2] - twice[1::2]).numpy()
    row = {"category": pair.category, "index": pair.index, "n": pair.n, "seed": seed, "epochs": epochs,
           "final_loss": loss_value, "differences": differences, "reliability": reliability}
    if not (np.isfinite(differences).all() and np.isfinite(reliability).all()):
        # a model whose embeddings are not finite tells nothing apart (and claims nothing)
        print(f"warning: {pair.where or f'{pair.category} pair {pair.index}'}, seed {seed}: the model's embeddings "
              "are not finite (it diverged; a lower --lr may help): counted as not distinguished", file=sys.stderr)
        return {**row, "t2": math.nan, "t2_reliability": math.nan, "p_value": math.nan, "distinguished": False,
                "reliable": True}
    result = verdict(differences, reliability, ridge)
    return {**row, "t2": result.t2, "t2_reliability": result.t2_reliability, "p_value": result.p_value,
            "distinguished": result.distinguished, "reliable": result.reliable}
