"""The RPC protocol on one pair (as `rpfast pairs` runs it) written the way a PyTorch Geometric
user would: the relabeled graphs as a PyG ``Batch``; RP-GIN from PyG's ``GINConv`` with a
``randperm`` of one-hot IDs per graph; the oriented model's BFS views drawn in Python (starts
spread over the vertices, neighbours visited in a random order) and gathered from the dense
adjacency with torch indexing, the same f on them, and beside them its rooted part from PyG's
``SimpleConv`` on one marked copy of the batch per root set. In eval mode each embedding averages
``eval_samples`` draws, the relabeled batch repeated ``eval_samples`` times in one forward pass."""
import math
import random

import numpy as np
import torch
from torch import nn

from benchmarks.baselines.pyg_rpgin import PygRPGIN
from rpfast.nn import Concat, RootWalks, VecMLP
from rpfast.experiments.pairs.models import ROOTED_HIDDEN, ROOTED_LAYERS, rooted_roots
from rpfast.experiments.pairs.statistics import verdict


def _relabeled(edge_index, n, count, generator):
    out = []
    for _ in range(count):
        perm = torch.randperm(n, generator=generator)
        out.append(perm[edge_index[:, torch.randperm(edge_index.shape[1], generator=generator)]])
    return out


def _pyg_batch(views, n, repeat=1):
    from torch_geometric.data import Batch, Data

    return Batch.from_data_list([Data(x=torch.ones(n, 1), edge_index=e, num_nodes=n)
                                 for e in views for _ in range(repeat)])


