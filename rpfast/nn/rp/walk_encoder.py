r"""An encoder f that counts gated walks around the first vertex of a view, and :class:`Concat`,
which joins encoders side by side.

A BFS view (:class:`~rpfast.nn.rp.Oriented`) puts its start vertex at position 0 and the start's
neighbours next. An MLP on the flattened adjacency (:class:`~rpfast.nn.rp.VecMLP`) sees them, but
must learn cubic functions of the entries (how many triangles the neighbours form) from scratch.
:class:`RootWalks` has products of the adjacency in its architecture: learned gates select
vertices by their relation to position 0, and it counts the closed walks among the selected
vertices, so a learned gate "neighbour of the start" turns into the number of 4-cliques through
the start. That count separates some strongly regular graphs with equal parameters (the two
Latin square graphs of order 5, both srg(25, 12, 5, 6)), which the 3-WL test cannot.
"""
from typing import Callable, Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from rpfast._validation import check_count
from rpfast.nn._unsupported import NotScriptable
from rpfast.nn.rp.encoders import _Layout
from rpfast.nn.rp.relational_pooling import _positional_arity

__all__ = ["RootWalks", "Concat"]


class RootWalks(NotScriptable, nn.Module):
    r"""Learned gated walk counts in the first ``window`` positions of a view.

    For a view with adjacency :math:`A` (edge channel 0) and mask :math:`m`, over the first
    :math:`W` = ``window`` positions, every position :math:`i` has the descriptor
    :math:`h_i = [\,[i = 0],\ A_{0i},\ m_i,\ x_i\,]` (is it the view's first vertex, is it adjacent
    to it, is it real, its features). Each of ``channels`` gates :math:`c` weighs the positions,
    :math:`w_{ic} = \sigma(\theta_c^\top h_i + b_c)\, m_i` (times :math:`[i = 0 \lor A_{0i} \neq 0]`
    for the first ``ego_channels`` gates: confined to the first vertex's closed neighbourhood, its
    ego network), and selects the weighted graph
    :math:`X_c = A \odot w_c w_c^\top` (:math:`W \times W`). Its features are

    .. math::
        e_c = \mathbf{1}^\top X_c \mathbf{1}, \quad
        p_c = \lVert X_c \mathbf{1} \rVert^2, \quad
        t_c = \operatorname{tr}(X_c^3)

    (gated edges counted twice, 2-walks and closed 3-walks: with :math:`w_c` the indicator of
    the first vertex's neighbours, :math:`t_c` is 6 times the number of 4-cliques through it),
    batch-normalised (the counts vary by a few around a large mean; centring them lets the MLP
    see the difference; a training batch of fewer than two views uses the running statistics)
    and mapped by an MLP (``hidden`` wide, tanh) to ``out_dim``.

    RP averages the output over the views, so two graphs whose counts have the same mean over
    the vertices but different spreads differ only through the curvature of the MLP. Hence a
    smooth activation (tanh: curved everywhere; a ReLU MLP is linear between its kinks, and
    none may fall among the few values the counts take) and counts that are not scaled down
    (their spread over the views must stay well above BatchNorm's :math:`\epsilon = 10^{-5}`,
    or the normalised counts barely vary). Measured on two Latin square graphs of order 7 whose
    4-cliques per vertex have equal means: with counts scaled by :math:`1/W^2`, or with ReLU on
    some seeds, the two averages agreed to float32 rounding. Cost per view: :math:`O(C W^3)`.

    Args:
        max_nodes: K, the positions of the strategy (joint RP only); edge_channels: C (channel
            0 is read as the adjacency); node_features: F; hidden: width of the MLP; out_dim:
            output width; window: W, the positions read (at most K; default: all K);
            channels: gates; ego_channels: how many of them (the first) are confined to the ego
            network. A BFS view's window holds the first vertex, its neighbours and, when the
            degree is below ``W - 1``, some vertices further out (which ones depends on the
            order): an ego gate ignores those, so when the neighbourhood fits in the window its
            counts are the same on every view from the same start, and RP's average over starts
            carries no spread from the window.

    Shapes: ``forward(adj [M, K, K(, C)], x [M, K(, F)], mask [M, K])`` -> ``[M, out_dim]``.
    """

    def __init__(self, max_nodes: int, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 window: Optional[int] = None, channels: int = 2, ego_channels: int = 0):
        super().__init__()
        if isinstance(max_nodes, (tuple, list)):
            raise ValueError("RootWalks reads a view from its first vertex: it is for joint RP (an int max_nodes)")
        self.layout = _Layout("RootWalks", max_nodes, edge_channels, node_features)
        K = self.layout.rows
        self.window = K if window is None else check_count(window, "window", 1)
        if self.window > K:
            raise ValueError(f"window = {self.window} is above max_nodes = {K}")
        self.channels = check_count(channels, "channels", 1)
        self.ego_channels = check_count(ego_channels, "ego_channels", 0)
        if self.ego_channels > self.channels:
            raise ValueError(f"ego_channels = {self.ego_channels} is above channels = {self.channels}")
        self.gate = nn.Linear(3 + self.layout.F, self.channels)
        hidden = check_count(hidden, "hidden", 1)
        self.norm = nn.BatchNorm1d(3 * self.channels)
        self.read = nn.Sequential(nn.Linear(3 * self.channels, hidden), nn.Tanh(),
                                  nn.Linear(hidden, check_count(out_dim, "out_dim", 1)))

    def forward(self, adj: Tensor, x: Optional[Tensor], mask) -> Tensor:
        features = self.counts(adj, x, mask, self.gate)
        norm = self.norm
        if self.training and features.shape[0] < 2:  # no batch statistics from one view
            features = F.batch_norm(features, norm.running_mean, norm.running_var, norm.weight, norm.bias,
                                    training=False, eps=norm.eps)
        else:
            features = norm(features)
        return self.read(features)

    def counts(self, adj: Tensor, x: Optional[Tensor], mask, gate: Callable[[Tensor], Tensor]) -> Tensor:
        """``[M, 3 C]``: the gated counts ``[e_c, p_c, t_c]`` of every view, with ``gate`` the map
        of the descriptors ``[M, W, 3 + F]`` to the gates' logits ``[M, W, C]`` (``self.gate``;
        a stack of them in :class:`~rpfast.experiments.pairs.stack.OrientedStack`)."""
        adj, x, rows, _ = self.layout.prepare(adj, x, mask)
        return self.prepared_counts(adj, x, rows, gate)

    def prepared_counts(self, adj: Tensor, x: Optional[Tensor], rows: Tensor,
                        gate: Callable[[Tensor], Tensor]) -> Tensor:
        """:meth:`counts` of the input as ``self.layout.prepare`` returns it (``adj [M, K, K, C]``,
        ``x [M, K, F]``, ``rows [M, K]``, padding zeroed)."""
        W = self.window
        A, real = adj[:, :W, :W, 0], rows[:, :W]
        first = torch.zeros_like(real)
        first[:, :1] = 1.0
        descriptors = torch.stack([first, A[:, 0, :], real], dim=-1)
        if x is not None:
            descriptors = torch.cat([descriptors, x[:, :W]], dim=-1)
        gates = torch.sigmoid(gate(descriptors)) * real.unsqueeze(-1)  # [M, W, C]
        if self.ego_channels:
            ego = ((A[:, 0, :] != 0) | (first > 0)).to(A.dtype) * real  # the first vertex and its neighbours
            gates = torch.cat([gates[..., :self.ego_channels] * ego.unsqueeze(-1), gates[..., self.ego_channels:]],
                              dim=-1)
        gates = gates.transpose(1, 2)  # [M, C, W]
        X = A.unsqueeze(1) * (gates.unsqueeze(3) * gates.unsqueeze(2))  # [M, C, W, W], symmetric
        degrees = X.sum(dim=3)
        edges = degrees.sum(dim=2)
        two_walks = (degrees * degrees).sum(dim=2)
        closed_three = ((X @ X) * X).sum(dim=(2, 3))
        return torch.cat([edges, two_walks, closed_three], dim=1)


