"""One GIN layer as a module (the layer-by-layer path of :class:`rpfast.nn.GIN`)."""
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast.data import GraphBatch
from rpfast.ops.gin_network import GINLayerParams
from rpfast.nn.runtime.batch_norm_steps import batch_norm_arguments
from rpfast.ops import gin_aggregate
from rpfast.ops.dense import embedding_op, linear
from rpfast.ops.gin_layer import gin_mlp
from rpfast.nn._unsupported import NotScriptable

__all__ = ["GINLayer"]


class GINLayer(NotScriptable, nn.Module):
    r"""One GIN layer: aggregation, then an MLP of ``mlp_layers`` linear maps, each followed
    by BatchNorm and ReLU (Xu et al.'s MLP plus their outer BN-ReLU).

    .. math::
        h_i' = \mathrm{MLP}\Big((1+\epsilon) z_i + \sum_{j\to i} z_j\Big),\qquad
        z = [h, \mathrm{onehot}(\mathrm{id})]\, W_1^\top

    The first linear map commutes with the (linear) aggregation, so it is applied before
    it, in the narrower width: ``z = h W_h^T + W_id[id]``. The one-hot ID block is thus a
    gather of learned rows and is never materialised as an ``[N, id_dim]`` matrix. Linear
    maps carry no bias because the BatchNorm after each one removes any per-channel shift.
    The aggregation and the BatchNorm-ReLU stages form one autograd node on the CPU
    (:func:`rpfast.ops.gin_mlp`).

    With ``edge_dim > 0`` the layer is GINE-style (Hu et al., 2020): every message carries
    its edge's features, in the projected width,

    .. math:: a_i = (1+\epsilon) z_i + \sum_{j\to i} \mathrm{ReLU}\big(z_j + e_{ji} W_e^\top + b_e\big),

    so bond types reach the MLP (the messages are summed in torch, then the MLP stages run as
    one node).

    Args:
        in_dim: node feature width (0 for none).
        hidden: output width.
        mlp_layers: linear maps in the MLP (>= 1).
        train_eps: learn eps.
        id_dim: one-hot ID width (0 for none).
        edge_dim: edge feature width (0: plain GIN; > 0: GINE messages, ``graph.edge_attr
            [E, edge_dim]`` required).

    Shapes: ``h [R, N, in_dim]`` or None, ``ids [R, N]`` int64 in ``[0, id_dim)`` or None ->
    ``[R, N, hidden]``. The layer does not read the IDs back to check their range (an
    :class:`~rpfast.nn.GIN` does, with a message naming the values); an ID outside it raises
    torch's ``IndexError`` on the CPU and a device-side assert on CUDA.
    """

    def __init__(self, in_dim: int, hidden: int, mlp_layers: int = 2, train_eps: bool = True, id_dim: int = 0,
                 edge_dim: int = 0):
        super().__init__()
        if in_dim + id_dim < 1:
            raise ValueError("a GIN layer needs node features (in_dim) or IDs (id_dim)")
        if mlp_layers < 1:
            raise ValueError(f"mlp_layers must be >= 1, got {mlp_layers}")
        self.in_dim, self.id_dim = in_dim, id_dim
        self.first = nn.Linear(in_dim, hidden, bias=False) if in_dim else None
        self.id_weight = nn.Parameter(torch.empty(id_dim, hidden)) if id_dim else None
        if id_dim:
            bound = 1 / (in_dim + id_dim) ** 0.5  # nn.Linear's init for the full [x, onehot] input
            nn.init.uniform_(self.id_weight, -bound, bound)
        self.linears = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(mlp_layers - 1))
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(mlp_layers))
        self.eps = nn.Parameter(torch.zeros(1)) if train_eps else None
        self.register_buffer("fixed_eps", torch.zeros(1))
        self.edge_dim = edge_dim
        self.edge = nn.Linear(edge_dim, hidden) if edge_dim else None

    def forward(self, h: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor] = None) -> Tensor:
        z = None
        if self.first is not None:
            z = linear(h, self.first.weight)
        if self.id_weight is not None:
            if ids is None:
                raise ValueError("this layer was built with id_dim > 0 and needs ids")
            # [R, N, hidden], a gather of weight rows; GIN checked the ID range (or drew the IDs),
            # and torch.embedding refuses any index outside [0, id_dim) itself
            emb = embedding_op(self.id_weight, ids)
            z = emb if z is None else z + emb
        eps = self.eps if self.eps is not None else self.fixed_eps
        z = z if z.dim() == 3 else z.unsqueeze(0)
        aggregate = self.edge is None
        if not aggregate:
            z = self._edge_aggregate(z, graph, eps)
        if not self.plain_norms():
            return self._mlp_modules(gin_aggregate(z, graph, eps) if aggregate else z)
        return gin_mlp(z, graph, eps, [linear.weight for linear in self.linears], training=self.training,
                       aggregate=aggregate, **batch_norm_arguments(self.norms, self.training))

    def plain_norms(self) -> bool:
        """Whether every norm is a plain ``BatchNorm1d`` whose statistics rpfast's kernels update
        (a ``SyncBatchNorm`` must synchronise them itself, so its module runs)."""
        return all(type(bn) is nn.BatchNorm1d for bn in self.norms)

    def _mlp_modules(self, a: Tensor) -> Tensor:
        """The MLP stages through the norm modules themselves: a ``SyncBatchNorm`` (multi-process
        training) all-reduces its statistics across processes, which the fused C++ stages cannot."""
        R, N, H = a.shape
        h = a.reshape(R * N, H)
        for stage, norm in enumerate(self.norms):
            if stage:
                h = linear(h, self.linears[stage - 1].weight)
            h = torch.relu(norm(h))
        return h.view(R, N, h.shape[-1])

    def params(self) -> GINLayerParams:
        """This layer's tensors for the whole-network C++ call, by name."""
        return GINLayerParams(
            first=self.first.weight if self.first is not None else None, id_weight=self.id_weight,
            eps=self.eps if self.eps is not None else self.fixed_eps,
            weights=[linear.weight for linear in self.linears], gammas=[bn.weight for bn in self.norms],
            betas=[bn.bias for bn in self.norms], running_means=[bn.running_mean for bn in self.norms],
            running_vars=[bn.running_var for bn in self.norms], bn_eps=[float(bn.eps) for bn in self.norms])

    def _edge_aggregate(self, z: Tensor, graph: GraphBatch, eps: Tensor) -> Tensor:
        """``(1 + eps) z_i + sum_{j->i} ReLU(z_j + edge(e_ji))`` for ``z [R, N, H]``."""
        edge_attr = graph.edge_attr
        if edge_attr is None:
            raise ValueError(f"this GIN layer was built with edge_dim={self.edge_dim} and needs edge features: "
                             f"give the graph edge_attr [E, {self.edge_dim}]")
        if edge_attr.dim() != 2 or edge_attr.shape[1] != self.edge_dim:
            raise ValueError(f"edge_attr must have shape [E={graph.num_edges}, {self.edge_dim}], "
                             f"got {tuple(edge_attr.shape)}")
        source, target = graph.edge_index
        messages = torch.relu(z[:, source] + self.edge(edge_attr.to(z.dtype)))  # [R, E, H]
        return (1 + eps) * z + torch.zeros_like(z).index_add_(1, target, messages)
