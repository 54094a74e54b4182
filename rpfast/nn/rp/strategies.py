r"""Relabeling strategies for Relational Pooling: which relabelings f is averaged over.

A strategy turns a batch into ``Relabelings(perms [B, P, K], weights [B, P])``: ``P``
relabelings per graph in the gather convention (``perms[b, p, i]`` is the vertex placed at
position ``i``; -1 pads positions past the graph and whole padding rows), and the weight of
each in the graph's average (the weights of a graph sum to 1; padding rows weigh 0). RP then
computes :math:`\bar f(G) = \sum_p w_{b,p}\, f(A_{\pi_p,\pi_p}, X_{\pi_p})`.

``K``, the number of positions f sees, always comes from the strategy (``k``, or a declared
``max_nodes``), never from the batch: a model sees the same input width on every batch, and a
graph larger than declared is an error, not a silent truncation.

* :class:`Exact`: all :math:`n!` relabelings (eq. 1), for small graphs.
* :class:`~rpfast.nn.rp.PiSGD` (in :mod:`rpfast.nn.rp.pisgd`): uniformly random relabelings,
  fresh on every call (eq. 4): an unbiased estimate in training, the average of
  ``eval_samples`` in eval mode.
* :class:`KAry`: k-vertex induced subgraphs (eq. 5): every k-subset (optionally pruned) in every
  order, or in one order when f is invariant (Prop. 2.2), or sampled subsets.
* :class:`~rpfast.nn.rp.Oriented` (in :mod:`rpfast.nn.rp.oriented`): poly-canonical DFS/BFS
  orders (Sec. 2.3.1) from random, balanced or all starts, 1-WL colour orders, or RDKit's
  canonical atom order for molecules.

Stochastic strategies draw ``train_samples`` relabelings per graph in training and average
``eval_samples`` in eval mode; the consumer passes its module's ``training`` flag. Consumers:
:class:`~rpfast.nn.rp.RelationalPooling` (f on the relabeled dense graph),
:class:`~rpfast.nn.rp.RPGNN` (a GNN on one-hot IDs of the positions: :meth:`Strategy.node_positions`)
and :class:`~rpfast.nn.rp.SubgraphRP` (a GNN on the subgraph the positions induce).
"""
import abc
import itertools
import math
from typing import Iterable, Iterator, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from rpfast._uploads import upload
from rpfast._validation import check_count, check_int, check_memory, require_flag
from rpfast.data import GraphBatch
from rpfast.ops import k_subsets, sample_k_subsets
from rpfast.ops.subsets import Prune, _prune

__all__ = ["Relabelings", "NodePositions", "Strategy", "Exact", "KAry"]


class Relabelings(NamedTuple):
    """``perms [B, P, K]`` (gather convention, -1 padding) and ``weights [B, P]`` (each graph's
    weights sum to 1, or are all 0 for a graph with no admissible relabeling)."""

    perms: Tensor
    weights: Tensor


class NodePositions(NamedTuple):
    """``positions [P, N]``: the position of every node of the batch within its graph under
    relabeling ``p`` (mod the modulus asked for), and ``weights [B, P]`` as in
    :class:`Relabelings` (None: uniform, ``1/P`` for every graph)."""

    positions: Tensor
    weights: Optional[Tensor]


