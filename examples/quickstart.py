"""Relational Pooling in a minute: tell a 6-cycle from two triangles.

Both graphs are 2-regular on 6 vertices, so the 1-WL test (and any message-passing GNN
without IDs) cannot tell them apart. An MLP over the flattened adjacency matrix is
maximally expressive but permutation-sensitive; Relational Pooling averages it over
random relabelings (pi-SGD in training, 20 sampled permutations at inference), which
makes it invariant in expectation and lets it separate the two graphs.
"""
import torch

from rpfast.data import GraphBatch
from rpfast.nn import PiSGD, RelationalPooling


class FlatMLP(torch.nn.Module):
    """f(A_pi, X_pi): an MLP over the flattened relabeled adjacency (order-sensitive)."""

    def __init__(self, n: int, hidden: int = 64):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(n * n, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))

    def forward(self, adj, x):
        return self.net(adj[..., 0].flatten(1))


def main(steps: int = 300, seed: int = 0) -> float:
    torch.manual_seed(seed)
    hexagon = [(i, (i + 1) % 6) for i in range(6)]
    triangles = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)]
    undirected = [torch.tensor(e).t() for e in (hexagon, triangles)]
    graphs = [(torch.cat([ei, ei.flip(0)], dim=1), 6) for ei in undirected]
    batch = GraphBatch.from_edge_lists(graphs, x=[torch.ones(6, 1), torch.ones(6, 1)])
    labels = torch.tensor([0, 1])
    model = RelationalPooling(FlatMLP(6), PiSGD(6, train_samples=4, eval_samples=20),
                              generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        loss = torch.nn.functional.cross_entropy(model(batch), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        probs = model(batch).softmax(-1)
    accuracy = float((probs.argmax(-1) == labels).float().mean())
    print(f"final training loss {loss.item():.4f}")
    print(f"P(class | 6-cycle)       = {probs[0].tolist()}")
    print(f"P(class | two triangles) = {probs[1].tolist()}")
    print(f"accuracy: {accuracy:.0%} (1-WL / plain GNNs: 50%)")
    return accuracy


if __name__ == "__main__":
    main()