class PygRooted(nn.Module):
    """rpfast's ``RootedRP`` as a PyG user writes it: the batch repeated once per root set (edge
    offsets by tensor arithmetic), the set's vertices marked in its copy, rounds of ``SimpleConv``
    (neighbour sum, scaled to mean degree 3) + ``Linear`` + cos at fixed random weights,
    ``global_mean_pool``, a learned tanh read-out; averaged over every set of ``roots`` vertices
    in eval mode (64 sets per forward pass, to bound the repeated batch's memory), over one random
    set per graph in training."""

    SETS_PER_PASS = 64

    def __init__(self, hidden, layers, out, generator, roots=1, gain=1.25):
        super().__init__()
        from torch_geometric.nn import SimpleConv

        self.conv, self.generator, self.roots = SimpleConv(aggr="sum"), generator, roots
        self.embed, self.marker = nn.Linear(1, hidden), nn.Parameter(torch.randn(hidden))
        self.rounds = nn.ModuleList(nn.Linear(2 * hidden, hidden) for _ in range(layers))
        with torch.no_grad():
            for layer in self.rounds:
                layer.weight.normal_(0.0, gain / (2 * hidden) ** 0.5)
        for frozen in (self.embed, self.rounds, self.marker):
            frozen.requires_grad_(False)
        self.read = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out))

    def forward(self, batch):
        n, B = int(batch.num_nodes // batch.num_graphs), batch.num_graphs
        if self.training:  # one set of distinct vertices per graph: [1, B, roots]
            sets = torch.rand(1, B, n, generator=self.generator).topk(self.roots, dim=-1, largest=False).indices
            return self.read(self._pooled(batch, sets, n, B)).squeeze(0)
        every = torch.combinations(torch.arange(n), self.roots)  # [C, roots]
        total = 0
        for chunk in every.split(self.SETS_PER_PASS):
            pooled = self._pooled(batch, chunk.unsqueeze(1).expand(-1, B, -1), n, B)
            total = total + self.read(pooled).sum(dim=0)
        return total / every.shape[0]

    def _pooled(self, batch, sets, n, B):
        """``[R, B, hidden]``: the mean of the last round over each marked copy of the batch."""
        from torch_geometric.nn import global_mean_pool

        R = sets.shape[0]
        offsets = (torch.arange(R) * B * n).repeat_interleave(batch.edge_index.shape[1])
        edge_index = batch.edge_index.repeat(1, R) + offsets
        marked = torch.zeros(R, B, n)
        marked.scatter_(2, sets, 1.0)
        scale = 4 / (1 + batch.edge_index.shape[1] / batch.num_nodes)  # every graph of a pair has one mean degree
        with torch.no_grad():
            h = torch.cos(self.embed(batch.x).repeat(R, 1) + marked.view(-1, 1) * self.marker)
            for layer in self.rounds:
                h = torch.cos(layer(torch.cat([h, scale * (h + self.conv(h, edge_index))], dim=-1)))
            return global_mean_pool(h, torch.arange(R * B).repeat_interleave(n)).view(R, B, -1)


class BfsViewRP(nn.Module):
    """RP over BFS views: f on the k x k adjacency of the first vertices of a BFS with random
    tie-breaks, the starts spread evenly over the vertices (a random order of them, repeated),
    averaged over ``samples`` views per graph with every start weighing the same. f is the torch
    module rpfast's default model uses (ego walk counts and an MLP, ``Concat(RootWalks,
    VecMLP)``): the comparison is of the views and the batching around it."""

    def __init__(self, k, hidden, out, train_samples, eval_samples, rng, max_degree):
        super().__init__()
        self.k, self.train_samples, self.eval_samples, self.rng = k, train_samples, eval_samples, rng
        window = min(k, max_degree + 1)  # the start and its neighbours, as rpfast's default model
        self.f = Concat(RootWalks(k, 1, 1, hidden, out - out // 4, window=window, ego_channels=2),
                        VecMLP(k, 1, 1, hidden, out // 4 - out // 8, 2))

    def _view(self, neighbours, start):
        """The first L vertices of a BFS from ``start``, L uniform in 3/4 k..k (as rpfast's
        default ``min_k``)."""
        length = self.rng.randint(math.ceil(0.75 * self.k), self.k)
        order, seen, head = [start], {start}, 0
        while head < len(order) and len(order) < length:
            nbrs = neighbours[order[head]][:]
            self.rng.shuffle(nbrs)
            for u in nbrs:
                if u not in seen:
                    seen.add(u)
                    order.append(u)
            head += 1
        return order[:length]

    def forward(self, graphs):
        """``graphs``: a list of (dense adjacency [n, n], neighbour lists)."""
        samples = self.train_samples if self.training else self.eval_samples
        views, masks, weights = [], [], []
        for adj, neighbours in graphs:
            spread = list(range(len(neighbours)))
            self.rng.shuffle(spread)
            starts = [spread[p % len(spread)] for p in range(samples)]
            for start in starts:
                weights.append(1.0 / (len(set(starts)) * starts.count(start)))
                order = torch.tensor(self._view(neighbours, start))
                view = torch.zeros(self.k, self.k)
                view[:len(order), :len(order)] = adj[order][:, order]
                mask = torch.zeros(self.k, dtype=torch.bool)
                mask[:len(order)] = True
                views.append(view)
                masks.append(mask)
        masks = torch.stack(masks)
        out = self.f(torch.stack(views).unsqueeze(-1), masks.unsqueeze(-1).float(), masks)
        weights = torch.tensor(weights, dtype=out.dtype).view(len(graphs), samples, 1)
        return (out.view(len(graphs), samples, -1) * weights).sum(dim=1)


def _dense(views, n):
    graphs = []
    for e in views:
        adj = torch.zeros(n, n)
        adj[e[0], e[1]] = 1
        graphs.append((adj, [torch.nonzero(adj[v]).flatten().tolist() for v in range(n)]))
    return graphs


def run_pair_baseline(pair, seed, model="oriented", epochs=20, eval_samples=64, k=32, hidden=64, layers=6,
                      train_samples=8, lr=1e-3, q=32):
    """The protocol on ``pair``: train a fresh model to push the two graphs apart, then T2 of the
    eval-mode differences and of the reliability halves (rpfast's ``verdict``)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n = pair.n
    g_views, h_views = _relabeled(pair.g, n, q, generator), _relabeled(pair.h, n, q, generator)
    member = _relabeled(pair.g, n, 2 * q, generator)
    interleaved = [v for both in zip(g_views, h_views) for v in both]
    if model == "rp-gin":
        net = PygRPGIN(1, hidden, layers, 16, id_dim=n)

        def embed(views, training):
            repeat = 1 if training else eval_samples
            out = net(_pyg_batch(views, n, repeat))
            return out.view(len(views), repeat, -1).mean(dim=1)
    else:
        max_degree = int(torch.bincount(pair.g[0], minlength=n).max())  # pair files list both directions
        views_part = BfsViewRP(min(k, n), hidden, 16, train_samples, eval_samples, random.Random(seed), max_degree)
        # the width, rounds and root sets rpfast uses
        rooted_part = PygRooted(ROOTED_HIDDEN, ROOTED_LAYERS, 2, generator, roots=rooted_roots(n, max_degree))
        net = nn.ModuleList([views_part, rooted_part])

        def embed(views, training):
            return torch.cat([views_part(_dense(views, n)), rooted_part(_pyg_batch(views, n))], dim=-1)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = nn.CosineEmbeddingLoss()
    net.train()
    for _ in range(epochs):
        out = embed(interleaved, True)
        loss = loss_fn(out[0::2], out[1::2], -torch.ones(q))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    net.eval()
    with torch.no_grad():
        g_out, h_out, twice = (embed(v, False).double().numpy() for v in (g_views, h_views, member))
    return verdict(np.asarray(g_out - h_out), twice[0::2] - twice[1::2])