class Concat(NotScriptable, nn.Module):
    """Modules side by side: each gets the same inputs; their ``[M, d_i]`` outputs are
    concatenated to ``[M, sum d_i]``. Each part keeps its own output coordinates, so a noisy
    part does not blur a sharp one inside the same coordinates.

    Args:
        encoders: two or more encoders of :mod:`rpfast.nn.rp` built for the same positions (called
            with a view's ``(adj, x, mask)``), or two or more whole-graph models taking the same
            input (``(x, graph)``: a :class:`~rpfast.nn.rp.RelationalPooling` beside a
            :class:`~rpfast.nn.rp.RootedRP`, say).
    """

    def __init__(self, *encoders: nn.Module):
        super().__init__()
        if len(encoders) < 2 or not all(isinstance(e, nn.Module) for e in encoders):
            raise TypeError("Concat takes two or more encoder modules as separate arguments: Concat(f1, f2), "
                            f"got {len(encoders)} argument(s) of type(s) "
                            f"{', '.join(type(e).__name__ for e in encoders) or 'none'}")
        self.parts = nn.ModuleList(encoders)
        self._arities = [_positional_arity(part, 4) for part in encoders]

    def forward(self, *inputs) -> Tensor:
        """Each part called with as many of ``inputs`` as it takes positionally (RP passes a view's
        ``(adj, x, mask, num_nodes)``; an encoder reads the first three)."""
        return torch.cat([part(*inputs[:arity]) for part, arity in zip(self.parts, self._arities)], dim=-1)
