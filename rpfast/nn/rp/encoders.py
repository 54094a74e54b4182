r"""Permutation-sensitive encoders f for :class:`~rpfast.nn.rp.RelationalPooling`.

Joint RP (eq. 1) gives each encoder the relabeled graphs of one call: ``adj [M, K, K, C]``
(or ``[M, K, K]``), ``x [M, K, F]`` (or ``[M, K]``) and ``mask [M, K]`` (true on real
vertices). Built with ``max_nodes=(K_r, K_c)``, an encoder takes separate RP's (eq. 2)
bipartite input instead: ``adj [M, K_r, K_c, C]``, ``x = None`` and ``mask = (row_mask [M, K_r],
col_mask [M, K_c])``. Padding never reaches an encoder as data: the masked entries are zeroed,
and the mask itself is an input (``VecMLP``, ``AdjCNN``) or sets the sequence length (``VecRNN``).
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from rpfast._validation import check_count
from rpfast.nn._unsupported import NotScriptable

__all__ = ["VecMLP", "VecRNN", "AdjCNN"]

Sizes = Union[int, Tuple[int, int]]


class _Layout:
    """The input an encoder was built for: ``K_r x K_c`` positions (``K_r = K_c`` and node
    features for joint RP; a pair of sizes and no node features for bipartite input), ``C``
    edge channels, ``F`` node features."""

    def __init__(self, owner: str, max_nodes: Sizes, edge_channels: int, node_features: int):
        self.owner = owner
        self.bipartite = isinstance(max_nodes, (tuple, list))
        if self.bipartite:
            if len(max_nodes) != 2:
                raise ValueError(f"max_nodes must be an int (joint RP) or a pair (K_rows, K_cols) for separate RP, "
                                 f"got {max_nodes!r}")
            self.rows = check_count(max_nodes[0], "max_nodes[0]", 1)
            self.cols = check_count(max_nodes[1], "max_nodes[1]", 1)
            if node_features:
                raise ValueError("a bipartite encoder (max_nodes=(K_rows, K_cols)) takes no node features: "
                                 "put them in the edge channels")
        else:
            self.rows = self.cols = check_count(max_nodes, "max_nodes", 1)
        self.C = check_count(edge_channels, "edge_channels", 1)
        self.F = check_count(node_features, "node_features", 0)

    @property
    def mask_width(self) -> int:
        return self.rows + self.cols if self.bipartite else self.rows

    def prepare(self, adj: Tensor, x: Optional[Tensor], mask) -> Tuple[Tensor, Optional[Tensor], Tensor, Tensor]:
        """Check the input and return ``adj [M, K_r, K_c, C]`` with padding zeroed, ``x [M, K, F]``
        (None for bipartite input) with padding zeroed, the row mask and the column mask (as
        floats of ``adj``'s dtype)."""
        adj_c = 1 if adj.dim() == 3 else adj.shape[-1]
        if self.bipartite:
            if x is not None or not isinstance(mask, (tuple, list)) or len(mask) != 2:
                raise TypeError(f"{self.owner} was built for separate RP (max_nodes=({self.rows}, {self.cols})): "
                                "call it with (adj, None, (row_mask, col_mask))")
            row_mask, col_mask = mask
        else:
            if not isinstance(mask, Tensor) or x is None:
                raise TypeError(f"{self.owner} was built for joint RP (max_nodes={self.rows}): call it with "
                                "(adj, x, mask)")
            row_mask = col_mask = mask
        x_f = None if x is None else (1 if x.dim() == 2 else x.shape[-1])
        if tuple(adj.shape[1:3]) != (self.rows, self.cols) or adj_c != self.C or (x_f is not None and x_f != self.F):
            shown = f" and x {tuple(x.shape)}" if x is not None else ""
            hint = "" if tuple(adj.shape[1:3]) == (self.rows, self.cols) else (
                f" (RelationalPooling: give it a strategy of K={self._sizes()} positions, e.g. PiSGD(max_nodes=K))")
            raise ValueError(f"{self.owner} was built for K={self._sizes()} positions, C={self.C} edge channels and "
                             f"F={self.F} node features, got adj {tuple(adj.shape)}{shown}{hint}")
        adj = adj.unsqueeze(-1) if adj.dim() == 3 else adj
        if x is not None and x.dtype.is_floating_point:
            adj = adj.to(x.dtype)  # GraphBatch adjacency is float32 whatever the features
        elif not adj.dtype.is_floating_point:
            adj = adj.to(torch.get_default_dtype())
        rows, cols = row_mask.to(adj.dtype), col_mask.to(adj.dtype)
        adj = adj * (rows.unsqueeze(2) * cols.unsqueeze(1)).unsqueeze(-1)
        if x is not None:
            x = (x.unsqueeze(-1) if x.dim() == 2 else x) * rows.unsqueeze(-1)
        return adj, x, rows, cols

    def mask_features(self, rows: Tensor, cols: Tensor) -> Tensor:
        """``[M, mask_width]``: the masks as inputs."""
        return torch.cat([rows, cols], dim=1) if self.bipartite else rows

    def _sizes(self):
        return (self.rows, self.cols) if self.bipartite else self.rows


class VecMLP(NotScriptable, nn.Module):
    r"""An MLP on :math:`[\mathrm{vec}(A), \mathrm{vec}(X), \mathrm{mask}]` (the supplementary's
    vec(A, X) model), zero-padded to ``K`` positions.

    Args:
        max_nodes: K, the positions of the strategy it is used with (a pair ``(K_r, K_c)`` for
            separate RP); edge_channels: C; node_features: F; hidden: width of the hidden
            layers; out_dim: output width; num_layers: hidden layers (>= 1).
    """

    def __init__(self, max_nodes: Sizes, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 num_layers: int = 2):
        super().__init__()
        self.layout = _Layout("VecMLP", max_nodes, edge_channels, node_features)
        lay = self.layout
        width = lay.rows * lay.cols * lay.C + lay.rows * lay.F + lay.mask_width
        layers = []
        for _ in range(check_count(num_layers, "num_layers", 1)):
            layers += [nn.Linear(width, check_count(hidden, "hidden", 1)), nn.ReLU()]
            width = hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, check_count(out_dim, "out_dim", 1)))

    def forward(self, adj: Tensor, x: Optional[Tensor], mask) -> Tensor:
        return self.net(self.inputs(adj, x, mask))

    def inputs(self, adj: Tensor, x: Optional[Tensor], mask) -> Tensor:
        """``[M, width]``: the MLP's input rows ``[vec(A), vec(X), mask]``."""
        return self.prepared_inputs(*self.layout.prepare(adj, x, mask))

    def prepared_inputs(self, adj: Tensor, x: Optional[Tensor], rows: Tensor, cols: Tensor) -> Tensor:
        """:meth:`inputs` of the input as ``self.layout.prepare`` returns it."""
        # flatten(1), not reshape(M, -1): M is 0 when no graph has a relabeling
        parts = [adj.flatten(1)] + ([x.flatten(1)] if x is not None else [])
        return torch.cat(parts + [self.layout.mask_features(rows, cols)], dim=1)


