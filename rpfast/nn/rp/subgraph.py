r"""k-ary RP for GNNs (paper Sec. 2.3 and the molecule experiments): a GNN applied to the
subgraphs induced by the first k positions of a strategy's relabelings, averaged."""
import inspect
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast._validation import index_tensor
from rpfast.data import GraphBatch
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.rp.gnn import takes_edge_attr
from rpfast.nn.rp.strategies import Strategy
from rpfast.nn._unsupported import NotScriptable

__all__ = ["SubgraphRP", "induced_subgraphs"]


def induced_subgraphs(graph: GraphBatch, perms: Tensor) -> GraphBatch:
    """The subgraphs induced by the vertices of ``perms [B, P, K]`` (gather convention, -1
    padding) as one batch of ``B * P`` graphs, graph ``b * P + p`` holding ``perms[b, p]`` in
    that order. Node features, edge features and an ``element`` extra are carried over. A
    vertex repeated within one row is an error of the caller (orders never repeat one)."""
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    perms = index_tensor(perms, "perms", ndim=3)
    B, P, K = perms.shape
    if B != graph.num_graphs:
        raise ValueError(f"perms has {B} rows but the graph batch holds {graph.num_graphs} graphs")
    sizes = graph.num_nodes.view(B, 1, 1).to(perms.device)
    if perms.numel() and bool(((perms < -1) | (perms >= sizes)).any()):
        b, p, i = (int(v) for v in torch.nonzero((perms < -1) | (perms >= sizes))[0])
        raise IndexError(f"perms[{b}, {p}, {i}] = {int(perms[b, p, i])} is not a vertex of graph {b} "
                         f"(0..{int(sizes[b, 0, 0]) - 1}, or -1 for padding)")
    return _induced(graph, perms.cpu(), graph.x)


def _induced(graph: GraphBatch, perms: Tensor, x: Optional[Tensor]) -> GraphBatch:
    """:func:`induced_subgraphs` of valid ``perms`` (on the CPU), carrying the node rows ``x [N,
    ...]`` (or None) instead of ``graph.x``. The structure is built on the host from the batch's
    host copy (:meth:`GraphBatch.host`) and moved; only the features are gathered on the
    batch's device, so nothing is read back from it."""
    host = graph.host()
    B, P, K = perms.shape
    valid = perms >= 0
    chosen = (perms + host.ptr[:-1].view(B, 1, 1))[valid]  # global ids, in (b, p, position) order
    replica_of = torch.arange(P).view(1, P, 1).expand(B, P, K)[valid]
    new_id = torch.full((P, host.total_nodes), -1, dtype=torch.int64)
    new_id[replica_of, chosen] = torch.arange(chosen.numel())
    source, target = host.edge_index
    src, dst = new_id[:, source], new_id[:, target]  # [P, E]
    keep = (src >= 0) & (dst >= 0)
    edge_rows = torch.nonzero(keep, as_tuple=True)[1]
    sizes = valid.sum(dim=-1).reshape(-1)
    structure = GraphBatch(torch.stack([src[keep], dst[keep]]), ptr=torch.cat([torch.zeros(1, dtype=torch.int64),
                                                                                 sizes.cumsum(0)]))
    sub = structure.to(graph.device)
    chosen, edge_rows = upload(chosen, graph.device), upload(edge_rows, graph.device)
    sub.x = None if x is None else x[chosen]
    sub.edge_attr = None if graph.edge_attr is None else graph.edge_attr[edge_rows]
    element = graph.__dict__.get("extras", {}).get("element")
    if element is not None:
        sub.extras["element"] = element[chosen]
    return sub


