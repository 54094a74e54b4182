"""RP-GIN: GIN with permutation-dependent one-hot IDs, averaged over relabelings (RP eq. 3)."""
from typing import Optional

import torch
from torch import Tensor

from rpfast._validation import check_count
from rpfast.nn.gin import GIN
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.rp.gnn import RPGNN
from rpfast.nn.rp.pisgd import PiSGD
from rpfast.nn.rp.strategies import Strategy

__all__ = ["RPGIN"]


class RPGIN(RPGNN):
    r"""Relational Pooling GIN (Murphy et al. 2019, eq. 3): :class:`~rpfast.nn.rp.RPGNN` over
    an :class:`~rpfast.nn.GIN` built with ``id_dim`` one-hot IDs.

    .. math:: \bar f(G) = \sum_p w_p\, \mathrm{GIN}\big(A, [X, \mathrm{onehot}(\pi_p^{-1} \bmod m)]\big)

    ``id_dim = m = 1`` is plain GIN; ``m = n_max`` the most expressive. The default strategy,
    ``PiSGD(train_samples=1, eval_samples=5)`` (the paper's CSL protocol), draws one fresh
    relabeling per graph per training forward (pi-SGD) and averages the logits of five in eval
    mode, all in one batched pass (replicas sharing the CSR). One-hot IDs are never
    materialised (see :class:`~rpfast.nn.GINLayer`).

    Args:
        in_dim, hidden, num_layers, out_dim: as for :class:`~rpfast.nn.GIN`.
        **gin_kwargs: as for :class:`~rpfast.nn.GIN` (``edge_dim=`` makes every layer
            GINE-style, reading ``edge_attr``).
        id_dim: m, the one-hot ID width.
        strategy: the relabelings (:class:`~rpfast.nn.rp.Strategy` placing every vertex, see
            :class:`~rpfast.nn.rp.RPGNN`); their counts per mode belong to it.
        generator: CPU ``torch.Generator`` for reproducible relabelings.

    Shapes: ``forward(x [N, in_dim] or None, graph)`` with a :class:`~rpfast.data.GraphBatch`,
    or any input of :func:`~rpfast.nn.graph_input.read_graph_input` (a PyG ``Data``/``Batch``,
    a GraphBatch, ``(x, edge_index, batch=None, edge_attr=None)``) -> ``[B, out_dim]``.
    """

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, id_dim: int, *,
                 strategy: Optional[Strategy] = None, generator: Optional[torch.Generator] = None, **gin_kwargs):
        id_dim = check_count(id_dim, "id_dim", minimum=1)
        super().__init__(GIN(in_dim, hidden, num_layers, out_dim, id_dim=id_dim, **gin_kwargs), id_dim,
                         strategy=PiSGD(train_samples=1, eval_samples=5) if strategy is None else strategy,
                         generator=generator)

    @property
    def gin(self) -> GIN:
        """The wrapped :class:`~rpfast.nn.GIN` (same as ``gnn``)."""
        return self.gnn

    def graph_embedding(self, data, edge_index=None, batch: Optional[Tensor] = None,
                        edge_attr: Optional[Tensor] = None) -> Tensor:
        """``[B, embedding_dim]`` averaged over the same relabelings as forward; takes the inputs
        forward takes."""
        x, graph = read_graph_input("RPGIN.graph_embedding", data, edge_index, batch, edge_attr,
                                    training=self.training)
        return self._average(graph, lambda ids: self.gin.replica_logits(x, graph, ids, embedding=True))
