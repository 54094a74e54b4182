r"""The oriented model of ``rpfast pairs`` for many pairs at once: ``P`` models of
:func:`~rpfast.experiments.pairs.models.build_model` (one per pair and seed, on graphs of one
size) with their parameters stacked (:mod:`rpfast.nn.stacked`), one forward over the union of
their batches.

Replica ``p`` computes exactly what its own model computes, to the rounding of batched products:

* its views are drawn from its own generator, by its own model's strategy, on its own graphs
  (the draws cannot be shared: a pair alone and inside a stack must see the same views); the
  stack gathers them all in one call (:class:`Drawn`, a strategy that hands over the draws);
* f's walk part (:class:`~rpfast.nn.rp.RootWalks`) and MLP (:class:`~rpfast.nn.rp.VecMLP`)
  run as batched products over ``[P, rows, ...]``, with batch statistics per replica;
* the rooted part's rounds are the seed's fixed random hash, one for every pair of the seed
  (``learn_rounds=False``: they never train); one :func:`~rpfast.ops.rooted_pool` call runs
  every replica's graphs through its seed's hash (the hashes stacked, ``[H, ...]``); the
  read-outs are stacked.

Rows are pair-major: a batch of ``P`` replicas of ``G`` graphs holds replica ``p``'s graphs at
``p G .. (p + 1) G - 1``, and each graph's ``S`` views follow it, so the ``M = P G S`` views
reshape to ``[P, G S, ...]``. Shapes: ``forward(graph, draws, roots, part)`` -> ``[p, G, out]``.
"""
from typing import List, Optional, Sequence

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast.data import GraphBatch
from rpfast.nn import Concat, RelationalPooling, RootedRP, RootWalks, VecMLP
from rpfast.nn.rp.oriented import Oriented
from rpfast.nn.rp.strategies import Relabelings, Strategy
from rpfast.nn.stacked import ALL, StackedBatchNorm1d, StackedLinear, stack_modules
from rpfast.ops import rooted_pool

__all__ = ["Drawn", "OrientedStack", "shared_hash"]


class Drawn(Strategy):
    """A strategy that returns the relabelings set on it before the call (``relabelings``):
    the draws of many replicas, made one by one from their own generators, gathered once."""

    needs_edges = False

    def __init__(self, size: int):
        self.size = size
        self.relabelings: Optional[Relabelings] = None

    def relabel(self, graph: GraphBatch, training: bool, generator: Optional[torch.Generator] = None) -> Relabelings:
        drawn = self.relabelings
        if drawn is None or drawn.perms.shape[0] != graph.num_graphs:
            raise RuntimeError(f"Drawn: {graph.num_graphs} graphs but relabelings for "
                               f"{None if drawn is None else drawn.perms.shape[0]}")
        return drawn


