r"""RP-GNN (Murphy et al. 2019, eq. 3): Relational Pooling for any PyTorch Geometric-style GNN."""
import inspect
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rpfast._validation import check_count, is_pyg_data
from rpfast.data import GraphBatch
from rpfast.nn.gin import GIN
from rpfast.ops import random_permutations
from rpfast.ops._registry import compiling
from rpfast.ops.random import sample_ids_op
from rpfast.ops.random import random_positions

__all__ = ["RPGNN", "replica_mean", "takes_edge_attr"]


def takes_edge_attr(module: nn.Module) -> bool:
    """Whether ``module.forward`` accepts ``edge_attr=`` (by name or through ``**kwargs``): a GNN
    without edge features (a GCN, say) is called without them."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature (a scripted or C++ module): pass them
        return True
    return any(p.name == "edge_attr" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def replica_mean(t: Tensor) -> Tensor:
    """The mean over the leading replica dimension (one replica: the same values, as a view
    with a cheaper backward than a mean)."""
    return t.squeeze(0) if t.shape[0] == 1 else t.mean(dim=0)


class RPGNN(nn.Module):
    r"""Wrap a GNN ``gnn(x, edge_index, batch, **kwargs) -> [B, D]`` into RP-GNN (eq. 3).

    Node ``v`` of a graph relabeled by :math:`\pi` gets the input
    :math:`[x_v, \mathrm{onehot}(\pi(v) \bmod m)]` (features first, then ``m = id_dim`` one-hot
    columns), and the GNN's graph outputs are averaged over relabelings:

    .. math:: \bar f(G) = \mathbb{E}_\pi\, \mathrm{GNN}\big(A, [X, \mathrm{onehot}(\pi \bmod m)]\big)

    Training draws ``train_samples`` fresh relabelings per graph and call (pi-SGD); eval mode
    averages ``eval_samples`` (default ``id_dim``). All relabelings run in ONE call of the GNN:
    they are replicas of the batch (``P * B`` disjoint graphs), so ``gnn`` must treat the
    graphs of a batch independently (message passing and a per-graph readout do). The GNN's
    first layer must take ``in_dim + id_dim`` input features.

    An :class:`rpfast.nn.GIN` built with the same ``id_dim`` takes the IDs themselves instead
    (``gin(x, graph, ids [P, N]) -> [P, B, D]``): its first linear map turns the one-hot block
    into a gather of weight rows, so no ``[P * N, in_dim + id_dim]`` input is ever built and the
    replicas share one CSR. That is :class:`rpfast.nn.RPGIN`.

    Args:
        gnn: the wrapped module; called as ``gnn(x, edge_index, batch)`` plus ``edge_attr=`` when
            the input has edge features and ``gnn.forward`` takes an ``edge_attr`` argument (or
            ``**kwargs``), plus any keyword arguments given to :meth:`forward`.
        id_dim: m, the one-hot ID width (``1``: plain GNN, ``n_max``: most expressive).
        train_samples, eval_samples: relabelings per graph per call.
        generator: CPU ``torch.Generator`` for reproducible relabelings.

    Shapes: ``forward(data)`` for a PyG ``Data``/``Batch`` or a :class:`~rpfast.data.GraphBatch`,
    or ``forward(x [N, F], edge_index [2, E], batch [N], edge_attr=None)``; returns the
    averaged ``[B, D]`` graph outputs (or ``[N, D]`` if the GNN returns node outputs).
    """

    def __init__(self, gnn: nn.Module, id_dim: int, train_samples: int = 1, eval_samples: Optional[int] = None,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(gnn, nn.Module):
            raise TypeError(f"gnn must be a torch.nn.Module, got {type(gnn).__name__}")
        self.gnn = gnn
        self.id_dim = check_count(id_dim, "id_dim", minimum=1)
        self._takes_ids = isinstance(gnn, GIN) and gnn.id_dim > 0
        if self._takes_ids and gnn.id_dim != self.id_dim:
            raise ValueError(f"the GIN was built with id_dim={gnn.id_dim} but RPGNN with id_dim={self.id_dim}")
        self.train_samples = check_count(train_samples, "train_samples", minimum=1)
        self.eval_samples = self.id_dim if eval_samples is None else check_count(eval_samples, "eval_samples", 1)
        self.generator = generator
        self._takes_edge_attr = takes_edge_attr(gnn)

    def _graph(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None,
              edge_attr: Optional[Tensor] = None) -> GraphBatch:
        """The :class:`~rpfast.data.GraphBatch` of any accepted input form."""
        if is_pyg_data(data) or isinstance(data, GraphBatch):
            if edge_index is not None or batch is not None or edge_attr is not None:
                raise TypeError("with a graph object, pass no edge_index, batch or edge_attr (it holds them)")
            return GraphBatch.from_pyg(data) if is_pyg_data(data) else data
        if isinstance(data, Tensor) and edge_index is not None:
            return GraphBatch(edge_index, x=data, edge_attr=edge_attr,
                              batch=torch.zeros(data.shape[0], dtype=torch.int64, device=data.device) if batch is None
                              else batch)
        raise TypeError(f"{type(self).__name__} takes a PyG Data/Batch, a GraphBatch, or "
                        f"(x, edge_index, batch, edge_attr=None), got {type(data).__name__}")

    def forward(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, **kwargs) -> Tensor:
        graph = self._graph(data, edge_index, batch, edge_attr)
        P = self.train_samples if self.training else self.eval_samples
        ids = self.sample_ids(graph, P)  # [P, N]
        if self._takes_ids:
            if kwargs:
                raise TypeError(f"an rpfast GIN takes no extra arguments, got {sorted(kwargs)}")
            return replica_mean(self.gnn(graph.x, graph, ids))
        if graph.x is None:
            raise ValueError("RPGNN needs node features x (use a column of ones for featureless graphs)")
        N, B = graph.total_nodes, graph.num_graphs
        x = torch.cat([graph.x.unsqueeze(0).expand(P, -1, -1),
                       F.one_hot(ids, self.id_dim).to(graph.x.dtype)], dim=-1).flatten(0, 1)  # [P * N, F + m]
        shift = torch.arange(P, device=graph.device).repeat_interleave(graph.num_edges) * N
        replica_edges = graph.edge_index.repeat(1, P) + shift
        replica_batch = (graph.batch.unsqueeze(0) + B * torch.arange(P, device=graph.device).unsqueeze(1)).reshape(-1)
        if graph.edge_attr is not None and self._takes_edge_attr:
            kwargs["edge_attr"] = graph.edge_attr.repeat(P, 1)
        out = self.gnn(x, replica_edges, replica_batch, **kwargs)
        if out.shape[0] == P * B:
            return out.reshape(P, B, *out.shape[1:]).mean(dim=0)
        if out.shape[0] == P * N:
            return out.reshape(P, N, *out.shape[1:]).mean(dim=0)
        raise ValueError(f"the GNN returned {out.shape[0]} rows for {P} replicas of {B} graphs / {N} nodes; "
                         f"it must return one row per graph ({P * B}) or per node ({P * N})")

    def id_groups(self, graph: GraphBatch) -> Optional[Tensor]:
        """``[N]`` group of every node: IDs are positions under a random order of each group
        (None: the group is the node's graph, the paper's eq. 3). Subclasses override this, e.g.
        to number the atoms of each element separately."""
        return None

    def sample_ids(self, graph: GraphBatch, num_samples: int) -> Tensor:
        """``[num_samples, N]`` ID of every node: its position under a uniform order of its group
        (:meth:`id_groups`), mod m. (The uniform distribution is closed under inversion, so a
        sampled row serves directly as the nodes' positions.)"""
        groups = self.id_groups(graph)
        if groups is None and compiling():
            # one custom op (no data-dependent shapes); compiled code draws from torch's default generator
            return sample_ids_op(graph.ptr, graph.total_nodes, num_samples, self.id_dim)
        if groups is None:  # the paper's IDs: positions within each graph, one C++ call
            return random_positions(graph.ptr, num_samples, self.id_dim, generator=self.generator)
        if not isinstance(groups, Tensor) or groups.shape != (graph.total_nodes,):
            raise ValueError(f"id_groups must return [N={graph.total_nodes}] group labels")
        _, group = torch.unique(groups.cpu(), return_inverse=True)  # positions are drawn on the CPU
        sizes = torch.bincount(group)
        order = torch.argsort(group, stable=True)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]])
        local = torch.empty_like(group)
        local[order] = torch.arange(group.numel()) - starts[group[order]]
        positions = random_permutations(sizes, num_samples, generator=self.generator)  # [G, P, max size]
        return (positions[group, :, local] % self.id_dim).t().contiguous().to(graph.device)
