"""Hypothesis strategies: lists of small graphs, padded batches of mixed-size graphs and partial
permutations."""
import itertools

import numpy as np
import torch
from hypothesis import strategies as st


@st.composite
def batch_sizes(draw, max_graphs=4, max_nodes=7):
    """(num_nodes [B], n_max) with n_max >= every size (extra padding allowed)."""
    sizes = draw(st.lists(st.integers(0, max_nodes), min_size=0, max_size=max_graphs))
    n_max = max(sizes, default=0) + draw(st.integers(0, 2))
    return torch.tensor(sizes, dtype=torch.int64), n_max


def partial_permutations(num_nodes: torch.Tensor, P: int, K: int, seed: int, shuffle_padding: bool):
    """[B, P, K] rows: distinct vertices of each graph, -1 elsewhere (maybe interleaved)."""
    rng = np.random.default_rng(seed)
    out = np.full((len(num_nodes), P, K), -1, dtype=np.int64)
    for b, n in enumerate(num_nodes.tolist()):
        for p in range(P):
            take = min(n, K)
            row = np.concatenate([rng.permutation(n)[:take], np.full(K - take, -1)])
            out[b, p] = rng.permutation(row) if shuffle_padding else row
    return torch.from_numpy(out)


@st.composite
def permuted_batches(draw, channels=True, dtype=torch.float64):
    """(dense tensor [B, n, n, C] or [B, n, F], perms [B, P, K], num_nodes)."""
    num_nodes, n_max = draw(batch_sizes())
    P = draw(st.integers(1, 3))
    K = draw(st.integers(0, n_max + 2))
    C = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    perms = partial_permutations(num_nodes, P, K, seed, draw(st.booleans()))
    gen = torch.Generator().manual_seed(seed)
    B = len(num_nodes)
    shape = (B, n_max, n_max, C) if channels else (B, n_max, C)
    return torch.randn(shape, generator=gen, dtype=dtype), perms, num_nodes


@st.composite
def graph_lists(draw, max_graphs=3, max_nodes=8, max_edges=16, min_graphs=0):
    """[(edge_index [2, E] local, n)]: random, empty, complete, path, star or cycle graphs,
    with self-loops and multi-edges, one or both directions."""
    graphs = []
    for _ in range(draw(st.integers(min_graphs, max_graphs))):
        n = draw(st.integers(0, max_nodes))
        kind = draw(st.sampled_from(["random", "random", "empty", "complete", "path", "star", "cycle"]))
        if kind == "random" and n:
            pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=max_edges))
        elif kind == "complete":
            pairs = list(itertools.combinations(range(n), 2))
        elif kind == "path":
            pairs = [(i, i + 1) for i in range(n - 1)]
        elif kind == "star":
            pairs = [(0, i) for i in range(1, n)]
        elif kind == "cycle" and n >= 3:
            pairs = [(i, (i + 1) % n) for i in range(n)]
        else:
            pairs = []
        if draw(st.booleans()):
            pairs = pairs + [(v, u) for u, v in pairs]
        graphs.append((torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t().contiguous(), n))
    return graphs
