"""Relational Pooling as a competent PyTorch / PyG user writes it: vectorised, no per-graph loops
where a vectorised form exists."""
import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.utils import to_dense_adj, to_dense_batch


def pisgd_relabel(x, edge_index, batch, K, samples, generator=None):
    """Dense ``adj [B*P, K, K, 1]``, ``x [B*P, K, F]``, ``mask [B*P, K]`` under random relabelings
    (padding sorts last: argsort of uniform keys, +inf on padding)."""
    dense_x, mask = to_dense_batch(x, batch, max_num_nodes=K)
    adj = to_dense_adj(edge_index, batch, max_num_nodes=K)
    B = adj.shape[0]
    keys = torch.rand(B, samples, K, generator=generator).masked_fill(~mask.unsqueeze(1), float("inf"))
    perm = keys.argsort(dim=-1)  # [B, P, K]
    b = torch.arange(B).view(B, 1, 1)
    adj_p = adj[b.unsqueeze(-1), perm.unsqueeze(-1), perm.unsqueeze(-2)]  # [B, P, K, K]
    x_p = dense_x[b, perm]
    mask_p = mask[b, perm]
    return adj_p.flatten(0, 1).unsqueeze(-1), x_p.flatten(0, 1), mask_p.flatten(0, 1)


def connected_triples_relabel(edge_lists, x_list, k=3):
    """All connected k-subsets of every graph in every order (itertools + a NumPy adjacency
    test), gathered into ``adj [S, k, k, 1]``, ``x [S, k, F]``, ``mask``, the graph of each row
    and the rows per graph."""
    orders = np.array(list(itertools.permutations(range(k))))
    rows, graph_of, adj_rows, x_rows = [], [], [], []
    for g, ((edge_index, n), x) in enumerate(zip(edge_lists, x_list)):
        A = np.zeros((n, n), dtype=bool)
        A[edge_index[0].numpy(), edge_index[1].numpy()] = True
        A |= A.T
        np.fill_diagonal(A, False)
        combos = np.array(list(itertools.combinations(range(n), k))).reshape(-1, k)
        sub = A[combos[:, :, None], combos[:, None, :]]  # [S, k, k]
        reach = sub | np.eye(k, dtype=bool)
        for _ in range(k - 2):
            reach = (reach[:, :, :, None] & reach[:, None, :, :]).any(axis=2) | reach
        keep = reach.all(axis=(1, 2))
        chosen = combos[keep][:, orders].reshape(-1, k)  # [S * k!, k]: every order of every kept subset
        counts = np.zeros((n, n), dtype=np.float32)  # multi-edges add up, as in to_dense_adj
        np.add.at(counts, (edge_index[0].numpy(), edge_index[1].numpy()), 1.0)
        At = torch.from_numpy(counts)
        idx = torch.from_numpy(chosen)
        adj_rows.append(At[idx.unsqueeze(-1), idx.unsqueeze(-2)])
        x_rows.append(x[idx])
        graph_of.append(torch.full((len(idx),), g))
        rows.append(len(idx))
    adj = torch.cat(adj_rows).unsqueeze(-1)
    xs = torch.cat(x_rows)
    return adj, xs, torch.ones(adj.shape[:2], dtype=torch.bool), torch.cat(graph_of), torch.tensor(rows)


def one_hot_ids(batch, num_graphs, id_dim, samples, generator=None):
    """``[P, N]`` IDs: each node's position under a random relabeling of its graph, mod m,
    vectorised (sort uniform keys within graphs)."""
    N = batch.numel()
    keys = torch.rand(samples, N, generator=generator) + batch.unsqueeze(0).to(torch.float32)
    order = keys.argsort(dim=1)  # nodes sorted by (graph, key)
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(batch, minlength=num_graphs).cumsum(0)])
    position = torch.empty_like(order)
    position.scatter_(1, order, torch.arange(N).expand(samples, N) - ptr[batch[order]])
    return F.one_hot(position % id_dim, id_dim).float()


