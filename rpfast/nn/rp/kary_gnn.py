r"""k-ary RP for GNNs (paper Sec. 2.3 and the molecule experiments): a GNN applied to the
subgraph induced by the first k vertices of a random DFS/BFS, averaged over samples."""
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast._validation import check_count, index_tensor, is_pyg_data
from rpfast.data import GraphBatch
from rpfast.nn.rp.strategies import Oriented

__all__ = ["KAryGNN", "induced_subgraphs"]


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
    sizes = graph.num_nodes.view(B, 1, 1)
    if perms.numel() and bool(((perms < -1) | (perms >= sizes)).any()):
        b, p, i = (int(v) for v in torch.nonzero((perms < -1) | (perms >= sizes))[0])
        raise IndexError(f"perms[{b}, {p}, {i}] = {int(perms[b, p, i])} is not a vertex of graph {b} "
                         f"(0..{int(sizes[b, 0, 0]) - 1}, or -1 for padding)")
    valid = perms >= 0
    chosen = (perms + graph.ptr[:-1].view(B, 1, 1))[valid]  # global ids, in (b, p, position) order
    replica_of = torch.arange(P, device=perms.device).view(1, P, 1).expand(B, P, K)[valid]
    new_id = torch.full((P, graph.total_nodes), -1, dtype=torch.int64, device=perms.device)
    new_id[replica_of, chosen] = torch.arange(chosen.numel(), device=perms.device)
    source, target = graph.edge_index
    src, dst = new_id[:, source], new_id[:, target]  # [P, E]
    keep = (src >= 0) & (dst >= 0)
    edge_rows = torch.nonzero(keep, as_tuple=True)[1]
    sizes = valid.sum(dim=-1).reshape(-1)
    sub = GraphBatch(torch.stack([src[keep], dst[keep]]), x=None if graph.x is None else graph.x[chosen],
                     edge_attr=None if graph.edge_attr is None else graph.edge_attr[edge_rows],
                     ptr=torch.cat([torch.zeros(1, dtype=torch.int64, device=sizes.device), sizes.cumsum(0)]))
    element = graph.__dict__.get("extras", {}).get("element")
    if element is not None:
        sub.extras["element"] = element[chosen]
    return sub


class KAryGNN(nn.Module):
    r"""k-ary RP around a GNN: the GNN sees the subgraph induced by the first ``k`` vertices of a
    depth- or breadth-first traversal from a uniformly random start (random neighbour order),

    .. math:: \bar f(G) = \mathbb{E}_{s}\, \mathrm{GNN}\big(G[\mathrm{DFS}_k(s)]\big),

    resampled on every training call (``train_samples`` per graph), averaged over
    ``eval_samples`` in eval mode (paper: 20), all samples in one batched call of the GNN.

    Args:
        gnn: called as ``gnn(graph)`` with a :class:`~rpfast.data.GraphBatch` of ``B * P``
            subgraphs; returns ``[B * P, ...]``.
        k: vertices per subgraph; method: ``"dfs"`` or ``"bfs"``.
        generator: CPU ``torch.Generator`` for reproducible starts.

    Shapes: ``forward(graph)`` (GraphBatch or PyG batch) -> ``[B, ...]``.
    """

    def __init__(self, gnn: nn.Module, k: int, method: str = "dfs", train_samples: int = 1,
                 eval_samples: int = 20, generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(gnn, nn.Module):
            raise TypeError(f"gnn must be a torch.nn.Module, got {type(gnn).__name__}")
        if method not in ("dfs", "bfs"):
            raise ValueError(f"method must be 'dfs' or 'bfs', got {method!r}")
        self.gnn, self.k, self.method = gnn, check_count(k, "k", 1), method
        self.train_samples = check_count(train_samples, "train_samples", 1)
        self.eval_samples = check_count(eval_samples, "eval_samples", 1)
        self.generator = generator

    def forward(self, data) -> Tensor:
        if is_pyg_data(data):
            data = GraphBatch.from_pyg(data)
        if not isinstance(data, GraphBatch):
            raise TypeError(f"KAryGNN takes a GraphBatch or a PyG Data/Batch, got {type(data).__name__}")
        P = self.train_samples if self.training else self.eval_samples
        on_cpu = data if data.device.type == "cpu" else data.to("cpu")  # traversals run on the CPU
        perms = Oriented(self.method, self.k, num_samples=P).relabel(on_cpu, True, self.generator).perms
        out = self.gnn(induced_subgraphs(data, perms.to(data.device)))
        return out.reshape(data.num_graphs, P, *out.shape[1:]).mean(dim=1)

    def __repr__(self):
        return f"KAryGNN({self.gnn.__class__.__name__}, k={self.k}, method={self.method!r})"
