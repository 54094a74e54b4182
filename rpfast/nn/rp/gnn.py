r"""RP-GNN (Murphy et al. 2019, eq. 3): Relational Pooling for any PyTorch Geometric-style GNN."""
import inspect
from typing import Callable, Iterable, Optional

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast._validation import check_count
from rpfast.data import GraphBatch
from rpfast.nn.gin import GIN
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.rp.pisgd import PiSGD
from rpfast.nn.rp.strategies import NodePositions, Strategy
from rpfast.nn._unsupported import NotScriptable

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


def _replica_average(out: Tensor, weights: Optional[Tensor], row_graph: Optional[Tensor] = None) -> Tensor:
    r"""``out [P, R, ...]`` averaged over the ``P`` replicas: the mean when ``weights`` is None
    (uniform), else :math:`\sum_p w_{b(r),p}\, \mathrm{out}_{p,r}` with ``weights [B, P]`` and
    ``b(r)`` the graph of row ``r`` (``row_graph [R]``; None: row ``r`` is graph ``r``)."""
    if weights is None:
        return replica_mean(out)
    weights = upload(weights, out.device, out.dtype)  # to the rows' device: nothing is read back
    w = (weights if row_graph is None else weights[row_graph]).t()  # [P, R]
    w = w.reshape(*w.shape, *([1] * (out.dim() - 2)))
    return (out * w).sum(dim=0)