def dfs_relabel(graphs_nx, dense_adj, dense_x, K, samples, generator=None):
    """Depth-first orders from uniform random starts (networkx, one traversal per graph and
    sample), cut to ``K`` vertices and gathered with advanced indexing: ``adj [B*P, K, K, C]``,
    ``x [B*P, K, F]``, ``mask [B*P, K]``."""
    import networkx as nx

    B = len(graphs_nx)
    perm = torch.full((B, samples, K), -1, dtype=torch.long)
    for b, G in enumerate(graphs_nx):
        n = G.number_of_nodes()
        if n == 0:
            continue
        starts = torch.randint(n, (samples,), generator=generator).tolist()
        for p, s in enumerate(starts):
            order = list(nx.dfs_preorder_nodes(G, s))[:K]
            perm[b, p, :len(order)] = torch.tensor(order)
    return gather_blocks(dense_adj, dense_x, perm)


def gather_blocks(dense_adj, dense_x, perm):
    """The relabeled blocks of ``perm [B, P, K]`` (-1: padding) gathered from a batch's dense
    ``adj [B, n, n, C]`` and ``x [B, n, F]`` with advanced indexing, padding zeroed:
    ``adj [B*P, K, K, C]``, ``x [B*P, K, F]``, ``mask [B*P, K]``."""
    B = perm.shape[0]
    mask = perm >= 0
    idx = perm.clamp(min=0)
    bb = torch.arange(B).view(B, 1, 1)
    keep = (mask.unsqueeze(-1) & mask.unsqueeze(-2)).unsqueeze(-1)
    adj = dense_adj[bb.unsqueeze(-1), idx.unsqueeze(-1), idx.unsqueeze(-2)] * keep
    x = dense_x[bb, idx] * mask.unsqueeze(-1)
    return adj.flatten(0, 1), x.flatten(0, 1), mask.flatten(0, 1)


class DenseBlocksPackedRNN(torch.nn.Module):
    """RP of an RNN over DFS orders (the paper's RNN-DFS) as a user writes it in PyTorch: the
    batch's dense adjacency (``GraphBatch.dense_adj``), the K-vertex blocks gathered from it
    (:func:`gather_blocks`), and the RNN over packed sequences of each block's real vertices
    (``pack_padded_sequence``), its last state through ``f.out``; weighted as the strategy says.
    The orders come from ``strategy`` (rpfast's), so both sides of a benchmark read the same
    relabelings; ``f`` is an rpfast ``VecRNN`` (its ``rnn`` and ``out`` layers are used)."""

    def __init__(self, f, strategy, generator):
        super().__init__()
        self.f, self.strategy, self.generator = f, strategy, generator

    def forward(self, graph):
        from torch.nn.utils.rnn import pack_padded_sequence

        perms, weights = next(iter(self.strategy.relabel_chunks(graph.host(), self.training, self.generator)))
        B, P = weights.shape
        adj, x, mask = gather_blocks(graph.dense_adj(), graph.dense_x(), perms)
        steps = torch.cat([adj.flatten(2), x], dim=-1)
        lengths = mask.sum(dim=1).clamp(min=1)
        _, state = self.f.rnn(pack_padded_sequence(steps, lengths, batch_first=True, enforce_sorted=False))
        last = state[0] if isinstance(state, tuple) else state
        out = self.f.out(last[-1]).reshape(B, P, -1)
        return (out * weights.to(out.dtype).unsqueeze(-1)).sum(dim=1)


def exact_relabel(dense_adj, dense_x, n):
    """Every permutation of ``n``-vertex graphs (itertools), gathered: ``adj [B*n!, n, n, C]``,
    ``x [B*n!, n, F]``, ``mask``."""
    perms = torch.tensor(list(itertools.permutations(range(n))))  # [n!, n]
    adj = dense_adj[:, perms.unsqueeze(-1), perms.unsqueeze(-2)]  # [B, n!, n, n, C]
    x = dense_x[:, perms]
    return adj.flatten(0, 1), x.flatten(0, 1), torch.ones(adj.shape[0] * adj.shape[1], n, dtype=torch.bool)
