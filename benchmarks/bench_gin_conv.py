"""The GINConv module as PyG users call it, ``conv(x, edge_index)``, forward + backward, against
``torch_geometric.nn.GINConv`` with the same ``nn``.

The edge_index tensor is the same object every step (as a training loop over one batch, or
a full-batch graph, passes it), so rpfast's CSR cache is warm after the first call; PyG
needs no preprocessing.
"""
import pytest
import torch

from benchmarks.graphs import csl_full_batch, molecule_like
from benchmarks.paired import paired
from rpfast.nn import GINConv

CASES = {
    "Tox21-like 96 graphs F=64": (lambda: molecule_like(96), 64),
    "CSL 150x41 F=16": (csl_full_batch, 16),
}


def _module_step(name: str, impl: str):
    """One forward + backward of ``conv(x, edge_index)`` for case ``name`` and ``impl``."""
    make, F = CASES[name]
    graph = make()
    edge_index = graph.edge_index
    x = torch.randn(graph.total_nodes, F, generator=torch.Generator().manual_seed(0)).requires_grad_()
    if impl == "rpfast":
        conv = GINConv(torch.nn.Identity(), train_eps=True)
    else:
        conv = pytest.importorskip("torch_geometric.nn").GINConv(torch.nn.Identity(), train_eps=True)
    grad = torch.ones(graph.total_nodes, F)

    def step():
        x.grad = None
        out = conv(x, edge_index)
        out.backward(grad)
        return out.detach(), x.grad
    return step


def _same_output_and_gradient(ours, theirs) -> None:
    for mine, other in zip(ours(), theirs()):
        torch.testing.assert_close(mine, other, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", ["rpfast", "pyg"])
@pytest.mark.parametrize("name", list(CASES))
def test_gin_conv_module(benchmark, name, impl):
    step = _module_step(name, impl)
    benchmark.group = f"GINConv module conv(x, edge_index) forward+backward: {name}"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(step, rounds=50, warmup_rounds=5, iterations=1)


@pytest.mark.parametrize("name", list(CASES))
def test_gin_conv_module_alternating(benchmark, name):
    """The same steps, rpfast's and PyG's in alternating rounds (paired.py)."""
    ours, pyg = _module_step(name, "rpfast"), _module_step(name, "pyg")
    benchmark.group = f"GINConv module conv(x, edge_index) forward+backward: {name} (alternating rounds)"
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, ours, pyg, "pyg", rounds=400, warmup_rounds=20, agree=_same_output_and_gradient)
