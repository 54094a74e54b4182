"""RP-GIN: GIN with permutation-dependent one-hot IDs, averaged over relabelings (RP eq. 3)."""
from typing import Optional

import torch
from torch import Tensor

from rpfast._validation import check_count
from rpfast.data import GraphBatch
from rpfast.nn.gin import GIN
from rpfast.nn.rp.gnn import RPGNN, replica_mean

__all__ = ["RPGIN"]


class RPGIN(RPGNN):
    r"""Relational Pooling GIN (Murphy et al. 2019, eq. 3): :class:`~rpfast.nn.rp.RPGNN` over
    an :class:`~rpfast.nn.GIN` built with ``id_dim`` one-hot IDs.

    .. math:: \bar f(G) = \mathbb{E}_\pi\, \mathrm{GIN}\big(A, [X, \mathrm{onehot}(\pi \bmod m)]\big)

    ``id_dim = m = 1`` is plain GIN; ``m = n_max`` the most expressive. Training draws
    ``train_samples`` fresh relabelings per graph per forward (pi-SGD); eval mode averages the
    logits of ``eval_samples`` relabelings, all in one batched pass (replicas sharing the CSR).
    One-hot IDs are never materialised (see :class:`~rpfast.nn.GINLayer`).

    Args:
        in_dim, hidden, num_layers, out_dim, **gin_kwargs: as for :class:`~rpfast.nn.GIN`
            (``edge_dim=`` makes every layer GINE-style, reading ``edge_attr``).
        id_dim: m, the one-hot ID width.
        train_samples: relabelings per graph per training forward (paper: 1).
        eval_samples: relabelings averaged in eval mode (paper: 5 on CSL).
        generator: CPU ``torch.Generator`` for reproducible relabelings.

    Shapes: ``forward(x [N, in_dim] or None, graph)`` with a :class:`~rpfast.data.GraphBatch`,
    or any input :class:`~rpfast.nn.rp.RPGNN` takes (a PyG ``Data``/``Batch``,
    ``(x, edge_index, batch, edge_attr=None)``) -> ``[B, out_dim]``.
    """

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, id_dim: int,
                 *, train_samples: int = 1, eval_samples: int = 5, generator: Optional[torch.Generator] = None,
                 **gin_kwargs):
        id_dim = check_count(id_dim, "id_dim", minimum=1)
        super().__init__(GIN(in_dim, hidden, num_layers, out_dim, id_dim=id_dim, **gin_kwargs), id_dim,
                         train_samples=train_samples, eval_samples=eval_samples, generator=generator)

    @property
    def gin(self) -> GIN:
        """The wrapped :class:`~rpfast.nn.GIN` (same as ``gnn``)."""
        return self.gnn

    def forward(self, data, edge_index=None, batch: Optional[Tensor] = None, edge_attr: Optional[Tensor] = None,
                **kwargs) -> Tensor:
        if isinstance(edge_index, GraphBatch):  # the GIN-style call forward(x or None, graph)
            if batch is not None or edge_attr is not None or kwargs:
                raise TypeError("forward(x, graph) takes nothing else: the graph holds the edges and edge_attr")
            return replica_mean(self.gin(data, edge_index, self._ids(edge_index)))
        return super().forward(data, edge_index, batch, edge_attr, **kwargs)

    def graph_embedding(self, x: Optional[Tensor], graph: GraphBatch) -> Tensor:
        """``[B, embedding_dim]`` averaged over the same number of relabelings as forward."""
        if not isinstance(graph, GraphBatch):
            raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
        return replica_mean(self.gin.graph_embedding(x, graph, self._ids(graph)))

    def _ids(self, graph: GraphBatch) -> Tensor:
        return self.sample_ids(graph, self.train_samples if self.training else self.eval_samples)
