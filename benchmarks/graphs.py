"""Benchmark inputs: molecule-like random batches and the CSL batch."""
import torch

from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset


def molecule_like(num_graphs: int, low: int = 10, high: int = 60, seed: int = 0) -> GraphBatch:
    """Random trees with a ring closure per 10 atoms: degree statistics like Tox21 molecules."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for n in torch.randint(low, high + 1, (num_graphs,), generator=gen).tolist():
        child = torch.arange(1, n)
        parent = (torch.rand(n - 1, generator=gen) * child).long()
        rings = torch.randint(0, n, (2, n // 10), generator=gen)
        rings = rings[:, rings[0] != rings[1]]
        src = torch.cat([child, rings[0]])
        dst = torch.cat([parent, rings[1]])
        graphs.append((torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]), n))
    return GraphBatch.from_edge_lists(graphs)


def csl_full_batch() -> GraphBatch:
    graphs, _ = csl_dataset()
    return csl_batch(graphs, list(range(len(graphs))))
