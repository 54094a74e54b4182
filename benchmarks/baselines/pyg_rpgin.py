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

    def forward(self, data):
        sizes = torch.bincount(data.batch, minlength=data.num_graphs).tolist()
        ids = torch.cat([torch.randperm(n) % self.id_dim for n in sizes])
        h = torch.cat([data.x, F.one_hot(ids, self.id_dim).float()], dim=1)
        pooled = [global_add_pool(h, data.batch)]
        for conv, bn in zip(self.convs, self.bns):
            h = torch.relu(bn(conv(h, data.edge_index)))
            pooled.append(global_add_pool(h, data.batch))
        return self.classifier(torch.cat(pooled, dim=1))
