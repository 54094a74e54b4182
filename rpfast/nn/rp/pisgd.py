r"""pi-SGD (Murphy et al. 2019, eq. 4 and Remark 2.1): uniformly random relabelings, and the one
op that draws and applies them in compiled code.

:class:`PiSGD` serves every RP consumer: :meth:`PiSGD.relabel` (RelationalPooling's eager path),
:meth:`PiSGD.node_positions` (RPGNN's IDs, one C++ call, or the ``sample_ids`` op under
``torch.compile``), :meth:`PiSGD.group_positions` (IDs within groups, RP-Duvenaud) and
:meth:`PiSGD.relabel_dense`, the registered op ``rpfast::pisgd_relabel`` (draw and gather in one
op with static output shapes, so a compiled RelationalPooling has no graph break).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from rpfast._uploads import upload
from rpfast._validation import check_count
from rpfast.nn.rp.strategies import NodePositions, Strategy, _check_graph, _sample_counts, _uniform
from rpfast.ops import permute_adjacency, permute_nodes, random_permutations
from rpfast.ops._registry import compiling, declare
from rpfast.ops.random import graph_positions, sample_ids_op

__all__ = ["PiSGD", "pisgd_relabel_op"]


class PiSGD(Strategy):
    r"""Uniformly random relabelings, fresh on every call (pi-SGD, eq. 4 and Remark 2.1).

    Training draws ``train_samples`` relabelings per graph (an unbiased estimate of the exact
    average, so SGD on it optimises the RP objective); eval mode averages ``eval_samples``.

    Args:
        max_nodes: the ``K`` positions f sees; graphs may not be larger.
        train_samples, eval_samples: relabelings per graph per call.
        k: instead of ``max_nodes``: f sees the first ``k`` positions of each relabeling, a
            uniformly random ordered k-subset of a graph of any size (k-ary RP, eq. 5, by
            sampling); smaller graphs are padded.

    With neither ``max_nodes`` nor ``k`` the relabelings cover graphs of any size: ``K`` is the
    width of RelationalPooling's dense input (``n_max`` of a graph batch; what
    ``RelationalPooling(f)`` uses), and ID-based RP (:class:`~rpfast.nn.rp.RPGNN`), which
    needs no width, numbers every node. ID-based RP needs every vertex placed, so with ``k``
    its graphs may have at most ``k`` vertices.
    """

    def __init__(self, max_nodes: Optional[int] = None, train_samples: int = 1, eval_samples: int = 5, *,
                 k: Optional[int] = None):
        if max_nodes is not None and k is not None:
            raise ValueError("PiSGD takes max_nodes (the largest graph) or k (positions per sample), not both")
        self.truncate = k is not None
        self.size = (check_count(k, "k", minimum=1) if self.truncate else
                     None if max_nodes is None else check_count(max_nodes, "max_nodes", minimum=0))
        self.train_samples, self.eval_samples = _sample_counts(train_samples, eval_samples, 1, 5)
        self.needs_edges = False  # uniform draws over each graph's vertices: the sizes decide

    def relabel(self, graph, training, generator=None):
        if not self.truncate and self.size is not None:
            self._check_sizes(graph, self.size, "max_nodes")
        return _uniform(random_permutations(graph.num_nodes, self.samples(training), k=self.size, generator=generator))

    def node_positions(self, graph, training, generator=None, modulus=None) -> List[NodePositions]:
        """``[NodePositions(positions [P, N], None)]``: uniform positions (the uniform
        distribution is closed under inversion, so drawn positions are the inverse of a uniform
        relabeling), one C++ call without the ``[B, P, n_max]`` relabelings; under
        ``torch.compile`` the ``sample_ids`` op, which draws from torch's default generator."""
        _check_graph(graph)
        samples = self.samples(training)
        if compiling():
            bound = graph.total_nodes if modulus is None else modulus
            return [NodePositions(sample_ids_op(graph.ptr, graph.total_nodes, samples, max(1, bound)), None)]
        modulus = max(1, graph.total_nodes) if modulus is None else check_count(modulus, "modulus", minimum=1)
        if self.truncate and graph.num_graphs and graph.n_max > self.size:
            b = int(torch.nonzero(graph.num_nodes > self.size)[0, 0])
            raise ValueError(f"{self!r} places the first {self.size} vertices of a relabeling, but graph {b} has "
                             f"{int(graph.num_nodes[b])}: ID-based RP needs every vertex placed; use PiSGD() or "
                             "PiSGD(max_nodes)")
        if self.size is not None:
            self._check_sizes(graph, self.size, "max_nodes")
        return [NodePositions(graph_positions(graph, samples, modulus, generator=generator), None)]

    def group_positions(self, groups: Tensor, training: bool, generator: Optional[torch.Generator] = None,
                        modulus: Optional[int] = None) -> Tensor:
        """``[P, N]``: every node's position under a uniform random order of its group (``groups
        [N]`` labels, any integers; RP-Duvenaud numbers the atoms of each element of a molecule),
        mod ``modulus``; drawn on the CPU, returned on ``groups``' device. Groups are not graphs:
        ``max_nodes`` / ``k`` do not apply."""
        if not isinstance(groups, Tensor) or groups.dim() != 1:
            raise ValueError(f"groups must be a [N] tensor of group labels, got {_shape(groups)}")
        modulus = None if modulus is None else check_count(modulus, "modulus", minimum=1)
        _, group = torch.unique(groups.cpu(), return_inverse=True)
        sizes = torch.bincount(group)
        order = torch.argsort(group, stable=True)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]])
        local = torch.empty_like(group)
        local[order] = torch.arange(group.numel()) - starts[group[order]]
        positions = random_permutations(sizes, self.samples(training), generator=generator)  # [G, P, max size]
        positions = positions[group, :, local]
        return upload((positions if modulus is None else positions % modulus).t().contiguous(), groups.device)

    def relabel_dense(self, adj: Tensor, x: Tensor, num_nodes: Tensor,
                      training: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """The compiled form of :meth:`relabel` plus the gathers: ``(adj_p [B P, K, K, C],
        x_p [B P, K, F], mask [B P, K], weights [B, P])`` (``K``: ``size``, else ``adj``'s width),
        drawn from torch's default generator (compiled code has no other)."""
        samples = self.samples(training)
        k = adj.shape[1] if self.size is None else self.size
        adj_p, x_p, mask = pisgd_relabel_op(adj, x, num_nodes, samples, k)
        weights = torch.full((adj.shape[0], samples), 1.0 / samples, dtype=torch.float64, device=adj.device)
        return adj_p, x_p, mask, weights

    def __repr__(self):
        size = f"k={self.size}, " if self.truncate else "" if self.size is None else f"max_nodes={self.size}, "
        return f"PiSGD({size}train_samples={self.train_samples}, eval_samples={self.eval_samples})"


def _shape(value) -> str:
    return f"shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__


def _pisgd_relabel(adj: Tensor, x: Tensor, num_nodes: Tensor, samples: int, k: int) -> List[Tensor]:
    perms = random_permutations(num_nodes, samples, k=k)  # torch's default generator: compiled code has no other
    return [permute_adjacency(adj, perms).flatten(0, 1), permute_nodes(x, perms).flatten(0, 1),
            (perms >= 0).flatten(0, 1)]


def _pisgd_relabel_fake(adj, x, num_nodes, samples, k):
    M = adj.shape[0] * samples
    return [adj.new_empty((M, k, k, *adj.shape[3:])), x.new_empty((M, k, *x.shape[2:])),
            num_nodes.new_empty((M, k), dtype=torch.bool)]


pisgd_relabel_op = declare(
    "pisgd_relabel", "(Tensor adj, Tensor x, Tensor num_nodes, int samples, int k) -> Tensor[]",
    kernels={"cpu": _pisgd_relabel}, composed=_pisgd_relabel, fake=_pisgd_relabel_fake)
pisgd_relabel_op.__doc__ = """``[adj_p [B P, k, k, C], x_p [B P, k, F], mask [B P, k]]``: ``samples`` uniformly
random relabelings of every dense graph (its first ``k`` positions), as RelationalPooling's
pi-SGD feeds f in compiled code. The relabeled inputs carry no gradient to ``adj`` and ``x``."""