class RPGNN(NotScriptable, nn.Module):
    r"""Wrap a GNN ``gnn(x, edge_index, batch, **kwargs) -> [B, D]`` into RP-GNN (eq. 3).

    Node ``v`` of a graph relabeled by :math:`\pi` gets the input
    :math:`[x_v, \mathrm{onehot}(\pi^{-1}(v) \bmod m)]` (features first, then ``m = id_dim``
    one-hot columns: its position mod m), and the GNN's outputs are averaged over the
    relabelings the strategy yields, with their weights:

    .. math:: \bar f(G) = \sum_p w_p\, \mathrm{GNN}\big(A, [X, \mathrm{onehot}(\pi_p^{-1} \bmod m)]\big)

    The default strategy, ``PiSGD(train_samples=1, eval_samples=id_dim)``, draws one fresh
    uniform relabeling per graph in training (pi-SGD) and averages ``id_dim`` in eval mode. Any
    strategy that places every vertex serves (:class:`~rpfast.nn.rp.Exact`, ``PiSGD`` without
    ``k`` or with ``k`` at least the largest graph, :class:`~rpfast.nn.rp.Oriented` with a size
    at least the largest graph, ...); one that leaves a vertex without a position (a truncated
    k-ary view, ``KAry`` with ``k`` below a graph's size) is a ValueError at the call. Each block of relabelings runs in ONE call
    of the GNN: they are replicas of the batch (``P * B`` disjoint graphs), so ``gnn`` must treat
    the graphs of a batch independently (message passing and a per-graph readout do). The
    GNN's first layer must take ``in_dim + id_dim`` input features.

    An :class:`rpfast.nn.GIN` built with the same ``id_dim`` takes the IDs themselves instead
    (``gin(x, graph, ids=ids [P, N]) -> [P, B, D]``): its first linear map turns the one-hot block
    into a gather of weight rows, so no ``[P * N, in_dim + id_dim]`` input is ever built and the
    replicas share one CSR. That is :class:`rpfast.nn.RPGIN`.

    Args:
        gnn: the wrapped module; called as ``gnn(x, edge_index, batch)`` plus ``edge_attr=`` when
            the input has edge features and ``gnn.forward`` takes an ``edge_attr`` argument (or
            ``**kwargs``), plus any keyword arguments given to :meth:`forward`.
        id_dim: m, the one-hot ID width (``1``: plain GNN, ``n_max``: most expressive).
        strategy: the relabelings (:class:`~rpfast.nn.rp.Strategy`); the module's mode picks
            their count.
        generator: CPU ``torch.Generator`` for reproducible relabelings.

    Shapes: any input of :func:`~rpfast.nn.graph_input.read_graph_input` (a PyG ``Data``/``Batch``,
    a :class:`~rpfast.data.GraphBatch`, ``(x [N, F], edge_index [2, E], batch [N] = None,
    edge_attr = None)`` or ``(x, graph)``); returns the averaged ``[B, D]`` graph outputs (or
    ``[N, D]`` if the GNN returns node outputs).
    """

    def __init__(self, gnn: nn.Module, id_dim: int, strategy: Optional[Strategy] = None,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(gnn, nn.Module):
            raise TypeError(f"gnn must be a torch.nn.Module, got {type(gnn).__name__}")
        self.gnn = gnn
        self.id_dim = check_count(id_dim, "id_dim", minimum=1)
        self._takes_ids = isinstance(gnn, GIN) and gnn.id_dim > 0
        if self._takes_ids and gnn.id_dim != self.id_dim:
            raise ValueError(f"the GIN was built with id_dim={gnn.id_dim} but RPGNN with id_dim={self.id_dim}")
        if strategy is None:
            strategy = PiSGD(train_samples=1, eval_samples=self.id_dim)
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be an rpfast.nn.rp Strategy (PiSGD, Exact, Oriented, KAry), "
                            f"got {strategy!r}")
        if type(self).id_groups is not RPGNN.id_groups and not isinstance(strategy, PiSGD):
            raise ValueError(f"{type(self).__name__} numbers nodes within groups (id_groups), which only uniform "
                             f"random orders relabel: use a PiSGD strategy, got {strategy!r}")
        self.strategy = strategy
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.generator = generator
        self._takes_edge_attr = takes_edge_attr(gnn)

    def forward(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, **kwargs) -> Tensor:
        x, graph = read_graph_input(type(self).__name__, data, edge_index, batch, edge_attr,
                                    training=self.training)
        if self._takes_ids:
            if kwargs:
                raise TypeError(f"an rpfast GIN takes no extra arguments, got {sorted(kwargs)}")
            return self._average(graph, lambda ids: self.gnn.replica_logits(x, graph, ids))
        if x is None:
            raise ValueError("RPGNN needs node features x (use a column of ones for featureless graphs)")
        return self._average(graph, lambda ids: self._replicas(x, graph, ids, kwargs))

    def _average(self, graph: GraphBatch, run: Callable[[Tensor], Tensor]) -> Tensor:
        """``sum_p w_p run(ids_p)`` over the ID blocks of :meth:`node_ids`; ``run(ids [P, N])``
        returns ``[P, B, ...]`` graph rows or ``[P, N, ...]`` node rows."""
        total = None
        for ids, weights in self.node_ids(graph):
            out = run(ids)
            rows = None if weights is None or out.shape[1] == graph.num_graphs else graph.batch
            pooled = _replica_average(out, weights, rows)
            total = pooled if total is None else total + pooled
        return total

    def _replicas(self, x: Tensor, graph: GraphBatch, ids: Tensor, kwargs) -> Tensor:
        """The GNN on ``P`` replicas of the batch with one-hot IDs: ``[P, B, ...]`` or ``[P, N, ...]``.
        An rpfast model (``graph_batch_input``) gets the replicas as a GraphBatch, built without
        reading the device; any other GNN gets ``(x, edge_index, batch)``."""
        P, N, B = ids.shape[0], graph.total_nodes, graph.num_graphs
        # one-hot by comparison: F.one_hot reads the IDs' range back on the CPU. An ID outside
        # [0, id_dim) would give a zero row, not an error: these are drawn mod id_dim
        one_hot = (ids.unsqueeze(-1) == torch.arange(self.id_dim, device=ids.device)).to(x.dtype)
        x = torch.cat([x.unsqueeze(0).expand(P, -1, -1), one_hot], dim=-1).flatten(0, 1)  # [P * N, F + m]
        replicas = graph.replicate(P)
        edge_attr = graph.edge_attr.repeat(P, 1) if graph.edge_attr is not None and self._takes_edge_attr else None
        if getattr(self.gnn, "graph_batch_input", False):
            replicas.edge_attr = edge_attr
            out = self.gnn(x, replicas, **kwargs)
        else:
            if edge_attr is not None:
                kwargs = {**kwargs, "edge_attr": edge_attr}
            out = self.gnn(x, replicas.edge_index, replicas.batch, **kwargs)
        if out.shape[0] == P * B:
            return out.reshape(P, B, *out.shape[1:])
        if out.shape[0] == P * N:
            return out.reshape(P, N, *out.shape[1:])
        raise ValueError(f"the GNN returned {out.shape[0]} rows for {P} replicas of {B} graphs / {N} nodes; "
                         f"it must return one row per graph ({P * B}) or per node ({P * N})")

    def id_groups(self, graph: GraphBatch) -> Optional[Tensor]:
        """``[N]`` group of every node: IDs are positions under a random order of each group
        (None: the group is the node's graph, the paper's eq. 3). Subclasses override this, e.g.
        to number the atoms of each element separately (then the strategy must be PiSGD)."""
        return None

    def node_ids(self, graph: GraphBatch) -> Iterable[NodePositions]:
        """The IDs of one forward in the module's mode, block by block: ``NodePositions(ids [P, N],
        weights [B, P] or None = uniform)``, ``ids`` every node's position under the strategy's
        relabelings (within its :meth:`id_groups` group, if any) mod ``id_dim``."""
        groups = self.id_groups(graph)
        if groups is not None and (not isinstance(groups, Tensor) or groups.shape != (graph.total_nodes,)):
            raise ValueError(f"id_groups must return [N={graph.total_nodes}] group labels")
        if groups is None:
            return self.strategy.node_positions(graph, self.training, self.generator, modulus=self.id_dim)
        positions = self.strategy.group_positions(groups, self.training, self.generator, self.id_dim)
        return [NodePositions(upload(positions, graph.device), None)]  # groups may come from the host