class Strategy(abc.ABC):
    """Base class: ``relabel(graph, training, generator)`` returns :class:`Relabelings`.

    Stochastic strategies set ``train_samples`` / ``eval_samples`` (relabelings per graph per
    call in each mode); the others leave them None (their count comes from the graphs)."""

    #: positions f sees (set by each strategy from its arguments; None: the input's width)
    size: Optional[int]
    train_samples: Optional[int] = None
    eval_samples: Optional[int] = None
    #: whether the relabelings depend on the edges (and features), not only on the graph sizes:
    #: RelationalPooling then copies the batch to the host, else it hands over the sizes alone
    needs_edges: bool = True

    def samples(self, training: bool) -> Optional[int]:
        """Relabelings per graph drawn in this mode (``train_samples`` when ``training``, else
        ``eval_samples``); None when the graphs fix the count (enumerations, all starts)."""
        training = require_flag(training, "training")
        return self.train_samples if training else self.eval_samples

    @abc.abstractmethod
    def relabel(self, graph: GraphBatch, training: bool, generator: Optional[torch.Generator] = None) -> Relabelings:
        """The relabelings of every graph of ``graph`` for one RP call (``training`` selects the
        sample count of stochastic strategies; ``generator`` makes them reproducible)."""

    def relabel_chunks(self, graph: GraphBatch, training: bool,
                       generator: Optional[torch.Generator] = None) -> Iterator[Relabelings]:
        """The same relabelings in consecutive blocks of ``P`` whose weights add up to those of
        :meth:`relabel`, so RP can evaluate f block by block in bounded memory. One block
        unless a strategy streams (:class:`Exact`)."""
        yield self.relabel(graph, training, generator)

    def node_positions(self, graph: GraphBatch, training: bool, generator: Optional[torch.Generator] = None,
                       modulus: Optional[int] = None) -> Iterable[NodePositions]:
        r"""Every node's position under the relabelings, block by block as :meth:`relabel_chunks`
        (ID-based RP, eq. 3: node ``v`` gets :math:`\pi^{-1}(v) \bmod m`).

        Inverts each block's ``perms``: ``positions[p, ptr[b] + perms[b, p, i]] = i`` (mod
        ``modulus`` when given). Every relabeling of positive weight must place every vertex of
        its graph: a ValueError names the first that does not (a ``size`` below the largest
        graph: a truncated k-ary view). Rows of weight 0 (padding, or a graph with no admissible
        relabeling, whose output is then 0) get position 0. The strategy runs on the CPU; the
        positions land on the graph's device."""
        _check_graph(graph)
        require_flag(training, "training")
        modulus = None if modulus is None else check_count(modulus, "modulus", minimum=1)
        on_cpu = graph.host()
        for perms, weights in self.relabel_chunks(on_cpu, training, generator):
            yield NodePositions(upload(self._invert(on_cpu, perms, weights, modulus), graph.device), weights)

    def _invert(self, graph: GraphBatch, perms: Tensor, weights: Tensor, modulus: Optional[int]) -> Tensor:
        """``[P, N]`` positions of the nodes under ``perms [B, P, K]`` (see :meth:`node_positions`)."""
        B, P, K = perms.shape
        placed = perms >= 0
        counts = placed.sum(dim=-1)
        short = (weights > 0) & (counts < graph.num_nodes.view(B, 1))
        if bool(short.any()):
            b, p = (int(v) for v in torch.nonzero(short)[0])
            raise ValueError(f"{self!r} places {int(counts[b, p])} of the {int(graph.num_nodes[b])} vertices of graph "
                             f"{b} (relabeling {p}): ID-based RP needs every vertex placed; use a size of at least "
                             "the largest graph, or PiSGD / Exact")
        positions = torch.zeros((P, graph.total_nodes), dtype=torch.int64)
        vertex = (perms + graph.ptr[:-1].view(B, 1, 1))[placed]
        sample = torch.arange(P).view(1, P, 1).expand(B, P, K)[placed]
        position = torch.arange(K).view(1, 1, K).expand(B, P, K)[placed]
        positions[sample, vertex] = position
        return positions if modulus is None else positions % modulus

    def relabel_dense(self, adj: Tensor, x: Tensor, num_nodes: Tensor,
                      training: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(adj_p [M, K, K, C], x_p [M, K, F], mask [M, K], weights [B, P])`` for compiled code:
        the relabeled dense graphs in one op with static shapes. Only :class:`PiSGD` has one;
        the other strategies yield data-dependent shapes."""
        raise NotImplementedError(
            f"torch.compile of RelationalPooling supports PiSGD relabelings on dense input; {self!r} yields "
            "data-dependent shapes. Compile the encoder instead: rp.f = torch.compile(rp.f)")

    def _check_sizes(self, graph: GraphBatch, limit: int, what: str) -> None:
        if graph.num_graphs and graph.n_max > limit:
            b = int(torch.nonzero(graph.num_nodes > limit)[0, 0])
            raise ValueError(f"graph {b} has {int(graph.num_nodes[b])} vertices, more than the {what} = {limit} "
                             f"this {type(self).__name__} strategy was declared with")


def _check_graph(graph) -> None:
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")


def _uniform(perms: Tensor) -> Relabelings:
    """Equal weights over the P rows of every graph."""
    B, P = perms.shape[:2]
    return Relabelings(perms, torch.full((B, P), 1.0 / P if P else 0.0, dtype=torch.float64))


def _pad_rows(rows_per_graph, K: int, totals=None) -> Relabelings:
    """Stack per-graph ``[P_b, K]`` row sets into ``[B, max P_b, K]`` (-1 rows pad) with weights
    ``1 / P_b`` on the real rows (``1 / totals[b]`` when the rows are one block of more)."""
    B = len(rows_per_graph)
    P = max((len(r) for r in rows_per_graph), default=0)
    check_memory(B * P * K * 8, f"{B} x {P} relabelings of {K} positions", "use PiSGD or sample the subsets")
    perms = torch.full((B, P, K), -1, dtype=torch.int64)
    weights = torch.zeros(B, P, dtype=torch.float64)
    for b, rows in enumerate(rows_per_graph):
        if len(rows):
            perms[b, :len(rows), :rows.shape[1]] = rows
            weights[b, :len(rows)] = 1.0 / (len(rows) if totals is None else totals[b])
    return Relabelings(perms, weights)


def _all_orders(k: int) -> Tensor:
    """``[k!, k]``: every permutation of ``0..k-1`` in lexicographic order (``[1, 0]`` for k = 0:
    an empty graph has one, empty, relabeling)."""
    return torch.tensor(list(itertools.permutations(range(k))), dtype=torch.int64).reshape(math.factorial(k), k)


class Exact(Strategy):
    r"""All :math:`n!` relabelings of every graph (eq. 1): exactly invariant, for small graphs.

    The relabelings are streamed in lexicographic order, in blocks that share a prefix and run
    through every order of the remaining ``m`` vertices (``m! <= chunk_size``), and RP evaluates
    f block by block: memory stays bounded even for 11! = 39.9 M relabelings, and the time is
    that of n! evaluations of f.

    Args:
        max_nodes: the largest graph accepted, also the ``K`` positions f sees (at most 11).
        chunk_size: the most relabelings per graph in one block (default 8! = 40320).
    """

    MAX_NODES = 11

    def __init__(self, max_nodes: int, chunk_size: int = math.factorial(8)):
        self.size = check_count(max_nodes, "max_nodes", minimum=1)
        if self.size > self.MAX_NODES:
            raise ValueError(f"Exact RP enumerates n! relabelings; max_nodes = {self.size} is above "
                             f"{self.MAX_NODES} ({math.factorial(self.size):.3g} relabelings per graph): use PiSGD, "
                             f"KAry or Oriented")
        self.chunk_size = check_count(chunk_size, "chunk_size", minimum=1)
        self._suffix = max(m for m in range(self.size + 1) if math.factorial(m) <= self.chunk_size)
        self.needs_edges = False  # every order of each graph's vertices: the sizes decide

    def relabel(self, graph, training, generator=None):
        self._check_sizes(graph, self.size, "max_nodes")
        return next(self._blocks(graph, suffix=self.size))

    def relabel_chunks(self, graph, training, generator=None):
        self._check_sizes(graph, self.size, "max_nodes")
        return self._blocks(graph, suffix=self._suffix)

    def _blocks(self, graph: GraphBatch, suffix: int) -> Iterator[Relabelings]:
        """Block q of graph b: the permutations of ranks ``q m! .. (q+1) m! - 1``, ``m = min(n_b, suffix)``."""
        sizes = graph.num_nodes.tolist()
        totals = [math.factorial(n) for n in sizes]
        orders = {m: _all_orders(m) for m in {min(n, suffix) for n in sizes}}
        blocks = [total // math.factorial(min(n, suffix)) for n, total in zip(sizes, totals)]
        for q in range(max(blocks, default=1)):
            rows = [_permutation_block(n, q, orders[min(n, suffix)]) if q < count else torch.empty(0, n, dtype=torch.int64)
                    for n, count in zip(sizes, blocks)]
            yield _pad_rows(rows, self.size, totals)

    def __repr__(self):
        return f"Exact(max_nodes={self.size})"


def _permutation_block(n: int, q: int, suffix_orders: Tensor) -> Tensor:
    """``[m!, n]``: the permutations of ``0..n-1`` of lexicographic ranks ``q m! .. (q+1) m! - 1``
    for ``suffix_orders = all orders of 0..m-1``. They share the first ``n - m`` entries (those of
    rank ``q m!``, read off its Lehmer code) and run through every order of the other ``m``."""
    m = suffix_orders.shape[1]
    remaining, rank, prefix = list(range(n)), q * math.factorial(m), []
    for i in range(n - m):
        digit = (rank // math.factorial(n - 1 - i)) % (n - i)
        prefix.append(remaining.pop(digit))
    rest = torch.tensor(remaining, dtype=torch.int64)[suffix_orders]  # remaining stays sorted
    return torch.cat([torch.tensor(prefix, dtype=torch.int64).expand(len(rest), -1), rest], dim=1)


class KAry(Strategy):
    r"""k-ary Relational Pooling (eq. 5): f sees the subgraphs induced by k vertices.

    .. math:: \bar f^{(k)}(G) = \frac{1}{|\mathcal S|}\sum_{S \in \mathcal S}\ \frac{1}{k!}
              \sum_{\pi \in \Pi_k} f(A_{S_\pi, S_\pi}, X_{S_\pi})

    Args:
        k: subset size, the ``K`` positions f sees (at most 11 with ``order="all"``).
        subsets: ``"all"`` (every kept k-subset) or ``"sample"`` (uniform kept subsets, fresh each
            call: ``train_samples`` per graph in training, an unbiased estimate, and the average
            of ``eval_samples`` in eval mode).
        prune: which subsets are dropped, as in :func:`rpfast.ops.k_subsets` (``"none"``,
            ``"edgeless"``, ``"isolated"``, ``"disconnected"``).
        order: ``"all"`` (all k! orders of each subset), ``"invariant"`` (one order, ascending
            vertex ids: enough when f is itself permutation-invariant, Prop. 2.2, so the sum has
            C(n, k) terms instead of n!/(n-k)!) or ``"random"`` (one uniformly random order per
            subset, fresh each call: pi-SGD within the subset).
        train_samples, eval_samples: subsets per graph with ``subsets="sample"`` in training
            (default 1) and in eval mode (default 5); ``subsets="all"`` takes neither.
        chunk_size: with ``order="all"``, the most relabelings per graph in one block that RP
            hands to f (default 8! = 40320). The k! orders are generated block by block, as
            :class:`Exact` does: the ``S`` subsets of a graph times the orders of one block.

    A graph with no kept subset (fewer than k vertices, or all pruned) gets weight 0
    everywhere: its RP output is 0.
    """

    def __init__(self, k: int, subsets: str = "all", prune="none", order: str = "all",
                 train_samples: Optional[int] = None, eval_samples: Optional[int] = None,
                 chunk_size: int = math.factorial(8)):
        self.size = self.k = check_int(k, "k", minimum=1)
        if subsets not in ("all", "sample"):
            raise ValueError(f"subsets must be 'all' or 'sample', got {subsets!r}")
        if order not in ("all", "invariant", "random"):
            raise ValueError(f"order must be 'all', 'invariant' or 'random', got {order!r}")
        if order == "all" and self.k > Exact.MAX_NODES:
            raise ValueError(f"KAry(order='all') averages f over all k! orders of every subset; k = {self.k} is above "
                             f"{Exact.MAX_NODES} ({_factorial_text(self.k)} orders per subset): use "
                             "order='invariant' (for an f that is itself invariant) or order='random'")
        if subsets == "all" and (train_samples is not None or eval_samples is not None):
            raise ValueError("train_samples and eval_samples are for subsets='sample' (subsets='all' takes every "
                             "kept subset)")
        self.subsets, self.order = subsets, order
        self.prune = _prune(prune)
        self.needs_edges = self.prune != Prune.NONE  # without pruning, every k-subset: the sizes decide
        if subsets == "sample":
            self.train_samples, self.eval_samples = _sample_counts(train_samples, eval_samples, 1, 5)
        self.chunk_size = check_count(chunk_size, "chunk_size", minimum=1)

    def relabel(self, graph, training, generator=None):
        per_graph = self._subsets(graph, training, generator)
        if self.order == "all":
            return next(self._ordered_blocks(per_graph, suffix=self.k))
        if self.order == "random":
            keys = [torch.rand(s.shape, generator=generator, dtype=torch.float32) for s in per_graph]  # any default dtype
            per_graph = [s.gather(1, key.argsort(dim=1)) for s, key in zip(per_graph, keys)]
        return _pad_rows(per_graph, self.k)

    def relabel_chunks(self, graph, training, generator=None):
        if self.order != "all":
            yield self.relabel(graph, training, generator)
            return
        per_graph = self._subsets(graph, training, generator)
        most = max((len(s) for s in per_graph), default=0)
        suffix = max([m for m in range(1, self.k + 1) if most * math.factorial(m) <= self.chunk_size], default=1)
        yield from self._ordered_blocks(per_graph, suffix)

    def _subsets(self, graph: GraphBatch, training: bool, generator) -> List[Tensor]:
        """The kept k-subsets of every graph: ``[S_b, k]`` each, ascending vertex ids."""
        if self.subsets == "all":
            rows, ptr = k_subsets(graph, self.k, self.prune)
            return [rows[ptr[b]:ptr[b + 1]] for b in range(graph.num_graphs)]
        drawn = sample_k_subsets(graph, self.k, self.samples(training), prune=self.prune, generator=generator)
        return [d[(d >= 0).all(dim=1)] for d in drawn]  # graphs without subsets give -1 rows

    def _ordered_blocks(self, per_graph: List[Tensor], suffix: int) -> Iterator[Relabelings]:
        """Every subset in every order, in ``k! / m!`` blocks (``m = min(k, suffix)``): block q puts
        each subset of graph b in the orders of lexicographic ranks ``q m! .. (q+1) m! - 1``
        (``[S_b * m!, k]`` rows), each of weight ``1 / (S_b k!)``. The budget is checked before
        any block is built."""
        m = min(self.k, suffix)
        most = max((len(s) for s in per_graph), default=0)
        check_memory(len(per_graph) * most * math.factorial(m) * self.k * 8 * 2,
                     f"{len(per_graph)} graphs x {most} subsets x {math.factorial(m)} orders of {self.k} positions",
                     "use order='invariant' or 'random', sample the subsets, or a smaller chunk_size")
        totals = [len(s) * math.factorial(self.k) for s in per_graph]
        suffix_orders = _all_orders(m)
        for q in range(math.factorial(self.k) // math.factorial(m)):
            orders = _permutation_block(self.k, q, suffix_orders)  # [m!, k]
            yield _pad_rows([s[:, orders].reshape(-1, self.k) for s in per_graph], self.k, totals)

    def __repr__(self):
        extra = (f", train_samples={self.train_samples}, eval_samples={self.eval_samples}"
                 if self.subsets == "sample" else "")
        return f"KAry(k={self.k}, subsets={self.subsets!r}, prune={self.prune.value!r}, order={self.order!r}{extra})"


def _factorial_text(k: int) -> str:
    """``k!`` for a message: ``3.99e+07``, or ``about 1e2568`` when too large for a float."""
    if k <= 170:
        return f"{float(math.factorial(k)):.3g}"
    return f"about 1e{int(math.lgamma(k + 1) / math.log(10))}"


def _sample_counts(train_samples, eval_samples, train_default: int, eval_default: int) -> Tuple[int, int]:
    """``(train_samples, eval_samples)``, each checked ``>= 1``, None replaced by its default."""
    return (train_default if train_samples is None else check_count(train_samples, "train_samples", minimum=1),
            eval_default if eval_samples is None else check_count(eval_samples, "eval_samples", minimum=1))