class _StackedViewF(nn.Module):
    """f on the views of a stack: the walk counts and the MLP input of every view, each replica's
    rows through its own gates, batch norm, read-out and MLP (``part``: the replicas of the call)."""

    def __init__(self, walks: Sequence[RootWalks], mlps: Sequence[VecMLP]):
        super().__init__()
        self.gate = stack_modules([w.gate for w in walks])
        self.norm = stack_modules([w.norm for w in walks])
        self.read = stack_modules([w.read for w in walks])
        self.mlp = stack_modules([m.net for m in mlps])
        # the first replica's modules, for the counts and the MLP's input rows (their layout and
        # window); their own parameters are stacked above and unused here
        self.walks, self.mlp_inputs = walks[0].requires_grad_(False), mlps[0].requires_grad_(False)
        one, other = self.walks.layout, self.mlp_inputs.layout
        if (one.bipartite, one.rows, one.C, one.F) != (other.bipartite, other.rows, other.C, other.F):
            raise ValueError("the walk part and the MLP of a stack must read one layout")  # prepared once for both
        self.part = ALL

    def forward(self, adj: Tensor, x: Tensor, mask: Tensor) -> Tensor:
        part, replicas = self.part, self.gate.weight[self.part].shape[0]

        def gate(descriptors: Tensor) -> Tensor:  # [M, W, F'] -> [M, W, C], replica by replica
            M, W, width = descriptors.shape
            return self.gate(descriptors.reshape(replicas, -1, width), part).reshape(M, W, -1)

        adj, x, rows_mask, cols_mask = self.walks.layout.prepare(adj, x, mask)  # once for both parts
        counts = self.walks.prepared_counts(adj, x, rows_mask, gate)  # [M, 3C]
        rows = counts.shape[0]
        counts = counts.view(replicas, rows // replicas, -1)
        walks = self.read(self.norm(counts, part), part)
        inputs = self.mlp_inputs.prepared_inputs(adj, x, rows_mask, cols_mask)
        mlp = self.mlp(inputs.view(replicas, rows // replicas, -1), part)
        return torch.cat([walks, mlp], dim=-1).reshape(rows, -1)


def _parts(model: nn.Module):
    """The oriented model's views (RelationalPooling of Concat(RootWalks, VecMLP) over an
    Oriented strategy) and rooted part, or a ValueError."""
    ok = (isinstance(model, Concat) and len(model.parts) == 2 and isinstance(model.parts[0], RelationalPooling)
          and isinstance(model.parts[1], RootedRP) and isinstance(model.parts[0].f, Concat)
          and [type(p) for p in model.parts[0].f.parts] == [RootWalks, VecMLP]
          and isinstance(model.parts[0].strategy, Oriented))
    if not ok:
        raise ValueError("OrientedStack stacks the oriented model of rpfast pairs with its rooted part "
                         "(Concat(RelationalPooling(Concat(RootWalks, VecMLP), Oriented), RootedRP)), got "
                         f"{type(model).__name__}")
    return model.parts[0], model.parts[1]


def shared_hash(models: Sequence[nn.Module], hash_model: RootedRP) -> None:
    """Give every model's rooted part the rounds of ``hash_model`` (its input map, marker and
    rounds: the fixed random hash of one seed), in place."""
    for model in models:
        rooted = _parts(model)[1]
        rooted.load_state_dict({k: v for k, v in hash_model.state_dict().items() if not k.startswith("read.")},
                               strict=False)


class OrientedStack(nn.Module):
    """``P`` oriented models of one shape trained and evaluated as one (module docstring).

    Args:
        models: the replicas, as :func:`~rpfast.experiments.pairs.models.build_model` makes them
            (their parameters are copied; their rooted parts must share one hash,
            :func:`shared_hash`).

    The replicas' views and root sets are drawn by :meth:`draw` and :meth:`draw_roots`, each from
    the replica's own generator, and handed to :meth:`forward`.
    """

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        if not models:
            raise ValueError("a stack needs at least one model")
        views, rooted = zip(*(_parts(m) for m in models))
        self.strategy: Oriented = views[0].strategy
        shapes = {(repr(v.strategy), v.f.parts[0].window, r.roots, r.train_roots) for v, r in zip(views, rooted)}
        if len(shapes) != 1:
            raise ValueError("the stacked models must share one shape (strategy, walk window, roots): graphs of one "
                             "size and largest degree")
        self.replicas = len(models)
        self.pool = RelationalPooling(_StackedViewF([v.f.parts[0] for v in views], [v.f.parts[1] for v in views]),
                                      Drawn(self.strategy.size), use_edge_attr=False)
        self.read = stack_modules([r.read for r in rooted])
        # the distinct hashes (one per seed) and each replica's, stacked as rooted_pool takes them
        hashes, hash_of = [], []
        for part in rooted:
            index = next((i for i, h in enumerate(hashes) if _same_hash(h, part)), len(hashes))
            if index == len(hashes):
                hashes.append(part.requires_grad_(False))  # its read-out is unused: the stacked one reads
            hash_of.append(index)
        self.hashes = nn.ModuleList(hashes)
        self.register_buffer("hash_of", torch.tensor(hash_of, dtype=torch.int64), persistent=False)
        for name, tensors in zip(("marker", "own", "passed", "bias"), zip(*(h.hash_tensors() for h in hashes))):
            self.register_buffer(f"hash_{name}", torch.stack(tensors), persistent=False)  # [H, ...]
        self.register_buffer("hash_embed_weight", torch.stack([h.embed.weight.detach() for h in hashes]),
                             persistent=False)  # [H, d, F]
        self.register_buffer("hash_embed_bias", torch.stack([h.embed.bias.detach() for h in hashes]),
                             persistent=False)  # [H, d]

    def stacked(self) -> List[Tensor]:
        """The per-replica tensors (stacked parameters and buffers, leading axis ``P``)."""
        return [t for module in self.modules() if isinstance(module, (StackedLinear, StackedBatchNorm1d))
                for t in (*module.parameters(recurse=False), *module.buffers(recurse=False))]

    def draw(self, graphs: Sequence[GraphBatch], generators: Sequence[torch.Generator]) -> List[Relabelings]:
        """Each replica's views of its host batch ``graphs[i]``, from its generator
        ``generators[i]``, in the mode the stack is in."""
        return [self.strategy.relabel(g, self.training, generator) for g, generator in zip(graphs, generators)]

    def draw_roots(self, graphs: Sequence[GraphBatch], generators: Sequence[torch.Generator]) -> Tensor:
        """``[train_roots, B, k]`` root sets of the replicas' host batches (training), each from
        its generator (after its views, as the replica's own model draws them)."""
        return torch.cat([self.hashes[0].draw_roots(g.num_nodes, g.n_max, generator)
                          for g, generator in zip(graphs, generators)], dim=1)

    def forward(self, graph: GraphBatch, draws: Sequence[Relabelings], roots: Optional[Tensor] = None,
                part: slice = ALL) -> Tensor:
        """``[p, G, out]``: the embeddings of the replicas ``part`` on ``graph``, their ``p G``
        graphs pair-major, with their views ``draws`` (one per replica, ``[G, S, K]``) and, in
        training, their root sets ``roots [T, p G, k]`` (:meth:`draw_roots`)."""
        replicas = len(draws)
        if len(range(self.replicas)[part]) != replicas:
            raise ValueError(f"part {part} covers {len(range(self.replicas)[part])} replicas but there are "
                             f"{replicas} draws")
        perms = torch.cat([d.perms for d in draws])
        if perms.shape[0] != graph.num_graphs or graph.num_graphs % max(1, replicas):
            raise ValueError(f"the draws cover {perms.shape[0]} graphs of {replicas} replicas but the batch has "
                             f"{graph.num_graphs}")
        self.pool.strategy.relabelings = Relabelings(perms, torch.cat([d.weights for d in draws]))
        self.pool.f.part = part
        try:
            views = self.pool(graph.x, graph)  # [p G, views' out]
        finally:
            self.pool.strategy.relabelings, self.pool.f.part = None, ALL
        shape = self.hashes[0]  # the roots, blocks and weights of every hash (one shape)
        if self.training:
            if roots is None:
                raise ValueError("a training forward needs the replicas' root sets (draw_roots)")
            blocks = [(upload(roots, graph.device), shape.drawn_weights(graph.num_nodes))]
        else:
            blocks = shape.all_roots(graph)

        def read(pooled: Tensor) -> Tensor:  # [R, p G, d] -> [R, p G, out], each replica its own read-out
            R, B, d = pooled.shape
            per_replica = pooled.view(R, replicas, B // replicas, d).transpose(0, 1).reshape(replicas, -1, d)
            out = self.read(per_replica, part)
            return out.view(replicas, R, B // replicas, -1).transpose(0, 1).reshape(R, B, -1)

        graph_hash = self.hash_of[part].repeat_interleave(graph.num_graphs // max(1, replicas))  # [p G]
        rooted = shape.average(graph.x, graph, blocks, read, pool=self._hashes(graph, graph_hash))
        return torch.cat([views, rooted], dim=-1).view(replicas, graph.num_graphs // replicas, -1)

    def _hashes(self, graph: GraphBatch, graph_hash: Tensor):
        """A block's roots ``[R, B, k]`` -> pooled states ``[R, B, d]``, each graph through the hash
        ``graph_hash[b]`` of its replica's seed (one :func:`~rpfast.ops.rooted_pool` call)."""
        x = graph.x
        node_hash = graph_hash[graph.batch]
        start = (torch.bmm(self.hash_embed_weight[node_hash].to(x.dtype), x.unsqueeze(-1)).squeeze(-1)
                 + self.hash_embed_bias[node_hash].to(x.dtype))  # [N, d]: each node's seed's input map
        scale = self.hashes[0]._neighbour_scale(graph, x.dtype)
        tensors = [t.to(x.dtype) for t in (self.hash_marker, self.hash_own, self.hash_passed, self.hash_bias)]
        return lambda roots: rooted_pool(start, *tensors, scale, roots, graph_hash, graph)


def _same_hash(one: RootedRP, other: RootedRP) -> bool:
    """Whether two rooted parts have the same rounds (all but their read-outs)."""
    theirs = other.state_dict()
    return all(k.startswith("read.") or torch.equal(v, theirs[k]) for k, v in one.state_dict().items())
