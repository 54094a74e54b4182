"""rpfast's CUDA kernels on a GPU (scripts/gpu_check.sh runs this):
each kernel against the same op's torch-composed implementation (what CUDA tensors run without
the kernels) and PyG where PyG has the op, on the same device; an RP-GIN training epoch on
CSL; and, for the DFS/BFS orders that stay on the CPU, their cost (drawn on the CPU, copied to
the device) beside the whole GPU training step they feed. Skipped without rpfast._C_cuda and a
CUDA device. Every timing synchronises the device.
"""
import pytest
import torch

from rpfast import _backend

if not (_backend.cuda_build_info()["built"] and torch.cuda.is_available()):
    pytest.skip("needs rpfast._C_cuda and a CUDA device (scripts/gpu_check.sh)", allow_module_level=True)

from rpfast.datasets import csl_dataset  # noqa: E402
from rpfast.datasets import csl_batch
from rpfast.ops import random_permutations  # noqa: E402
from rpfast.ops.gin import gin_aggregate_op, graph_csr  # noqa: E402
from rpfast.ops.permute import (permute_adjacency_backward_op, permute_adjacency_op,  # noqa: E402
                                permute_nodes_op)
from rpfast.ops.segment import segment_sum_op  # noqa: E402

DEVICE = torch.device("cuda")


def _timed(benchmark, function, rounds=50):
    def run():
        function()
        torch.cuda.synchronize()
    benchmark.pedantic(run, rounds=rounds, warmup_rounds=5, iterations=1)


