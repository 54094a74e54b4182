r"""RP over marked vertices: a message-passing f that sees the vertices at the first ``roots``
positions of a relabeling, averaged exactly over every choice of them.

RP-GIN (eq. 3) gives every vertex the one-hot ID of its position. Keeping only one bit of it,
whether a vertex sits at one of the first k positions (a marker on the set
``S = {pi(0), ..., pi(k-1)}``), makes f depend on the relabeling through ``S`` alone, so the RP
average over all ``n!`` relabelings is the average over the ``C(n, k)`` sets: exact at the cost
of ``C(n, k)`` passes, where the full ID needs sampling. Message passing from marked vertices is
colour refinement with those vertices individualised, which separates graphs that 1-WL cannot.
One root (k = 1) separates the Cai-Fuerer-Immerman pairs whose base loses all its cycles with
one vertex (the twist shows once the refinement wraps around a cycle); two roots those whose
base needs two (the 4-rung ladder, K4, K3,3, the prism), and strongly regular graphs with equal
parameters that differ in the common neighbours of two vertices (the generalized quadrangles
W(3) and Q(4, 3)), which one root and the 3-WL test do not separate.
"""
import math
from typing import Callable, Iterable, Iterator, Optional, Tuple

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast._validation import check_count, check_real, require_flag
from rpfast.data import GraphBatch
from rpfast.nn._unsupported import NotScriptable
from rpfast.nn.graph_input import read_graph_input
from rpfast.ops import graph_sum, rooted_pool, rooted_round

__all__ = ["RootedRP"]


