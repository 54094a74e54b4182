"""GINConv: drop-in for torch_geometric.nn.GINConv on rpfast's fused aggregation."""
from typing import Callable, Optional, Union

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch
from rpfast.data.cache import graph_for_edge_index
from rpfast.ops import gin_aggregate

__all__ = ["GINConv"]


class GINConv(nn.Module):
    r"""Graph Isomorphism Network layer (Xu et al., ICLR 2019).

    .. math:: x_i' = h_\Theta\Big((1 + \epsilon)\, x_i + \sum_{j \to i} x_j\Big)

    Same constructor and ``forward(x, edge_index)`` as ``torch_geometric.nn.GINConv``, so
    a PyG model can switch the import. ``edge_index`` is converted to CSR once per distinct
    tensor (cached); a :class:`~rpfast.data.GraphBatch` can be passed instead.

    Args:
        nn: the MLP :math:`h_\Theta` applied after aggregation (any callable module).
        eps: initial :math:`\epsilon`.
        train_eps: learn :math:`\epsilon`.

    Shapes:
        ``x [N, F]`` or ``[R, N, F]`` (R relabelings sharing the graph) -> ``nn``'s output
        for every node.
    """

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, **kwargs):
        super().__init__()
        # PyG forwards these to MessagePassing; only its defaults match what this layer computes.
        supported = {"aggr": "add", "flow": "source_to_target"}
        for key, value in kwargs.items():
            if supported.get(key, object()) != value:
                raise ValueError(f"rpfast.nn.GINConv does not support {key}={value!r} "
                                 f"(it sums messages along source_to_target edges)")
        if not callable(nn):
            raise TypeError(f"nn must be a callable module, got {type(nn).__name__}")
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.tensor([float(eps)]))
        else:
            self.register_buffer("eps", torch.tensor([float(eps)]))

    def reset_parameters(self) -> None:
        if hasattr(self.nn, "reset_parameters"):
            self.nn.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x: Tensor, edge_index: Union[Tensor, GraphBatch], size: Optional[tuple] = None) -> Tensor:
        if isinstance(edge_index, GraphBatch):
            graph = edge_index
        else:
            if size is not None and size[0] != size[1]:
                raise ValueError(f"bipartite size={size} is not supported; rpfast.GINConv needs a square graph")
            if not isinstance(x, Tensor):
                raise TypeError("x must be a tensor (bipartite (x_src, x_dst) pairs are not supported)")
            graph = graph_for_edge_index(edge_index, x.shape[-2])
        return self.nn(gin_aggregate(x, graph, self.eps.to(x.dtype)))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