def _permutation_inputs(B=256, n=32, P=8, C=4):
    sizes = torch.full((B,), n)
    perms = random_permutations(sizes, P, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    adj = torch.rand(B, n, n, C, device=DEVICE)
    x = torch.randn(B, n, 16, device=DEVICE)
    grad = torch.randn(B, P, n, n, C, device=DEVICE)
    return perms, adj, x, grad


@pytest.mark.parametrize("impl", ["rpfast", "torch-composed"])
@pytest.mark.parametrize("op", ["permute_adjacency", "permute_adjacency_backward", "permute_nodes"])
def test_permutation_kernels(benchmark, op, impl):
    perms, adj, x, grad = _permutation_inputs()
    declared = {"permute_adjacency": permute_adjacency_op, "permute_adjacency_backward": permute_adjacency_backward_op,
                "permute_nodes": permute_nodes_op}[op]
    args = {"permute_adjacency": (adj, perms), "permute_adjacency_backward": (grad, perms, adj.shape[1]),
            "permute_nodes": (x, perms)}[op]
    function = declared.kernels["cuda"] if impl == "rpfast" else declared.composed
    benchmark.group = f"CUDA {op}: 256 graphs of 32 vertices, 8 relabelings"
    benchmark.extra_info["impl"] = impl
    _timed(benchmark, lambda: function(*args))


def _csl_on_device(features=16):
    graphs, _ = csl_dataset()
    graph = csl_batch(graphs, range(len(graphs))).to(DEVICE)
    return graph, torch.randn(4, graph.total_nodes, features, device=DEVICE)


@pytest.mark.parametrize("impl", ["rpfast", "torch-composed", "pyg"])
def test_gin_aggregation(benchmark, impl):
    graph, x = _csl_on_device()
    csr = graph_csr(graph)
    eps = torch.zeros(1, device=DEVICE)
    benchmark.group = "CUDA GIN aggregation: CSL 150 graphs x 41 vertices, 4 relabelings, F=16"
    benchmark.extra_info["impl"] = impl
    if impl == "pyg":
        conv_module = pytest.importorskip("torch_geometric.nn")
        conv = conv_module.GINConv(torch.nn.Identity()).to(DEVICE)
        flat = x.reshape(-1, x.shape[-1])[: graph.total_nodes]
        _timed(benchmark, lambda: conv(flat, graph.edge_index))
        return
    function = gin_aggregate_op.kernels["cuda"] if impl == "rpfast" else gin_aggregate_op.composed
    _timed(benchmark, lambda: function(x, *csr, eps))


@pytest.mark.parametrize("impl", ["rpfast", "torch-composed", "pyg"])
def test_segment_sum(benchmark, impl):
    graph, x = _csl_on_device()
    benchmark.group = "CUDA segment sum: CSL 150 graphs, 4 relabelings, F=16"
    benchmark.extra_info["impl"] = impl
    if impl == "pyg":
        pool = pytest.importorskip("torch_geometric.nn").global_add_pool
        flat = x[0]
        _timed(benchmark, lambda: pool(flat, graph.batch))
        return
    function = segment_sum_op.kernels["cuda"] if impl == "rpfast" else segment_sum_op.composed
    _timed(benchmark, lambda: function(x, graph.ptr))


@pytest.mark.parametrize("batch_size", [16, 120])
@pytest.mark.parametrize("impl", ["rpfast", "torch-composed", "rpfast on the CPU"])
def test_rpgin_training_epoch_on_the_gpu(benchmark, impl, batch_size, monkeypatch):
    """An RP-GIN epoch on CSL (120 graphs) on the GPU, with rpfast's CUDA kernels and with the
    torch-composed ops CUDA tensors run without them; and the same epoch on this machine's CPU
    (the C++ kernels), which answers whether such small graphs belong on a GPU at all."""
    monkeypatch.setattr(_backend, "_CUDA_SWITCHED_ON", impl == "rpfast")
    from rpfast.experiments.csl.experiment import classification_loss
    from rpfast.experiments.training import Batches, fit
    from rpfast.nn import RPGIN

    device = torch.device("cpu") if impl == "rpfast on the CPU" else DEVICE
    graphs, labels = csl_dataset()
    labels = labels.to(device)
    cache = {}

    def make(chunk):  # batches built on the CPU (their CSR by the C++ kernels), then moved, once each
        key = tuple(chunk.tolist())
        if key not in cache:
            cache[key] = csl_batch(graphs, list(key)).to(device)
        return cache[key], labels[chunk.to(device)]

    torch.manual_seed(0)
    model = RPGIN(1, 16, 5, 10, id_dim=10, generator=torch.Generator().manual_seed(0)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batches = Batches(torch.arange(120), make, batch_size, torch.Generator().manual_seed(0))
    benchmark.group = f"CUDA RP-GIN training epoch: CSL 120 graphs, batch {batch_size}"
    benchmark.extra_info["impl"] = impl
    _timed(benchmark, lambda: fit(model, batches, classification_loss, epochs=1, optimizer=lambda _: optimizer),
           rounds=10)


@pytest.mark.parametrize("impl", ["rpfast", "bfs orders: CPU + copy"])
def test_oriented_step_and_its_cpu_orders(benchmark, impl):
    """Whether BFS orders need a GPU kernel: one RP training step on the GPU with BFS-oriented
    relabelings (the orders drawn on the CPU inside it and copied over), against drawing those
    orders alone. The ratio is the orders' share of the step (below 1: the step costs more)."""
    from rpfast.nn import Oriented, RelationalPooling, VecMLP

    graphs, _ = csl_dataset()
    graph = csl_batch(graphs, range(len(graphs)))
    K, P = 20, 16
    strategy = Oriented("bfs", K, train_samples=P, starts="balanced")
    generator = torch.Generator().manual_seed(0)
    benchmark.group = f"CUDA RP-Oriented training step: CSL 150 graphs x 41 vertices, {P} BFS views of {K}"
    benchmark.extra_info["impl"] = impl
    if impl != "rpfast":
        _timed(benchmark, lambda: strategy.relabel(graph, True, generator).perms.to(DEVICE), rounds=20)
        return
    torch.manual_seed(0)
    model = RelationalPooling(VecMLP(K, 1, 1, 64, 10), strategy, generator=generator).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs = (graph.dense_adj().to(DEVICE), graph.dense_x().to(DEVICE), graph.num_nodes.to(DEVICE))

    def step():
        optimizer.zero_grad()
        model(*inputs).square().mean().backward()
        optimizer.step()
    _timed(benchmark, step, rounds=20)
