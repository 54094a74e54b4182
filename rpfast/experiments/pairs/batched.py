"""The protocol of :mod:`~rpfast.experiments.pairs.protocol` on many pairs and seeds at once,
for the oriented model: one :class:`~rpfast.experiments.pairs.stack.OrientedStack` per group of
pairs of one shape, one optimizer step for the whole stack.

Each replica (a pair and a seed) is prepared exactly as :func:`run_pair` prepares it (its
generator, its relabelings, its model's initial weights, in that order), trains on its own loss
with its own stopping rule, and is evaluated on its own draws, so a pair gives the same T2 alone
and inside a stack, to the rounding of batched products. What the stack shares is the work: the
views of all replicas gathered in one call, f as batched products, the rooted rounds run once
over the union graph, one backward and one Adam step per training step.

Training follows :func:`~rpfast.experiments.training.fit` per replica: a full-batch step per
epoch; a replica stops when its loss has not improved by ``1e-6`` for ``patience`` steps (its
weights then stay as they are), or at its first loss (or weight) that is not finite (its weights
go back to those that gave its last finite loss; in its first step, to its initial weights).
A stopped replica's weights are put back after every later step of the stack, and its
generators are not drawn from again.

Memory: a step's views are split into chunks of replicas (a replica's views stay together: its
batch statistics need all of them), evaluations into chunks of replicas and graphs, each within
:data:`VIEW_ELEMENTS`; a replica whose training views alone exceed it is refused with the bound.
"""
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch.nn import functional as F

from rpfast.data import GraphBatch
from rpfast.datasets.pairs import GraphPair
from rpfast.experiments.pairs.models import (ROOT_BUDGET_DEGREE, ROW_COST_DEGREES, STACKED_MODELS, build_model,
                                             rooted_hash, rooted_roots, rooted_work)
from rpfast.experiments.pairs.replicas import batch_of, pair_max_degree, pair_row, relabeled, replica_seed
from rpfast.experiments.pairs.stack import OrientedStack, shared_hash
from rpfast.experiments.training import improves
from rpfast.nn.rp.strategies import Relabelings

__all__ = ["run_stack", "stack_key", "plan_stacks", "replica_cost", "stacks", "VIEW_ELEMENTS", "MAX_REPLICAS"]

#: the most view entries (views x K x K) of one forward: a training chunk or an evaluation chunk
#: (32 MB of float32 views, what the pair-by-pair protocol's eval call of 32 graphs x 256 views
#: of 32 positions holds; 8 times more was slower: the eval of a 64-vertex pair took 10.4 s in
#: forwards of 2^26 entries, 5.7 s in forwards of 2^23)
VIEW_ELEMENTS = 1 << 23
#: the improvement of a replica's loss that resets its patience (run_pair's, through fit)
MIN_DELTA = 1e-6
#: the most replicas (pairs x seeds) of one stack: their weights, gradients, Adam moments and two
#: snapshots take about 2 MB each at the default shape
MAX_REPLICAS = 128


def stacks(settings) -> bool:
    """Whether the model of ``settings`` (a ``PairsSettings``) trains as a stack: one of
    ``STACKED_MODELS``, with an output of at least 8 coordinates (the rooted part's share)."""
    return settings.model in STACKED_MODELS and settings.output_dim >= 8


def stack_key(pair: GraphPair, max_degree: int) -> Tuple[int, int]:
    """Pairs that can share a stack: the same size and largest degree (the model's shape)."""
    return pair.n, max_degree


#: a replica's cost beside its rooted eval average, in rows at the reference degree per vertex:
#: its views, walk counts and training (measured here: about 40 us a row of the rooted eval
#: average, all 128 embeddings and 16 rounds; 0.4 s for the rest of a 10-vertex pair, 1.2 to
#: 1.8 s for one of 36 to 80 vertices)
OTHER_COST_ROWS_PER_VERTEX = 500
#: a stack holds at most ``1 / (STACKS_PER_WORKER * workers)`` of a run's estimated cost, so the
#: worker that takes the last stack ends at most about ``1 / STACKS_PER_WORKER`` of its share of
#: the work after the others
STACKS_PER_WORKER = 4


