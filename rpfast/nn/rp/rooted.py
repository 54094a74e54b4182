r"""RP over one marked vertex: a message-passing f that sees the vertex at position 0 of a
relabeling, averaged exactly over the n choices of that vertex.

RP-GIN (eq. 3) gives every vertex the one-hot ID of its position. Keeping only the ID of
position 0 (``onehot(pi^-1(v) = 0)``: a marker on one vertex, the root ``r = pi(0)``) makes f
depend on the relabeling through ``r`` alone, so the RP average over all ``n!`` relabelings is
the average over the ``n`` roots: exact at the cost of ``n`` passes, where the full ID needs
sampling. Message passing from a marked root is rooted colour refinement, which separates
graphs that 1-WL cannot, among them the Cai-Fuerer-Immerman pairs over small bases of
treewidth 2 (the twist shows once the refinement from the root wraps around a cycle).
"""
from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from rpfast._validation import check_count, check_real, require_flag
from rpfast.data import GraphBatch
from rpfast.nn._unsupported import NotScriptable
from rpfast.nn.graph_input import read_graph_input
from rpfast.ops import gin_aggregate, graph_sum

__all__ = ["RootedRP"]


class RootedRP(NotScriptable, nn.Module):
    r"""Relational Pooling over the root: a marked vertex, averaged over every vertex exactly.

    For a graph with adjacency :math:`A`, features :math:`x_v` and root :math:`r`:

    .. math::
        h^0_v &= \cos(W_{in} x_v + b_{in} + [v = r]\, u) \\
        h^{l+1}_v &= \cos\big(W_l\, [\,h^l_v \,;\, h^l_v + \textstyle\sum_{u \to v} h^l_u\,] + b_l\big)
            \qquad l = 0, \dots, L - 1 \\
        f_r(G) &= \mathrm{MLP}\big(\tfrac{1}{n} \textstyle\sum_v h^L_v\big), \qquad
        \bar f(G) = \tfrac{1}{n} \textstyle\sum_r f_r(G)

    (:math:`u` a marker, the MLP ``hidden`` wide with tanh; all learned, or the MLP alone with
    ``learn_rounds=False``). This is RP-GIN whose only
    ID is that of position 0, so :math:`\bar f` is the exact RP average over all relabelings. In
    eval mode every vertex is a root (blocks of roots of about ``block_elements`` activations at a
    time); in training each graph draws ``train_roots`` roots uniformly, with replacement (an
    unbiased estimate of the average, as pi-SGD's).

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

    Args:
        in_dim: node feature width F (the constant 1 for featureless graphs).
        hidden: width d of the rounds and the MLP.
        num_layers: L, rounds of message passing (a difference seen first in round t needs L >= t).
        out_dim: output width.
        train_roots: roots per graph in a training forward.
        generator: CPU ``torch.Generator`` for reproducible roots (the weights come from torch's
            global seed).
        init_gain: g, the scale of the rounds' initial weights.
        block_elements: activations (roots x nodes x d) per block in eval mode.
        learn_rounds: False keeps the input map, the marker and the rounds at their random
            initialisation (a fixed random hash of the rooted colours; only the read-out MLP
            learns, and training skips the backward through the rounds: about a third of the
            cost of a training step).

    Shapes: ``forward(x [N, in_dim], graph)`` with a :class:`~rpfast.data.GraphBatch`, or any input
    of :func:`~rpfast.nn.graph_input.read_graph_input` -> ``[B, out_dim]`` (0 for an empty graph).
    """

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, train_roots: int = 4,
                 generator: Optional[torch.Generator] = None, init_gain: float = 1.25,
                 block_elements: int = 1 << 17, learn_rounds: bool = True):
        super().__init__()
        in_dim, hidden = check_count(in_dim, "in_dim", 1), check_count(hidden, "hidden", 1)
        num_layers, out_dim = check_count(num_layers, "num_layers", 1), check_count(out_dim, "out_dim", 1)
        self.train_roots = check_count(train_roots, "train_roots", 1)
        self.block_elements = check_count(block_elements, "block_elements", 1)
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
                layer.weight.normal_(0.0, init_gain / (2 * hidden) ** 0.5)
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
        rounds_learn = torch.is_grad_enabled() and self.learn_rounds
        with torch.set_grad_enabled(rounds_learn):
            start = self.embed(x).unsqueeze(1)  # [N, 1, d], shared by every block of roots
        total = x.new_zeros(graph.num_graphs, self.read[-1].out_features)
        for roots, weights in self._roots(graph):
            with torch.set_grad_enabled(rounds_learn):
                pooled = self._rounds(start, graph, graph.local_index == roots[:, graph.batch])
            per_root = self.read(pooled)  # [R, B, out]
            total = total + (per_root * weights.to(x.dtype).unsqueeze(-1)).sum(dim=0)
        return total

    def _rounds(self, start: Tensor, graph: GraphBatch, marked: Tensor) -> Tensor:
        """``[R, B, d]``: the mean over each graph's vertices of ``h^L``, one replica per row of
        ``marked [R, N]`` (True at the replica's root), from the embedded features ``start [N, 1, d]``.

        The activations are node-major, ``[N, R, d]``: the neighbour sum then reads each
        neighbour's ``R * d`` values in one contiguous run (one aggregation over ``R * d``
        features), where a replica-major ``[R, N, d]`` would gather rows of ``d`` values."""
        N, R = marked.shape[1], marked.shape[0]
        marked = marked.t().unsqueeze(-1).to(start.dtype)  # [N, R, 1]
        h = torch.cos(start + marked * self.marker)  # [N, R, d]
        d = h.shape[-1]
        for layer in self.rounds:  # W [h; h + A h] + b as W_1 h + b + (1 + A)(W_2 h): no [N, R, 2d] concatenation
            own, passed = layer.weight[:, :d], layer.weight[:, d:]
            summed = gin_aggregate(F.linear(h, passed).reshape(N, R * d), graph).view(N, R, d)
            # the bias added in place: a product with a bias over rows of d = 4 to 8 values is a
            # slow BLAS call (measured 5x the plain product)
            h = torch.cos(F.linear(h, own).add_(summed).add_(layer.bias))
        pooled = graph_sum(h.reshape(N, R * d), graph).view(-1, R, d).transpose(0, 1)  # [R, B, d]
        return pooled / graph.num_nodes.clamp(min=1).to(start.dtype).view(1, -1, 1)

    def _roots(self, graph: GraphBatch) -> Iterator[Tuple[Tensor, Tensor]]:
        """Blocks of ``(roots [R, B], weights [R, B])``: local root indices and their weights in
        each graph's average (every vertex at weight 1/n in eval mode; ``train_roots`` uniform
        draws at 1/train_roots in training; 0 for an empty graph)."""
        n, device = graph.num_nodes, graph.device
        if self.training:
            draws = torch.rand(self.train_roots, graph.num_graphs, generator=self.generator)
            roots = (draws * n.cpu()).long().to(device)
            yield roots, (n > 0).to(torch.float64).expand(self.train_roots, -1) / self.train_roots
            return
        width = self.rounds[0].out_features
        per_block = max(1, self.block_elements // max(1, graph.total_nodes * width))
        for first in range(0, graph.n_max, per_block):
            roots = torch.arange(first, min(first + per_block, graph.n_max), device=device).unsqueeze(1)
            roots = roots.expand(-1, graph.num_graphs)
            yield roots, (roots < n).to(torch.float64) / n.clamp(min=1)
