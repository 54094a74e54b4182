"""RelationalPooling: make any permutation-sensitive f invariant by averaging over relabelings."""
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch
from rpfast._validation import check_count, check_sizes, index_tensor, is_pyg_data
from rpfast.ops import permute_adjacency, permute_nodes, random_permutations

__all__ = ["RelationalPooling"]


class RelationalPooling(nn.Module):
    r"""Relational Pooling with pi-SGD (Murphy et al. 2019, eq. 2 and Sec. 2.2).

    .. math::
        \bar f(G) = \frac{1}{n!} \sum_{\pi} f(A_{\pi,\pi}, X_\pi)
        \approx \frac{1}{P} \sum_{p=1}^{P} f(A_{\pi_p,\pi_p}, X_{\pi_p})

    with fresh uniform :math:`\pi_p` on every call: ``train_samples`` of them in training
    mode (an unbiased estimate for pi-SGD) and ``eval_samples`` in eval mode. With ``k``
    the function sees only the first ``k`` positions (k-ary RP, eq. 5 with sampled
    subsets). All samples are computed in one batched pass.

    Args:
        f: module called as ``f(adj, x)`` with ``adj [M, K, K, C]`` and ``x [M, K, F]``
            (``M = B * P``); returns ``[M, ...]``. It may be permutation-sensitive (an MLP
            over the flattened tensors, an RNN, a CNN, ...).
        train_samples / eval_samples: permutations per graph per call.
        k: number of positions f sees (default: ``n_max`` of the batch). Positions past a
            graph's size are zero padding (zero rows/columns of ``adj``, zero rows of ``x``),
            also when ``k`` exceeds ``n_max``: ``f`` always gets ``K = k`` positions.
        generator: CPU ``torch.Generator`` for reproducible sampling.

    Shapes: ``forward(adj [B, n, n, C], x [B, n, F], num_nodes [B]) -> [B, ...]`` (dense,
    padded, ``num_nodes[b] <= n``), or ``forward(graph)`` for a
    :class:`~rpfast.data.GraphBatch` or PyG ``Data``/``Batch`` with node features.
    """

    def __init__(self, f: nn.Module, train_samples: int = 1, eval_samples: int = 5,
                 k: Optional[int] = None, generator: Optional[torch.Generator] = None):
        super().__init__()
        train_samples = check_count(train_samples, "train_samples", minimum=1)
        eval_samples = check_count(eval_samples, "eval_samples", minimum=1)
        k = None if k is None else check_count(k, "k", minimum=1)
        self.f = f
        self.train_samples = train_samples
        self.eval_samples = eval_samples
        self.k = k
        self.generator = generator

    def forward(self, adj, x: Optional[Tensor] = None, num_nodes: Optional[Tensor] = None) -> Tensor:
        if is_pyg_data(adj):
            adj = GraphBatch.from_pyg(adj)
        if isinstance(adj, GraphBatch):
            graph = adj
            adj, x, num_nodes = graph.dense_adj(), graph.dense_x(), graph.num_nodes
        if x is None or num_nodes is None:
            raise TypeError("call forward(adj, x, num_nodes) or forward(graph: GraphBatch)")
        num_nodes = self._check_dense(adj, x, num_nodes)
        samples = self.train_samples if self.training else self.eval_samples
        K = self.k if self.k is not None else adj.shape[1]
        perms = random_permutations(num_nodes, samples, k=K, generator=self.generator)
        adj_p = permute_adjacency(adj, perms)  # [B, P, K, K, C]
        x_p = permute_nodes(x, perms)  # [B, P, K, F]
        B = adj_p.shape[0]
        out = self.f(adj_p.flatten(0, 1), x_p.flatten(0, 1))
        return out.reshape(B, samples, *out.shape[1:]).mean(dim=1)

    @staticmethod
    def _check_dense(adj, x, num_nodes) -> Tensor:
        """Check that ``adj [B, n, n(, C)]``, ``x [B, n(, F)]`` and ``num_nodes [B]`` agree."""
        for name, value in (("adj", adj), ("x", x)):
            if not isinstance(value, Tensor):
                raise TypeError(f"{name} must be a tensor, got {type(value).__name__}")
        if adj.dim() not in (3, 4) or adj.shape[1] != adj.shape[2]:
            raise ValueError(f"adj must have shape [B, n, n, C] or [B, n, n], got {tuple(adj.shape)}")
        B, n = adj.shape[:2]
        if x.dim() not in (2, 3) or tuple(x.shape[:2]) != (B, n):
            raise ValueError(f"x must have shape [B={B}, n={n}, F] to match adj, got {tuple(x.shape)}")
        num_nodes = index_tensor(num_nodes, "num_nodes")
        check_sizes(num_nodes, "num_nodes")
        if num_nodes.numel() != B:
            raise ValueError(f"num_nodes has {num_nodes.numel()} entries but adj holds {B} graphs")
        if B and int(num_nodes.max()) > n:
            b = int(torch.nonzero(num_nodes > n)[0, 0])
            raise ValueError(f"num_nodes[{b}] = {int(num_nodes[b])} exceeds the n = {n} positions of adj")
        return num_nodes