class RootedRP(NotScriptable, nn.Module):
    r"""Relational Pooling over roots: k marked vertices, averaged over every k-set exactly.

    For a graph with adjacency :math:`A`, features :math:`x_v` and a set :math:`S` of k roots:

    .. math::
        h^0_v &= \cos(W_{in} x_v + b_{in} + [v \in S]\, u) \\
        h^{l+1}_v &= \cos\big(W_l\, [\,h^l_v \,;\, s_G (h^l_v + \textstyle\sum_{u \to v} h^l_u)\,] + b_l\big)
            \qquad l = 0, \dots, L - 1 \\
        f_S(G) &= \mathrm{MLP}\big(\tfrac{1}{n} \textstyle\sum_v h^L_v\big), \qquad
        \bar f(G) = \binom{n}{k}^{-1} \textstyle\sum_{|S| = k} f_S(G)

    (:math:`u` a marker, :math:`s_G = 4 / (1 + \bar d_G)` for the graph's mean degree
    :math:`\bar d_G`, the MLP ``hidden`` wide with tanh; all learned, or the MLP alone with
    ``learn_rounds=False``). This is RP-GIN whose only ID is whether a vertex sits at one of the
    first k positions, so :math:`\bar f` is the exact RP average over all relabelings (a graph
    with fewer than k vertices marks them all). In eval mode every k-set is a root set, in blocks
    of at most ``block_sets`` sets and ``block_elements`` activations: :math:`\binom{n}{k} \cdot n`
    rows of width d per graph, so k = 2 costs about n/2 times k = 1. In training each graph draws
    ``train_roots`` sets uniformly, with replacement (an unbiased estimate of the average, as
    pi-SGD's).

    Why the cosine, and the gain: the first round in which rooted refinement tells two CFI graphs
    apart can be the sixth to ninth, and the difference is one neighbour's colour among a few. A
    contracting network (tanh with the usual initialisation) carries it to the output at 1e-10
    to 1e-17 of the outputs' size (in float64, on CFI pairs over the diamond, K2,3 and a 3-rung
    ladder): below float32 rounding. A periodic activation with weights drawn at ``init_gain``
    times the usual scale (:math:`\mathcal N(0, g^2 / 2d)`) spreads nearby inputs apart, but it
    spreads float32 rounding too, and rounding enters at every round while the difference
    enters late. Measured in float32 with random weights (16 rounds, d = 8) on six such pairs:
    at g = 1.25 the two graphs' outputs differ by 1.5e-3 to 1.7e-2 while the spread over 32
    relabelings stays below 1e-4 (T2 3e4 to 6e8; with d = 4, 3e6 to 4.5e9); at g = 3 (12
    rounds) that spread grows to 5e-3 and the smallest difference drowns (T2 52), at g = 4 all
    do; at g = 1 (12 rounds) the network contracts again (T2 5 to 20 on four of the six).

    The rounds' weights are g times a matrix with orthonormal rows (entries of the scale of
    :math:`\mathcal N(0, g^2 / 2d)`, no direction shrunk): Gaussian draws of a 4 x 8 matrix are
    sometimes near singular, and a round that contracts one direction loses what it carried. On
    six draws of random weights, the difference between the two graphs over the spread across
    relabelings of the pooled rounds fell to 0.8 on the generalized quadrangles W(3) / Q(4, 3)
    (two roots) with Gaussian weights and stayed at 12 or more with orthogonal ones; over eight
    CFI pairs (one and two roots) the smallest ratio was 133 Gaussian, 322 orthogonal.

    Args:
        in_dim: node feature width F (the constant 1 for featureless graphs).
        hidden: width d of the rounds and the MLP.
        num_layers: L, rounds of message passing (a difference seen first in round t needs L >= t).
        out_dim: output width.
        train_roots: root sets per graph in a training forward.
        roots: k, the vertices marked at once (1 to 3).
        generator: CPU ``torch.Generator`` for reproducible roots (the weights come from torch's
            global seed).
        init_gain: g, the scale of the rounds' initial (orthogonal) weights.
        block_elements: the most activations (root sets x nodes x d) per block in eval mode (the
            memory of one round's tensors: 16 MB each in float32 at the default).
        block_sets: the most root sets per block in eval mode. The rounds work on runs of one
            value per set, and longer runs were faster up to 64 (an eval pass over 64 relabelings
            of a 64-vertex graph with two roots: 1.9 s with 64 sets per block, 2.9 s with 16, 5.0 s
            with 8; of a 200-vertex graph with one root, 1.3 s with 64 and 1.7 s with 8).
        learn_rounds: False keeps the input map, the marker and the rounds at their random
            initialisation (a fixed random hash of the rooted colours; only the read-out MLP
            learns, and training skips the backward through the rounds: about a third of the
            cost of a training step).

    Shapes: ``forward(x [N, in_dim], graph)`` with a :class:`~rpfast.data.GraphBatch`, or any input
    of :func:`~rpfast.nn.graph_input.read_graph_input` -> ``[B, out_dim]`` (0 for an empty graph).
    """

    #: the most vertices marked at once
    MAX_ROOTS = 3
    #: the mean degree at which the neighbour sum is unscaled (that of the CFI graphs over
    #: 3-regular bases, on which ``init_gain`` was measured)
    REFERENCE_DEGREE = 3

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, train_roots: int = 4,
                 generator: Optional[torch.Generator] = None, init_gain: float = 1.25,
                 block_elements: int = 1 << 22, learn_rounds: bool = True, roots: int = 1, block_sets: int = 64):
        super().__init__()
        in_dim, hidden = check_count(in_dim, "in_dim", 1), check_count(hidden, "hidden", 1)
        num_layers, out_dim = check_count(num_layers, "num_layers", 1), check_count(out_dim, "out_dim", 1)
        self.train_roots = check_count(train_roots, "train_roots", 1)
        self.roots = check_count(roots, "roots", 1)
        if self.roots > self.MAX_ROOTS:
            raise ValueError(f"roots must be at most {self.MAX_ROOTS} (an eval pass costs C(n, roots) * n rows), "
                             f"got {roots}")
        self.block_elements = check_count(block_elements, "block_elements", 1)
        self.block_sets = check_count(block_sets, "block_sets", 1)
        init_gain = check_real(init_gain, "init_gain")
        if not init_gain > 0:
            raise ValueError(f"init_gain must be positive, got {init_gain!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.generator = generator
        self.embed = nn.Linear(in_dim, hidden)
        self.marker = nn.Parameter(torch.randn(hidden))
        self.rounds = nn.ModuleList(nn.Linear(2 * hidden, hidden) for _ in range(num_layers))
        with torch.no_grad():
            for layer in self.rounds:
                nn.init.orthogonal_(layer.weight, gain=init_gain)  # rows of norm g: entries ~ g / sqrt(2d)
        self.read = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out_dim))
        self.learn_rounds = require_flag(learn_rounds, "learn_rounds")
        for part in (self.embed, self.rounds):
            part.requires_grad_(self.learn_rounds)
        self.marker.requires_grad_(self.learn_rounds)

    def forward(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None) -> Tensor:
        x, graph = read_graph_input(type(self).__name__, data, edge_index, batch, training=self.training)
        if x is None:
            raise ValueError("RootedRP needs node features x (use a column of ones for featureless graphs)")
        if x.dim() != 2 or x.shape[1] != self.embed.in_features or not x.is_floating_point():
            raise ValueError(f"RootedRP was built for float x [N, {self.embed.in_features}], got {tuple(x.shape)} "
                             f"{x.dtype}")
        return self.average(x, graph, self._roots(graph), self.read)

    def average(self, x: Tensor, graph: GraphBatch, blocks: Iterable[Tuple[Tensor, Tensor]],
                read: Callable[[Tensor], Tensor], pool: Optional[Callable[[Tensor], Tensor]] = None) -> Tensor:
        """``[B, out]``: the sum over the root sets S of ``w_S read(mean_v h^L_v)``, the root sets of
        ``blocks`` (``(roots [R, B, k], weights [R, B])`` on the graph's device, as :meth:`_roots`
        yields them), with ``read`` mapping the pooled states ``[R, B, d]`` to ``[R, B, out]``
        (``self.read``; a stack of read-outs in
        :class:`~rpfast.experiments.pairs.stack.OrientedStack`) and ``pool`` mapping a block's
        roots to its pooled states (None: :meth:`pooled` of this module's rounds)."""
        if pool is None:
            pool = self.pooled(x, graph)
        total = None
        for roots, weights in blocks:
            per_root = read(pool(roots))  # [R, B, out]
            term = (per_root * weights.to(x.dtype).unsqueeze(-1)).sum(dim=0)
            total = term if total is None else total + term
        return total

    def pooled(self, x: Tensor, graph: GraphBatch) -> Callable[[Tensor], Tensor]:
        """The map from a block's root sets ``roots [R, B, k]`` to the pooled states ``[R, B, d]``
        (the mean over each graph's vertices of ``h^L``) of this module's rounds on ``graph``.

        The one place that picks how the rounds run: rounds that need a gradient (they learn and
        gradients are enabled) go round by round through :func:`~rpfast.ops.rooted_round`, whose
        autograd keeps each round's activations; otherwise (under ``torch.no_grad()``, as an eval
        pass runs, or with ``learn_rounds=False``: the rounds and their input map never train)
        all of them run in one :func:`~rpfast.ops.rooted_pool` call, which keeps none and takes
        each graph through its own hash (a stack of ``rpfast pairs`` runs every seed's in one
        call). Measured (benchmarks/bench_rooted.py, one thread): a training forward of ten
        seeds, one root set per graph, 4.0x to 4.6x faster than each seed's rounds one at a
        time; an eval block of 64 root sets 2.0x to 4.4x (dense and sparse graphs)."""
        scale = self._neighbour_scale(graph, x.dtype)  # [N], shared by every block of roots
        if torch.is_grad_enabled() and self.learn_rounds:
            start = self.embed(x).t().contiguous().unsqueeze(-1)  # [d, N, 1]

            def learned(roots: Tensor) -> Tensor:
                marked = (graph.local_index.view(-1, 1, 1) == roots.transpose(0, 1)[graph.batch]).any(dim=-1)
                return self._rounds(start, scale, graph, marked)  # [N, R] marks -> [R, B, d]
            return learned
        with torch.no_grad():
            start = self.embed(x)  # [N, d]
            tensors = [t.unsqueeze(0) for t in self.hash_tensors()]
        one_hash = torch.zeros(graph.num_graphs, dtype=torch.int64, device=graph.device)
        return lambda roots: rooted_pool(start, *tensors, scale, roots, one_hash, graph)

    def hash_tensors(self) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """The rounds as :func:`~rpfast.ops.rooted_pool` takes them, for one hash: ``marker [d]``,
        ``own [L, d, d]`` and ``passed [L, d, d]`` (the round's weight on a node's own state and
        on the neighbour sum) and ``bias [L, d]``, detached."""
        d = self.marker.shape[0]
        weights = torch.stack([layer.weight.detach() for layer in self.rounds])  # [L, d, 2d]
        return (self.marker.detach(), weights[:, :, :d].contiguous(), weights[:, :, d:].contiguous(),
                torch.stack([layer.bias.detach() for layer in self.rounds]))

    def draw_roots(self, sizes: Tensor, n_max: int, generator: Optional[torch.Generator]) -> Tensor:
        """``[train_roots, B, k]`` root sets on the host for graphs of ``sizes [B]`` vertices (on
        the host): k distinct vertices drawn uniformly from ``generator``, the k smallest of
        uniform keys, keys past a graph's size at 2 (drawn last: a graph with fewer than k
        vertices marks them all)."""
        k = self.roots
        keys = torch.rand(self.train_roots, len(sizes), max(n_max, k), generator=generator)
        keys.masked_fill_(torch.arange(keys.shape[-1]) >= sizes.view(1, -1, 1), 2.0)
        return keys.topk(k, dim=-1, largest=False).indices

    def _rounds(self, start: Tensor, scale: Tensor, graph: GraphBatch, marked: Tensor) -> Tensor:
        """``[R, B, d]``: the mean over each graph's vertices of ``h^L``, one replica per column of
        ``marked [N, R]`` (True at the replica's roots), from the embedded features ``start [d, N, 1]``
        and the neighbour scale ``scale [N]``.

        The activations are feature-major, ``[d, N, R]``: the product with the neighbour weight
        is one ``[d, d] x [d, N * R]`` matrix product, and :func:`~rpfast.ops.rooted_round` does
        the rest of the round but the cosine in one pass over runs of R values. With d = 4 a
        node-major ``[N, R, d]`` layout multiplies and adds over rows of 4 values: measured 2x
        slower per round with torch's operations (the bias add alone 6x)."""
        (N, R), d = marked.shape, start.shape[0]
        h = torch.cos(start + self.marker.view(d, 1, 1) * marked.to(start.dtype))  # [d, N, R]
        for layer in self.rounds:  # W [h; h + A h] + b as W_1 h + b + (1 + A)(W_2 h): no [2d, N, R] concatenation
            own, passed = layer.weight[:, :d], layer.weight[:, d:]
            h = torch.cos(rooted_round(h, (passed @ h.view(d, N * R)).view(d, N, R), own, layer.bias, scale, graph))
        pooled = graph_sum(h, graph).permute(2, 1, 0)  # [R, B, d]
        return pooled / graph.num_nodes.clamp(min=1).to(start.dtype).view(1, -1, 1)

    def _neighbour_scale(self, graph: GraphBatch, dtype: torch.dtype) -> Tensor:
        """``[N]``: ``(1 + REFERENCE_DEGREE) / (1 + mean degree)`` of each node's graph,
        the factor on the neighbour sum ``h_v + sum_u h_u`` that keeps a round's gain on a dense
        graph what ``init_gain`` sets at the reference degree. Unscaled, the sum over 13 terms on a
        12-regular graph made the 16 rounds chaotic in float32: the spread over relabelings of a
        strongly regular graph srg(40, 12, 2, 4) grew to 1.5e-2, as large as the difference between
        two such graphs with two roots (with the factor: 1.1e-5 against 1.5e-3; with its square
        root, 2.3e-2 against 6e-2)."""
        # each graph's edges from the incoming CSR's offsets at its node range (no bincount:
        # fixed-size gathers that read nothing back)
        edges = (graph.t_rowptr[graph.ptr[1:]] - graph.t_rowptr[graph.ptr[:-1]]).to(dtype)
        mean_degree = edges / graph.num_nodes.clamp(min=1).to(dtype)
        return ((1 + self.REFERENCE_DEGREE) / (1 + mean_degree))[graph.batch]

    def drawn_weights(self, sizes: Tensor) -> Tensor:
        """``[train_roots, B]``: each drawn root set's weight, ``1 / train_roots`` (0 for an empty
        graph), for graphs of ``sizes [B]`` vertices (on the graph's device)."""
        return (sizes > 0).to(torch.float64).expand(self.train_roots, -1) / self.train_roots

    def _roots(self, graph: GraphBatch) -> Iterator[Tuple[Tensor, Tensor]]:
        """Blocks of ``(roots [R, B, k], weights [R, B])``: each graph's root sets as local vertex
        indices, and their weights in its average (in eval mode every k-set at weight
        ``1 / C(n, k)``, read from the k-combinations of ``0..n_max-1``: the first, ``0..k-1``,
        marks all of a graph with fewer than k vertices, at weight 1; in training ``train_roots``
        uniform draws of k distinct vertices at ``1 / train_roots``; 0 for an empty graph)."""
        if self.training:
            # the sizes on the host: nothing read back from the device
            roots = upload(self.draw_roots(graph.host_ptr.diff(), graph.n_max, self.generator), graph.device)
            yield roots, self.drawn_weights(graph.num_nodes)
            return
        yield from self.all_roots(graph)

    def all_roots(self, graph: GraphBatch) -> Iterator[Tuple[Tensor, Tensor]]:
        """The eval mode's blocks of :meth:`_roots`: every k-set of every graph."""
        n, device, k = graph.num_nodes, graph.device, self.roots
        host_n = graph.host_ptr.diff()
        # [C, k], the first 0..k-1; made on the host (torch.combinations selects by a mask)
        sets = upload(torch.combinations(torch.arange(max(graph.n_max, k)), k), device)
        count = upload(torch.tensor([math.comb(int(size), k) if size >= k else 1 for size in host_n.tolist()],
                                    dtype=torch.float64), device)
        fit = self.block_elements // max(1, graph.total_nodes * self.rounds[0].out_features)
        per_block = max(1, min(self.block_sets, fit))
        for first in range(0, sets.shape[0], per_block):
            block = sets[first:first + per_block]  # [R, k]
            inside = block[:, -1:] < n  # [R, B]: every root inside the graph
            if first == 0:
                inside[0] |= n > 0  # a graph with fewer than k vertices: all of them marked, once
            yield block.unsqueeze(1).expand(-1, graph.num_graphs, -1), inside.to(torch.float64) / count