class VecRNN(NotScriptable, nn.Module):
    r"""An LSTM or GRU that reads the vertices in order, each as its adjacency row (all ``K``
    entries and ``C`` channels) and its features; the hidden state after each graph's last vertex
    (step ``n - 1``: the padding after it cannot reach it) goes through a linear map. For bipartite
    input it reads the rows, each with the column mask (so it knows the column count).

    Args:
        max_nodes, edge_channels, node_features, hidden, out_dim: as for :class:`VecMLP`;
        cell: ``"lstm"`` or ``"gru"``.
    """

    def __init__(self, max_nodes: Sizes, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 cell: str = "lstm"):
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        self.layout = _Layout("VecRNN", max_nodes, edge_channels, node_features)
        lay = self.layout
        step = lay.cols * lay.C + lay.F + (lay.cols if lay.bipartite else 0)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(step, check_count(hidden, "hidden", 1), batch_first=True)
        self.out = nn.Linear(hidden, check_count(out_dim, "out_dim", 1))

    def forward(self, adj: Tensor, x: Optional[Tensor], mask) -> Tensor:
        adj, x, rows, cols = self.layout.prepare(adj, x, mask)
        M, K = adj.shape[:2]
        steps = [adj.flatten(2)]
        if x is not None:
            steps.append(x)
        if self.layout.bipartite:
            steps.append(cols.unsqueeze(1).expand(-1, K, -1))
        if M == 0:  # no relabeling to read (an RNN refuses an empty batch)
            return self.out(torch.zeros(0, self.rnn.hidden_size, dtype=adj.dtype, device=adj.device))
        # Relabeled vertices come first (gather convention), so the first `lengths` steps are real;
        # the RNN is causal, so its output at step length - 1 is the state after the last real
        # vertex whatever the padding after it (an empty graph reads its one all-zero step).
        # Not packed: a packed sequence's backward zero-fills the whole input once per step (a third
        # of RNN-DFS's training step at k = 20 on the CPU), and its lengths must go to the host.
        last_step = rows.sum(dim=1).to(torch.int64).clamp(min=1) - 1
        outputs, _ = self.rnn(torch.cat(steps, dim=-1))
        return self.out(outputs[torch.arange(M, device=outputs.device), last_step])


class AdjCNN(NotScriptable, nn.Module):
    r"""A 2-D CNN over the adjacency tensor (edge channels as input channels), max-pooled over
    positions, concatenated with an MLP of the flattened node features and masks, then a
    linear map.

    Args:
        max_nodes, edge_channels, node_features, hidden, out_dim: as for :class:`VecMLP`;
        kernel_size: convolution window (odd), num_convs: convolution layers.
    """

    def __init__(self, max_nodes: Sizes, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 kernel_size: int = 3, num_convs: int = 2):
        super().__init__()
        self.layout = _Layout("AdjCNN", max_nodes, edge_channels, node_features)
        lay = self.layout
        kernel_size = check_count(kernel_size, "kernel_size", 1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same-size padding), got {kernel_size}")
        hidden = check_count(hidden, "hidden", 1)
        convs, channels = [], lay.C + 1  # + the masks' outer product
        for _ in range(check_count(num_convs, "num_convs", 1)):
            convs += [nn.Conv2d(channels, hidden, kernel_size, padding=kernel_size // 2), nn.ReLU()]
            channels = hidden
        self.convs = nn.Sequential(*convs)
        self.nodes = nn.Sequential(nn.Linear(lay.rows * lay.F + lay.mask_width, hidden), nn.ReLU())
        self.out = nn.Linear(2 * hidden, check_count(out_dim, "out_dim", 1))

    def forward(self, adj: Tensor, x: Optional[Tensor], mask) -> Tensor:
        adj, x, rows, cols = self.layout.prepare(adj, x, mask)
        grid = torch.cat([adj, (rows.unsqueeze(2) * cols.unsqueeze(1)).unsqueeze(-1)], dim=-1).permute(0, 3, 1, 2)
        pooled = self.convs(grid).amax(dim=(2, 3))
        parts = ([x.flatten(1)] if x is not None else []) + [self.layout.mask_features(rows, cols)]
        return self.out(torch.cat([pooled, self.nodes(torch.cat(parts, dim=1))], dim=1))
