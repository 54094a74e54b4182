r"""Permutation-sensitive encoders f for :class:`~rpfast.nn.rp.RelationalPooling`.

Each takes the relabeled graphs of one RP call, ``adj [M, K, K, C]`` (or ``[M, K, K]``),
``x [M, K, F]`` (or ``[M, K]``) and ``mask [M, K]`` (true on real vertices), and returns
``[M, out_dim]``. Padding never reaches them as data: the masked entries are zero, and the
mask itself is an input (``VecMLP``, ``AdjCNN``) or sets the sequence length (``VecRNN``).
"""
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from rpfast._validation import check_count

__all__ = ["VecMLP", "VecRNN", "AdjCNN"]


def _channels_last(adj: Tensor, x: Tensor, mask: Tensor):
    """``adj [M, K, K, C]`` and ``x [M, K, F]`` with padding zeroed, whatever the input rank
    (``adj`` in ``x``'s floating dtype: GraphBatch adjacency is float32 whatever the features)."""
    adj = adj.unsqueeze(-1) if adj.dim() == 3 else adj
    if x.dtype.is_floating_point:
        adj = adj.to(x.dtype)
    x = x.unsqueeze(-1) if x.dim() == 2 else x
    m = mask.to(adj.dtype)
    return adj * (m.unsqueeze(2) * m.unsqueeze(1)).unsqueeze(-1), x * m.unsqueeze(-1)


def _check_width(adj: Tensor, K: int, C: int, x: Tensor, F: int, who: str) -> None:
    adj_c = 1 if adj.dim() == 3 else adj.shape[-1]
    x_f = 1 if x.dim() == 2 else x.shape[-1]
    if adj.shape[1] != K or adj_c != C or x_f != F:
        raise ValueError(f"{who} was built for K={K} positions, C={C} edge channels and F={F} node features, "
                         f"got adj {tuple(adj.shape)} and x {tuple(x.shape)}")


class VecMLP(nn.Module):
    r"""An MLP on :math:`[\mathrm{vec}(A), \mathrm{vec}(X), \mathrm{mask}]` (the supplementary's
    vec(A, X) model), zero-padded to ``K`` positions.

    Args:
        max_nodes: K, the positions of the strategy it is used with; edge_channels: C;
        node_features: F; hidden: width of the hidden layers; out_dim: output width;
        num_layers: hidden layers (>= 1).
    """

    def __init__(self, max_nodes: int, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 num_layers: int = 2):
        super().__init__()
        self.K, self.C, self.F = (check_count(max_nodes, "max_nodes", 1), check_count(edge_channels, "edge_channels", 1),
                                  check_count(node_features, "node_features", 0))
        width = self.K * self.K * self.C + self.K * self.F + self.K
        layers = []
        for _ in range(check_count(num_layers, "num_layers", 1)):
            layers += [nn.Linear(width, check_count(hidden, "hidden", 1)), nn.ReLU()]
            width = hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, check_count(out_dim, "out_dim", 1)))

    def forward(self, adj: Tensor, x: Tensor, mask: Tensor) -> Tensor:
        _check_width(adj, self.K, self.C, x, self.F, "VecMLP")
        adj, x = _channels_last(adj, x, mask)
        M = adj.shape[0]
        return self.net(torch.cat([adj.reshape(M, -1), x.reshape(M, -1), mask.to(adj.dtype)], dim=1))


class VecRNN(nn.Module):
    r"""An LSTM or GRU that reads the vertices in order, each as its adjacency row (all ``K``
    entries and ``C`` channels) and its features; sequences stop at each graph's node count
    (packed), and the last hidden state goes through a linear map.

    Args:
        max_nodes, edge_channels, node_features, hidden, out_dim: as for :class:`VecMLP`;
        cell: ``"lstm"`` or ``"gru"``.
    """

    def __init__(self, max_nodes: int, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 cell: str = "lstm"):
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        self.K, self.C, self.F = (check_count(max_nodes, "max_nodes", 1), check_count(edge_channels, "edge_channels", 1),
                                  check_count(node_features, "node_features", 0))
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(self.K * self.C + self.F, check_count(hidden, "hidden", 1), batch_first=True)
        self.out = nn.Linear(hidden, check_count(out_dim, "out_dim", 1))

    def forward(self, adj: Tensor, x: Tensor, mask: Tensor) -> Tensor:
        _check_width(adj, self.K, self.C, x, self.F, "VecRNN")
        adj, x = _channels_last(adj, x, mask)
        M = adj.shape[0]
        rows = torch.cat([adj.reshape(M, self.K, -1), x], dim=-1)
        lengths = mask.sum(dim=1)
        # Relabeled vertices come first (gather convention), so the first `lengths` steps are real.
        # Empty graphs read one all-zero step.
        packed = pack_padded_sequence(rows, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        _, state = self.rnn(packed)
        last = state[0] if isinstance(state, tuple) else state
        return self.out(last[-1])


class AdjCNN(nn.Module):
    r"""A 2-D CNN over the adjacency tensor (edge channels as input channels), max-pooled over
    positions, concatenated with an MLP of the flattened node features, then a linear map.

    Args:
        max_nodes, edge_channels, node_features, hidden, out_dim: as for :class:`VecMLP`;
        kernel_size: convolution window (odd), num_convs: convolution layers.
    """

    def __init__(self, max_nodes: int, edge_channels: int, node_features: int, hidden: int, out_dim: int,
                 kernel_size: int = 3, num_convs: int = 2):
        super().__init__()
        self.K, self.C, self.F = (check_count(max_nodes, "max_nodes", 1), check_count(edge_channels, "edge_channels", 1),
                                  check_count(node_features, "node_features", 0))
        kernel_size = check_count(kernel_size, "kernel_size", 1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same-size padding), got {kernel_size}")
        hidden = check_count(hidden, "hidden", 1)
        convs, channels = [], self.C + 1  # + the mask's outer product
        for _ in range(check_count(num_convs, "num_convs", 1)):
            convs += [nn.Conv2d(channels, hidden, kernel_size, padding=kernel_size // 2), nn.ReLU()]
            channels = hidden
        self.convs = nn.Sequential(*convs)
        self.nodes = nn.Sequential(nn.Linear(self.K * self.F + self.K, hidden), nn.ReLU())
        self.out = nn.Linear(2 * hidden, check_count(out_dim, "out_dim", 1))

    def forward(self, adj: Tensor, x: Tensor, mask: Tensor) -> Tensor:
        _check_width(adj, self.K, self.C, x, self.F, "AdjCNN")
        adj, x = _channels_last(adj, x, mask)
        M, m = adj.shape[0], mask.to(adj.dtype)
        grid = torch.cat([adj, (m.unsqueeze(2) * m.unsqueeze(1)).unsqueeze(-1)], dim=-1).permute(0, 3, 1, 2)
        pooled = self.convs(grid).amax(dim=(2, 3))
        nodes = self.nodes(torch.cat([x.reshape(M, -1), m], dim=1))
        return self.out(torch.cat([pooled, nodes], dim=1))
