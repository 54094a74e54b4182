"""The package surface: version, subpackages, build report, RelationalPooling end to end."""
import torch

import rpfast
from rpfast.data import GraphBatch
from rpfast.nn import PiSGD, RelationalPooling


def test_public_surface(capsys):
    assert isinstance(rpfast.__version__, str) and rpfast.__version__
    for sub in ("ops", "data", "nn"):
        assert hasattr(rpfast, sub)
    rpfast.show_config()
    out = capsys.readouterr().out
    for field in ("compiler", "OpenMP", "threads", "CUDA"):
        assert field in out


class _FlattenMLP(torch.nn.Module):
    """Permutation-sensitive f: an MLP over the flattened adjacency and features."""

    def __init__(self, k, c, f):
        super().__init__()
        self.net = torch.nn.Linear(k * k * c + k * f, 2)

    def forward(self, adj, x):
        return self.net(torch.cat([adj.flatten(1), x.flatten(1)], dim=1))


def test_relational_pooling_is_invariant_in_expectation_and_trains():
    torch.manual_seed(0)
    graphs = [(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), 3), (torch.tensor([[0, 1], [1, 0]]), 2)]
    batch = GraphBatch.from_edge_lists(graphs, x=[torch.ones(3, 1), torch.ones(2, 1)])
    model = RelationalPooling(_FlattenMLP(3, 1, 1), PiSGD(3, train_samples=2, eval_samples=720),
                              generator=torch.Generator().manual_seed(1))
    model.eval()
    # Averaging over many permutations approaches the exact (invariant) RP average:
    # two independent estimates agree closely.
    a, b = model(batch), model(batch)
    assert a.shape == (2, 2)
    torch.testing.assert_close(a, b, atol=0.05, rtol=0)
    model.train()
    out = model(batch)
    out.sum().backward()
    assert model.f.net.weight.grad.abs().sum() > 0
