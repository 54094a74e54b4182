"""gin_aggregate forward+backward against PyG's GINConv, torch.sparse.mm (CSR) and index_add_.

Every implementation computes out = (1 + eps) x + A x and its gradient w.r.t. x on the
same graph; graph conversion (CSR, sparse tensors) happens once, outside the timing, as it
would in a training loop.
"""
import pytest
import torch

from benchmarks.graphs import csl_full_batch, molecule_like
from rpfast.ops import gin_aggregate

EPS = 0.1
CASES = {
    "Tox21-like 96 graphs F=64": (lambda: molecule_like(96), 64),
    "CSL 150x41 F=16": (csl_full_batch, 16),
    "1024 molecules F=128": (lambda: molecule_like(1024, seed=1), 128),
}
_GRAPHS = {}


def case(name):
    if name not in _GRAPHS:
        make, F = CASES[name]
        graph = make()
        graph.t_rowptr, graph.rowptr  # build the cached CSR views before timing
        _GRAPHS[name] = (graph, torch.randn(graph.total_nodes, F, generator=torch.Generator().manual_seed(0)))
    return _GRAPHS[name]


def implementations(graph):
    ei = graph.edge_index
    N = graph.total_nodes
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    pyg = pyg_nn.GINConv(torch.nn.Identity(), eps=EPS)
    # A[i, j] = 1 for every edge j -> i, as a CSR tensor.
    A = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), torch.ones(ei.shape[1]), (N, N)).coalesce().to_sparse_csr()

    def index_add(x):
        return (1 + EPS) * x + torch.zeros_like(x).index_add_(0, ei[1], x[ei[0]])

    return {
        "rpfast": lambda x: gin_aggregate(x, graph, EPS),
        "pyg-GINConv": lambda x: pyg(x, ei),
        "torch.sparse.mm": lambda x: (1 + EPS) * x + torch.sparse.mm(A, x),
        "index_add_": index_add,
    }


@pytest.mark.parametrize("impl", ["rpfast", "pyg-GINConv", "torch.sparse.mm", "index_add_"])
@pytest.mark.parametrize("name", list(CASES))
def test_gin_aggregate(benchmark, name, impl):
    graph, x0 = case(name)
    fn = implementations(graph)[impl]
    x = x0.clone().requires_grad_()
    grad = torch.ones_like(x0)

    def step():
        x.grad = None
        fn(x).backward(grad)

    benchmark.group = f"gin_aggregate forward+backward: {name}"
    benchmark.extra_info["impl"] = impl
    nbytes = 4 * x0.numel() * 4 + 16 * graph.num_edges  # read x, write out, read g, write grad_x; 2 CSR passes
    benchmark.extra_info["bytes"] = nbytes
    benchmark.pedantic(step, rounds=30, warmup_rounds=3, iterations=1)


def test_implementations_agree():
    graph, x0 = case("Tox21-like 96 graphs F=64")
    outs = {}
    for name, fn in implementations(graph).items():
        x = x0.clone().requires_grad_()
        out = fn(x)
        out.backward(torch.ones_like(out))
        outs[name] = (out.detach(), x.grad)
    for name, (out, grad) in outs.items():
        torch.testing.assert_close(out, outs["rpfast"][0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad, outs["rpfast"][1], rtol=1e-5, atol=1e-5)
