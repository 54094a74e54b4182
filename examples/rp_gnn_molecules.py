"""RP over your own PyTorch Geometric GNN on RDKit molecules, trained with a PyG DataLoader.

``RPGNN`` turns any ``gnn(x, edge_index, batch)`` into RP-GNN (paper eq. 3): every atom gets a
one-hot ID (its position under a random relabeling, mod ``id_dim``) next to its features; in
training each step draws fresh relabelings (pi-SGD), at evaluation the outputs of ``id_dim``
relabelings are averaged, all in one batched call of the GNN. Data: the first molecules of
Tox21 (shipped with rpfast), task NR-AhR, atoms described by their degree.
"""
import torch
from sklearn.metrics import roc_auc_score
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, global_add_pool

from rpfast.datasets import graph_from_smiles, load_tox21
from rpfast.nn import RPGNN

ID_DIM, MAX_DEGREE = 8, 6


class MyGNN(nn.Module):
    """An ordinary PyG model: two GIN convolutions, sum readout, a linear head."""

    def __init__(self, in_dim: int, hidden: int = 64):
        super().__init__()
        mlp = lambda d: nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden))  # noqa: E731
        self.conv1, self.conv2 = GINConv(mlp(in_dim)), GINConv(mlp(hidden))
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, edge_index, batch):
        h = torch.relu(self.conv1(x, edge_index))
        h = torch.relu(self.conv2(h, edge_index))
        return self.head(global_add_pool(h, batch)).squeeze(-1)


def molecules(count: int, task: str = "NR-AhR"):
    data = load_tox21()
    column = data.tasks.index(task)
    items = []
    for smiles, label in zip(data.smiles[:count], data.labels[:count, column]):
        if torch.isnan(label):
            continue
        try:
            graph, _ = graph_from_smiles(smiles)
        except ValueError:  # a few Tox21 SMILES do not parse
            continue
        degree = torch.bincount(graph.edge_index[0], minlength=graph.total_nodes).clamp(max=MAX_DEGREE - 1)
        items.append(Data(x=nn.functional.one_hot(degree, MAX_DEGREE).float(), edge_index=graph.edge_index,
                          y=label.reshape(1)))
    return items


def main(count: int = 600, epochs: int = 5, seed: int = 0):
    torch.manual_seed(seed)
    items = molecules(count)
    split = int(0.8 * len(items))
    train = DataLoader(items[:split], batch_size=64, shuffle=True)
    test = DataLoader(items[split:], batch_size=256)
    model = RPGNN(MyGNN(MAX_DEGREE + ID_DIM), id_dim=ID_DIM, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for batch in train:
            loss = nn.functional.binary_cross_entropy_with_logits(model(batch), batch.y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * batch.num_graphs
        losses.append(total / split)
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(batch) for batch in test])
        labels = torch.cat([batch.y for batch in test])
    auc = roc_auc_score(labels.numpy(), scores.numpy()) if 0 < labels.sum() < len(labels) else float("nan")
    print(f"{len(items)} molecules; training loss per epoch {[round(x, 4) for x in losses]}; test ROC-AUC {auc:.3f}")
    return losses, auc


if __name__ == "__main__":
    main()