def replica_cost(pair: GraphPair) -> float:
    """A replica's relative cost (pairs of one run on one machine), in rows at the reference
    degree: the work of the rooted part's exact eval average
    (:func:`~rpfast.experiments.pairs.models.rooted_work` with
    :func:`~rpfast.experiments.pairs.models.rooted_roots`), which takes most of the time of every
    pair above 30 vertices, plus :data:`OTHER_COST_ROWS_PER_VERTEX` a vertex."""
    degree = pair_max_degree(pair)
    rooted = rooted_work(pair.n, rooted_roots(pair.n, degree), degree) / (ROOT_BUDGET_DEGREE + ROW_COST_DEGREES)
    return rooted + OTHER_COST_ROWS_PER_VERTEX * pair.n


def plan_stacks(todo: Sequence[Tuple[GraphPair, int]], workers: int = 1) -> List[List[Tuple[GraphPair, int]]]:
    """The stacks of a run, the costliest first: the ``(pair, seed)`` jobs of ``todo`` grouped by
    :func:`stack_key`, each group cut into nearly equal stacks of at most :data:`MAX_REPLICAS`
    replicas and at most a ``1 / (STACKS_PER_WORKER * workers)`` share of the run's
    :func:`replica_cost` (at least one replica). Workers take the stacks in this order as they
    free up, so the ``workers`` processes end within about one small stack of each other (the
    rooted eval, most of the time, runs replica by replica: cutting a group costs little)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    groups: Dict[Tuple[int, int], List[Tuple[GraphPair, int]]] = {}
    for pair, seed in todo:
        groups.setdefault(stack_key(pair, pair_max_degree(pair)), []).append((pair, seed))
    share = sum(replica_cost(pair) for pair, _ in todo) / (STACKS_PER_WORKER * workers)
    stacks = []
    for group in groups.values():
        each = replica_cost(group[0][0])  # one shape: one cost
        most = max(1, min(MAX_REPLICAS, int(share // each)))
        count = math.ceil(len(group) / most)
        stacks += [group[i * len(group) // count:(i + 1) * len(group) // count] for i in range(count)]
    stacks.sort(key=lambda stack: (-len(stack) * replica_cost(stack[0][0]), -stack[0][0].n))
    return stacks


@dataclass
class _Replica:
    """One pair and seed: what :func:`run_pair` draws before training, and its results."""

    pair: GraphPair
    seed: int
    generator: torch.Generator
    g_views: List[torch.Tensor]
    h_views: List[torch.Tensor]
    train: GraphBatch  # the interleaved G_1, H_1, G_2, ... on the host
    epochs: int = 0
    loss: float = math.nan
    losses: List[float] = field(default_factory=list)


def _prepare(pair: GraphPair, seed: int, settings, max_degree: int) -> Tuple[_Replica, torch.nn.Module]:
    generator = torch.Generator().manual_seed(replica_seed(pair, seed))
    torch.manual_seed(replica_seed(pair, seed))
    q, n = settings.relabelings, pair.n
    g_views, h_views = relabeled(pair.g, n, q, generator), relabeled(pair.h, n, q, generator)
    train = batch_of([view for both in zip(g_views, h_views) for view in both], n)
    model = build_model(settings, n, generator, max_degree=max_degree)
    return _Replica(pair, seed, generator, g_views, h_views, train), model


def _chunks(replicas: int, per_replica: int, what: str) -> List[slice]:
    """Consecutive slices of the ``replicas``, each within :data:`VIEW_ELEMENTS` view entries."""
    if per_replica > VIEW_ELEMENTS:
        raise MemoryError(f"one replica's {what} views hold {per_replica:,} entries, above the "
                          f"{VIEW_ELEMENTS:,} of one forward (VIEW_ELEMENTS): use a smaller --k or fewer samples")
    size = max(1, VIEW_ELEMENTS // per_replica)
    return [slice(first, min(first + size, replicas)) for first in range(0, replicas, size)]


class _Weights:
    """The stack's per-replica tensors (stacked parameters and buffers, leading axis P): snapshots
    of them, and which replicas are frozen at which values."""

    def __init__(self, stack: OrientedStack):
        P = stack.replicas
        self.tensors = stack.stacked()
        self.frozen = torch.zeros(P, dtype=torch.bool)
        self.kept = [t.detach().clone() for t in self.tensors]

    def copy(self, into: Optional[List[torch.Tensor]] = None) -> List[torch.Tensor]:
        """A snapshot of every replica (written over ``into``, an earlier one, when given)."""
        if into is None:
            return [t.detach().clone() for t in self.tensors]
        with torch.no_grad():
            for copy, t in zip(into, self.tensors):
                copy.copy_(t)
        return into

    def finite(self) -> torch.Tensor:
        """``[P]``: whether every weight and buffer of each replica is finite."""
        ok = torch.ones(self.frozen.shape[0], dtype=torch.bool, device=self.tensors[0].device)
        for t in self.tensors:
            ok &= torch.isfinite(t.detach()).flatten(1).all(dim=1)
        return ok.cpu()

    def freeze(self, replica: int, values: Optional[List[torch.Tensor]] = None) -> None:
        """Keep ``replica`` at ``values`` (a snapshot; None: where it is now) from here on."""
        with torch.no_grad():
            for kept, t, source in zip(self.kept, self.tensors, values or self.tensors):
                kept[replica] = source[replica]
                t[replica] = source[replica]
        self.frozen[replica] = True

    def hold(self) -> None:
        """Put the frozen replicas back (after a step moved them)."""
        if self.frozen.any():
            index = self.frozen.nonzero().flatten().to(self.tensors[0].device)
            with torch.no_grad():
                for kept, t in zip(self.kept, self.tensors):
                    t.index_copy_(0, index, kept.index_select(0, index))


def _train(stack: OrientedStack, replicas: List[_Replica], settings, device: torch.device) -> None:
    """Train every replica (module docstring); sets each one's ``epochs``, ``loss`` and ``losses``."""
    P, q, n = len(replicas), settings.relabelings, replicas[0].pair.n
    K = stack.strategy.size
    parts = _chunks(P, 2 * q * stack.strategy.train_samples * K * K, "training")
    unions = [batch_of([v for r in replicas[part] for both in zip(r.g_views, r.h_views) for v in both], n).to(device)
              for part in parts]
    weights = _Weights(stack)
    optimizer = torch.optim.Adam([p for p in stack.parameters() if p.requires_grad], lr=settings.lr)
    target = -torch.ones(1, device=device)
    scratch = torch.Generator().manual_seed(0)  # the draws a stopped replica makes, never used
    best: List[Optional[float]] = [None] * P
    stale = [0] * P
    previous, begun = weights.copy(), weights.copy()  # where the last step and this one started
    stack.train()
    for _ in range(settings.epochs):
        if bool(weights.frozen.all()):
            break
        previous, begun = begun, weights.copy(into=previous)
        optimizer.zero_grad(set_to_none=False)
        losses = []
        for part, union in zip(parts, unions):
            members = replicas[part]
            generators = [scratch if weights.frozen[i] else r.generator
                          for i, r in zip(range(P)[part], members)]
            hosts = [r.train for r in members]
            draws = stack.draw(hosts, generators)
            roots = stack.draw_roots(hosts, generators)
            out = stack(union, draws, roots, part)  # [p, 2Q, out]
            per_pair = F.cosine_embedding_loss(out[:, 0::2].reshape(-1, out.shape[-1]),
                                               out[:, 1::2].reshape(-1, out.shape[-1]),
                                               target.expand(out.shape[0] * q), reduction="none")
            per_pair = per_pair.view(-1, q).mean(dim=1)
            live = (~weights.frozen[part]).to(device) & torch.isfinite(per_pair.detach())
            torch.where(live, per_pair, torch.zeros_like(per_pair)).sum().backward()
            losses.append(per_pair.detach())
        values = torch.cat(losses).cpu().tolist()
        optimizer.step()
        finite = weights.finite()
        for i, (replica, value) in enumerate(zip(replicas, values)):
            if weights.frozen[i]:
                continue
            if not (math.isfinite(value) and finite[i]):  # diverged: back to the last finite step's start
                weights.freeze(i, previous if replica.epochs else begun)
                continue
            replica.epochs += 1
            replica.losses.append(value)
            if improves(value, best[i], MIN_DELTA, maximize=False):  # fit's patience rule
                best[i], stale[i] = value, 0
            else:
                stale[i] += 1
            if stale[i] >= settings.patience:
                weights.freeze(i)
        weights.hold()
    for replica in replicas:
        replica.loss = replica.losses[-1] if replica.losses else math.nan


