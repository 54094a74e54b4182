"""RelationalPooling: make any permutation-sensitive f invariant by averaging over relabelings."""
import inspect
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast._validation import (
    check_count,
    check_sizes,
    index_tensor,
    is_pyg_data,
    require_kernel_device,
    require_tensor,
)
from rpfast.data import GraphBatch
from rpfast.nn.rp.strategies import PiSGD, Strategy
from rpfast.ops import permute_adjacency, permute_nodes

__all__ = ["RelationalPooling"]


def _takes_mask(f) -> bool:
    """True if ``f`` (a module's forward or a function) takes a third positional argument."""
    target = f.forward if isinstance(f, nn.Module) else f
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


class RelationalPooling(nn.Module):
    r"""Relational Pooling (Murphy et al. 2019, eq. 1-5): average a permutation-sensitive f
    over the relabelings a :class:`~rpfast.nn.rp.Strategy` yields.

    .. math::
        \bar f(G) = \sum_{p} w_{b,p}\, f\big(A_{\pi_p,\pi_p}, X_{\pi_p}\big)

    where :math:`\pi_p, w_{b,p}` come from ``strategy`` (:class:`~rpfast.nn.rp.Exact`: all
    :math:`n!` with weight :math:`1/n!`; :class:`~rpfast.nn.rp.PiSGD`: uniform samples;
    :class:`~rpfast.nn.rp.KAry`: k-vertex subgraphs; :class:`~rpfast.nn.rp.Oriented`: DFS/BFS
    orders). All relabelings of a batch go to f in one call.

    Args:
        f: called as ``f(adj [M, K, K, C], x [M, K, F], mask [M, K])`` with ``M = B * P``
            relabeled graphs and ``mask`` true on real vertices (positions past a graph's size
            are zero padding), or as ``f(adj, x)`` if it takes two arguments; returns ``[M, ...]``.
        strategy: the relabelings. The older form ``RelationalPooling(f, train_samples=1,
            eval_samples=5, k=None)`` means ``PiSGD(k=k)``, or ``PiSGD(max_nodes=n)`` with ``n``
            the width of the dense input when ``k`` is None.
        generator: CPU ``torch.Generator`` for reproducible sampling.

    Shapes: ``forward(graph)`` for a :class:`~rpfast.data.GraphBatch`, a PyG ``Data``/``Batch``
    or ``(x, edge_index, batch)``; or ``forward(adj [B, n, n, C], x [B, n, F], num_nodes [B])``
    for dense padded input. Returns ``[B, ...]``.
    """

    def __init__(self, f: nn.Module, strategy: Optional[Strategy] = None, eval_samples: Optional[int] = None,
                 k: Optional[int] = None, generator: Optional[torch.Generator] = None, *,
                 train_samples: Optional[int] = None):
        super().__init__()
        if not callable(f):
            raise TypeError(f"f must be a module or function, got {type(f).__name__}")
        if isinstance(strategy, int) and not isinstance(strategy, bool):  # older positional train_samples
            strategy, train_samples = None, strategy
        if strategy is not None:
            if not isinstance(strategy, Strategy):
                raise TypeError(f"strategy must be an rpfast.nn.rp Strategy (Exact, PiSGD, KAry, Oriented), "
                                f"got {type(strategy).__name__}")
            if (train_samples, eval_samples, k) != (None, None, None):
                raise ValueError("train_samples, eval_samples and k belong to the strategy "
                                 f"({strategy!r}), not to RelationalPooling")
        self.f = f
        self.strategy = strategy
        self.train_samples = check_count(1 if train_samples is None else train_samples, "train_samples", minimum=1)
        self.eval_samples = check_count(5 if eval_samples is None else eval_samples, "eval_samples", minimum=1)
        self.k = None if k is None else check_count(k, "k", minimum=1)
        self.generator = generator
        self._with_mask = _takes_mask(f)

    def forward(self, adj, x: Optional[Tensor] = None, num_nodes: Optional[Tensor] = None) -> Tensor:
        graph = None
        if is_pyg_data(adj):
            graph = GraphBatch.from_pyg(adj)
        elif isinstance(adj, GraphBatch):
            graph = adj
        elif isinstance(adj, tuple):
            if len(adj) != 3:
                raise TypeError("a tuple input must be (x, edge_index, batch)")
            node_x, edge_index, batch = adj
            graph = GraphBatch(edge_index, x=node_x, batch=batch)
        if graph is not None:
            if x is not None or num_nodes is not None:
                raise TypeError("pass either a graph (GraphBatch, PyG Data/Batch, (x, edge_index, batch)) or "
                                "dense (adj, x, num_nodes), not both")
            adj, x, num_nodes = graph.dense_adj(), graph.dense_x(), graph.num_nodes
        elif x is None or num_nodes is None:
            raise TypeError("call forward(graph) with a GraphBatch, a PyG Data/Batch or (x, edge_index, batch), "
                            "or forward(adj, x, num_nodes) with dense padded tensors")
        num_nodes = self._check_dense(adj, x, num_nodes)
        if graph is None:
            graph = _graph_of_dense(adj, num_nodes)
        strategy = self.strategy or (PiSGD(k=self.k, train_samples=self.train_samples, eval_samples=self.eval_samples)
                                     if self.k else PiSGD(adj.shape[1], self.train_samples, self.eval_samples))
        perms, weights = strategy.relabel(graph, self.training, self.generator)
        B, P, K = perms.shape
        adj_p = permute_adjacency(adj, perms).flatten(0, 1)  # [M, K, K(, C)]
        x_p = permute_nodes(x, perms).flatten(0, 1)  # [M, K(, F)]
        if self._with_mask:
            out = self.f(adj_p, x_p, (perms >= 0).flatten(0, 1))
        else:
            out = self.f(adj_p, x_p)
        out = out.reshape(B, P, *out.shape[1:])
        w = weights.to(out.dtype).reshape(B, P, *([1] * (out.dim() - 2)))
        return (out * w).sum(dim=1)

    @staticmethod
    def _check_dense(adj, x, num_nodes) -> Tensor:
        """Check that ``adj [B, n, n(, C)]``, ``x [B, n(, F)]`` and ``num_nodes [B]`` agree."""
        for name, value in (("adj", adj), ("x", x)):
            require_tensor(value, name)
            require_kernel_device(value, name)
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


def _graph_of_dense(adj: Tensor, num_nodes: Tensor) -> GraphBatch:
    """The GraphBatch whose edges are the nonzero entries of a dense padded ``adj``."""
    B, n = adj.shape[:2]
    present = adj.detach().ne(0)
    if present.dim() == 4:
        present = present.any(dim=-1)
    inside = torch.arange(n).unsqueeze(0) < num_nodes.unsqueeze(1)  # [B, n]
    b, i, j = torch.nonzero(present & inside.unsqueeze(2) & inside.unsqueeze(1), as_tuple=True)
    ptr = torch.cat([torch.zeros(1, dtype=torch.int64), num_nodes.cumsum(0)])
    return GraphBatch(torch.stack([ptr[b] + i, ptr[b] + j]), ptr=ptr)
