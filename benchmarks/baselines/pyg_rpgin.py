"""RP-GIN as a PyG user would write it: PyG GINConv, dense one-hot IDs, a randperm per graph."""
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GINConv, global_add_pool


class PygRPGIN(nn.Module):
    """Same architecture as rpfast.nn.RPGIN (5 GIN layers, 2-layer MLPs, BN, sum readout)."""

    def __init__(self, in_dim, hidden, num_layers, out_dim, id_dim):
        super().__init__()
        self.id_dim = id_dim
        dims = [in_dim + id_dim] + [hidden] * num_layers
        self.convs = nn.ModuleList(
            GINConv(nn.Sequential(nn.Linear(dims[l], hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden)), train_eps=True)
            for l in range(num_layers)
        )
        self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(num_layers))
        self.classifier = nn.Linear(in_dim + id_dim + num_layers * hidden, out_dim)

    def forward(self, data, ids=None):
        """Logits ``[B, out_dim]``; ``ids [N]``: the nodes' IDs (drawn here, a ``randperm`` per
        graph, when None)."""
        if ids is None:
            sizes = torch.bincount(data.batch, minlength=data.num_graphs).tolist()
            ids = torch.cat([torch.randperm(n) % self.id_dim for n in sizes])
        h = torch.cat([data.x, F.one_hot(ids, self.id_dim).float()], dim=1)
        pooled = [global_add_pool(h, data.batch)]
        for conv, bn in zip(self.convs, self.bns):
            h = torch.relu(bn(conv(h, data.edge_index)))
            pooled.append(global_add_pool(h, data.batch))
        return self.classifier(torch.cat(pooled, dim=1))


def load_rpfast_weights(pyg: PygRPGIN, gin) -> None:
    """Give ``pyg`` the weights of rpfast's ``GIN`` ``gin`` (an RP-GIN's, same sizes) so both
    compute one function. rpfast applies a layer's first map before the aggregation and has no
    biases before a BatchNorm; PyG's map after it, so its biases are zeroed and the first map's
    columns are rpfast's feature map next to its ID rows."""
    with torch.no_grad():
        for layer, conv, bn in zip(gin.layers, pyg.convs, pyg.bns):
            first, norm, _, second = conv.nn
            parts = [layer.first.weight] + ([layer.id_weight.T] if layer.id_weight is not None else [])
            first.weight.copy_(torch.cat(parts, dim=1))
            first.bias.zero_()
            conv.eps.copy_(layer.eps.reshape(()))
            _copy_norm(norm, layer.norms[0])
            second.weight.copy_(layer.linears[0].weight)
            second.bias.zero_()
            _copy_norm(bn, layer.norms[1])
        pyg.classifier.weight.copy_(gin.classifier.weight)
        pyg.classifier.bias.copy_(gin.classifier.bias)


def _copy_norm(target: nn.BatchNorm1d, source: nn.BatchNorm1d) -> None:
    """Tensor by tensor: a flat-parameter model's submodules have no state dict of their own."""
    for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
        getattr(target, name).copy_(getattr(source, name))
