"""RP-GIN: GIN with permutation-dependent one-hot IDs, averaged over relabelings (RP eq. 3)."""
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast._validation import renamed_argument
from rpfast.data import GraphBatch
from rpfast.nn.gin import GIN
from rpfast.ops import random_permutations

__all__ = ["RPGIN"]


class RPGIN(nn.Module):
    r"""Relational Pooling GIN (Murphy et al. 2019, eq. 3, supplementary "alternative" form).

    Node ``v`` of a graph relabeled by :math:`\pi` gets the input
    :math:`[x_v, \mathrm{onehot}(\pi(v) \bmod m)]` and the GIN output is averaged over
    relabelings:

    .. math:: \bar f(G) = \mathbb{E}_\pi\, \mathrm{GIN}\big(A, [X, \mathrm{onehot}(\pi \bmod m)]\big)

    ``id_dim = m = 1`` is plain GIN; ``m = n_max`` the most expressive. Training mode draws
    ``train_samples`` fresh permutations per graph per forward (pi-SGD); eval mode averages the
    logits over ``eval_samples`` permutations, all in one batched pass (the
    relabelings are replicas ``R`` sharing the CSR). One-hot IDs are never materialised
    (see :class:`~rpfast.nn.GINLayer`). Since the uniform distribution over permutations is
    closed under inversion, a sampled row is used directly as the positions of the vertices.

    Args:
        in_dim, hidden, num_layers, out_dim, **gin_kwargs: as for :class:`~rpfast.nn.GIN`.
        id_dim: m, the one-hot ID width.
        train_samples: permutations per graph per training forward (paper: 1).
        eval_samples: permutations averaged in eval mode (paper: 5 on CSL).
        (``train_perms`` / ``num_inference_perms`` are the deprecated names of these two.)
        generator: CPU ``torch.Generator`` for reproducible permutations.

    Shapes: ``forward(x [N, in_dim] or None, graph) -> [B, out_dim]``.
    """

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, id_dim: int,
                 *, train_samples: Optional[int] = None, eval_samples: Optional[int] = None,
                 generator: Optional[torch.Generator] = None, train_perms: Optional[int] = None,
                 num_inference_perms: Optional[int] = None, **gin_kwargs):
        super().__init__()
        if not isinstance(id_dim, int) or id_dim < 1:
            raise ValueError(f"id_dim must be an int >= 1, got {id_dim!r}")
        train_samples = renamed_argument(train_samples, train_perms, "train_samples", "train_perms", default=1)
        eval_samples = renamed_argument(eval_samples, num_inference_perms, "eval_samples", "num_inference_perms",
                                        default=5)
        for name, value in (("train_samples", train_samples), ("eval_samples", eval_samples)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.gin = GIN(in_dim, hidden, num_layers, out_dim, id_dim=id_dim, **gin_kwargs)
        self.id_dim = id_dim
        self.train_samples = train_samples
        self.eval_samples = eval_samples
        self.generator = generator

    def sample_ids(self, graph: GraphBatch, num_samples: int) -> Tensor:
        """``[num_samples, N]`` one-hot ID index of every node: its random position mod m."""
        positions = random_permutations(graph.num_nodes, num_samples, generator=self.generator)  # [B, P, n_max]
        per_node = positions[graph.batch, :, graph.local_index]  # [N, P]
        return (per_node % self.id_dim).t().contiguous()

    def _samples(self) -> int:
        return self.train_samples if self.training else self.eval_samples

    def forward(self, x: Optional[Tensor], graph: GraphBatch) -> Tensor:
        if not isinstance(graph, GraphBatch):
            raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
        ids = self.sample_ids(graph, self._samples())
        return self.gin(x, graph, ids).mean(dim=0)

    def graph_embedding(self, x: Optional[Tensor], graph: GraphBatch) -> Tensor:
        """``[B, embedding_dim]`` averaged over the same number of relabelings as forward."""
        ids = self.sample_ids(graph, self._samples())
        return self.gin.graph_embedding(x, graph, ids).mean(dim=0)