class SubgraphRP(NotScriptable, nn.Module):
    r"""k-ary RP around a GNN (eq. 5 with a GNN for f): the GNN sees the subgraph induced by the
    first ``K`` positions of each relabeling the strategy yields, and its outputs are averaged
    with the strategy's weights:

    .. math:: \bar f(G) = \sum_p w_p\, \mathrm{GNN}\big(G[\{\pi_p(1), \dots, \pi_p(K)\}]\big)

    ``Oriented("dfs", k, train_samples=1, eval_samples=20)`` is the paper's k-ary molecule
    model (the first k vertices of a DFS from a random start, random neighbour order; one per
    graph in training, 20 averaged in eval mode); ``KAry(k, ...)`` averages over k-subsets
    (the vertex order inside a subgraph does not matter to a GNN, so ``order="invariant"``
    is enough). The module's mode (``train()`` / ``eval()``) picks the strategy's count. Each
    block of relabelings runs in one batched call of the GNN.

    Args:
        gnn: called as ``gnn(subgraphs)`` with a :class:`~rpfast.data.GraphBatch` of ``B * P``
            subgraphs (graph ``b * P + p`` from relabeling ``p`` of graph ``b``; node features,
            edge features and an ``element`` extra carried over), or, when its ``forward`` needs
            two or more arguments (a PyG-style GNN), as ``gnn(x, edge_index, batch)`` on them (plus
            ``edge_attr=`` if it takes it, as :class:`~rpfast.nn.rp.RPGNN` does); returns
            ``[B * P, ...]``.
        strategy: the relabelings (:class:`~rpfast.nn.rp.Strategy`); its size is ``K``.
        generator: CPU ``torch.Generator`` for reproducible relabelings.

    Shapes: any input of :func:`~rpfast.nn.graph_input.read_graph_input` -> ``[B, ...]``. The
    strategy runs on the CPU; the subgraphs are cut where the graph lives.
    """

    def __init__(self, gnn: nn.Module, strategy: Strategy, generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(gnn, nn.Module):
            raise TypeError(f"gnn must be a torch.nn.Module, got {type(gnn).__name__}")
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be an rpfast.nn.rp Strategy (Oriented, KAry, PiSGD, Exact), "
                            f"got {strategy!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.gnn, self.strategy, self.generator = gnn, strategy, generator
        self._pyg_style = _required_positional(gnn) >= 2
        self._edge_attr = takes_edge_attr(gnn)

    def forward(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None) -> Tensor:
        x, graph = read_graph_input(type(self).__name__, data, edge_index, batch, edge_attr,
                                    training=self.training)
        on_cpu = graph.host()  # traversals run on the CPU
        total = None
        for perms, weights in self.strategy.relabel_chunks(on_cpu, self.training, self.generator):
            B, P = weights.shape
            out = self._call(_induced(graph, perms, x))
            if not isinstance(out, Tensor) or out.dim() == 0 or out.shape[0] != B * P:
                raise ValueError(f"the GNN must return one row per subgraph ({B * P}: {B} graphs x {P} relabelings), "
                                 f"got {tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__}")
            out = out.reshape(B, P, *out.shape[1:])
            if P and bool((weights == 1.0 / P).all()):  # uniform: the plain mean
                pooled = out.mean(dim=1)
            else:
                w = upload(weights, out.device, out.dtype).reshape(B, P, *([1] * (out.dim() - 2)))
                pooled = (out * w).sum(dim=1)
            total = pooled if total is None else total + pooled
        return total

    def _call(self, subgraphs: GraphBatch) -> Tensor:
        """The GNN on the subgraphs: ``gnn(subgraphs)``, or PyG-style ``gnn(x, edge_index, batch)``
        (plus ``edge_attr=`` if it takes it) for a GNN whose forward needs two or more arguments."""
        if not self._pyg_style:
            return self.gnn(subgraphs)
        if subgraphs.x is None:
            raise ValueError("a PyG-style GNN gnn(x, edge_index, batch) needs node features x: give the graph x "
                             "(a column of ones for graphs without features)")
        extra = {"edge_attr": subgraphs.edge_attr} if subgraphs.edge_attr is not None and self._edge_attr else {}
        return self.gnn(subgraphs.x, subgraphs.edge_index, subgraphs.batch, **extra)

    def __repr__(self):
        return f"SubgraphRP({self.gnn.__class__.__name__}, {self.strategy!r})"


def _required_positional(module: nn.Module) -> int:
    """How many positional arguments ``module.forward`` requires (1 where it cannot be told)."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is inspect.Parameter.empty for p in parameters)