def _eval_draws(stack: OrientedStack, replica: _Replica, settings) -> Tuple[List[torch.Tensor], Relabelings]:
    """The replica's evaluation graphs (G's Q relabelings, H's, then 2Q of one member chosen by
    its generator) and their views, drawn in :func:`run_pair`'s order."""
    n, q, generator = replica.pair.n, settings.relabelings, replica.generator
    g = stack.strategy.relabel(batch_of(replica.g_views, n), False, generator)
    h = stack.strategy.relabel(batch_of(replica.h_views, n), False, generator)
    member = replica.pair.g if torch.randint(2, (1,), generator=generator).item() == 0 else replica.pair.h
    twice_views = relabeled(member, n, 2 * q, generator)
    twice = stack.strategy.relabel(batch_of(twice_views, n), False, generator)
    graphs = replica.g_views + replica.h_views + twice_views
    return graphs, Relabelings(torch.cat([g.perms, h.perms, twice.perms]),
                               torch.cat([g.weights, h.weights, twice.weights]))


def _evaluate(stack: OrientedStack, replicas: List[_Replica], settings, device: torch.device) -> List[torch.Tensor]:
    """Each replica's embeddings of its ``4 Q`` evaluation graphs, ``[4Q, out]`` float64 on the CPU."""
    stack.eval()
    n, K = replicas[0].pair.n, stack.strategy.size
    drawn = [_eval_draws(stack, r, settings) for r in replicas]
    graphs = len(drawn[0][0])
    per_graph = settings.eval_samples * K * K
    block = max(1, min(graphs, VIEW_ELEMENTS // per_graph))
    parts = _chunks(len(replicas), block * per_graph, "evaluation")
    outputs = [[] for _ in replicas]
    with torch.no_grad():
        for part in parts:
            for first in range(0, graphs, block):
                rows = slice(first, min(first + block, graphs))
                members = drawn[part]
                union = batch_of([v for views, _ in members for v in views[rows]], n).to(device)
                draws = [Relabelings(d.perms[rows], d.weights[rows]) for _, d in members]
                out = stack(union, draws, None, part).double().cpu()
                for i, embedding in zip(range(len(replicas))[part], out):
                    outputs[i].append(embedding)
    return [torch.cat(chunks) for chunks in outputs]


def run_stack(jobs: Sequence[Tuple[GraphPair, int]], settings,
              device: torch.device = torch.device("cpu")) -> List[Dict]:
    """The protocol on every ``(pair, seed)`` of ``jobs`` (pairs of one :func:`stack_key`) as one
    stacked oriented model; the rows of :func:`run_pair`, in the order of ``jobs``."""
    settings.validate()
    if not stacks(settings):
        raise ValueError(f"model {settings.model} with {settings.output_dim} outputs does not train as a stack: "
                         f"the stacked models are {', '.join(STACKED_MODELS)} with at least 8 outputs")
    if not jobs:
        return []
    degrees = {pair_max_degree(pair) for pair, _ in jobs}
    if len({stack_key(pair, max_degree) for pair, _ in jobs for max_degree in degrees}) != 1:
        raise ValueError("run_stack takes pairs of one size and largest degree (stack_key; plan_stacks groups them)")
    max_degree = degrees.pop()
    prepared = [_prepare(pair, seed, settings, max_degree) for pair, seed in jobs]
    replicas, models = [r for r, _ in prepared], [m for _, m in prepared]
    for seed in {r.seed for r in replicas}:
        shared_hash([m for r, m in zip(replicas, models) if r.seed == seed], rooted_hash(seed))
    stack = OrientedStack(models).to(device)
    _train(stack, replicas, settings, device)
    embeddings = _evaluate(stack, replicas, settings, device)
    q = settings.relabelings
    rows = [pair_row(r.pair, r.seed, r.epochs, r.loss, e[:q], e[q:2 * q], e[2 * q:], settings.ridge)
            for r, e in zip(replicas, embeddings)]
    return rows
