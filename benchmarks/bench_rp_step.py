"""One Relational Pooling training step (forward + backward + Adam) against the same model
written in plain PyTorch / PyG (benchmarks/baselines/torch_rp.py): pi-SGD, k-ary over connected
subsets, DFS orientations, exact RP, separate RP and RP around a PyG GNN, across the encoders
(VecMLP, VecRNN, AdjCNN, a PyG GNN). The encoder f is the same module on both sides, so the
ratio measures the RP machinery (sampling, enumeration, gathers, replicas)."""
import pytest
import torch
from torch import nn

from benchmarks.graphs import molecule_like
from rpfast.nn import RPGNN, AdjCNN, Exact, KAry, Oriented, PiSGD, RelationalPooling, VecMLP, VecRNN

B, K, P, HIDDEN = 96, 40, 4, 64


def _step(model_fn, params, target):
    optimizer = torch.optim.Adam(params, lr=1e-3)

    def step():
        out = model_fn()
        loss = nn.functional.mse_loss(out, target.expand_as(out))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def _batch():
    graph = molecule_like(B, low=10, high=K, seed=1)
    graph.x = torch.ones(graph.total_nodes, 1)
    return graph


@pytest.mark.parametrize("impl", ["rpfast", "torch"])
def test_pisgd_vecmlp_step(benchmark, impl):
    from benchmarks.baselines.torch_rp import pisgd_relabel

    graph, gen = _batch(), torch.Generator().manual_seed(0)
    f = VecMLP(K, 1, 1, HIDDEN, 1)
    if impl == "rpfast":
        model = RelationalPooling(f, PiSGD(K, train_samples=P), generator=gen).train()
        run = lambda: model(graph)  # noqa: E731
    else:
        def run():
            adj, x, mask = pisgd_relabel(graph.x, graph.edge_index, graph.batch, K, P, gen)
            return f(adj, x, mask).reshape(B, P, -1).mean(dim=1)
    benchmark.group = f"RP training step: PiSGD(P={P}) + VecMLP, {B} molecule-like graphs, K={K}"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, f.parameters(), torch.zeros(1)), rounds=15, warmup_rounds=2, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "itertools+numpy"])
def test_kary_connected_vecmlp_step(benchmark, impl):
    from benchmarks.baselines.torch_rp import connected_triples_relabel

    graph = molecule_like(32, low=10, high=30, seed=2)
    graph.x = torch.ones(graph.total_nodes, 1)
    f = VecMLP(3, 1, 1, HIDDEN, 1)
    if impl == "rpfast":
        model = RelationalPooling(f, KAry(3, prune="disconnected")).train()
        run = lambda: model(graph)  # noqa: E731
    else:
        lists = [(graph.edge_index[:, (graph.batch[graph.edge_index[0]] == b)] - graph.ptr[b], int(n))
                 for b, n in enumerate(graph.num_nodes)]
        xs = [graph.x[graph.ptr[b]:graph.ptr[b + 1]] for b in range(graph.num_graphs)]

        def run():
            adj, x, mask, graph_of, rows = connected_triples_relabel(lists, xs)
            out = f(adj, x, mask)
            summed = torch.zeros(graph.num_graphs, out.shape[1]).index_add_(0, graph_of, out)
            return summed / rows.clamp(min=1).unsqueeze(1)
    benchmark.group = "RP training step: KAry(3, connected, all orders) + VecMLP, 32 graphs"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, f.parameters(), torch.zeros(1)), rounds=10, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "pyg+torch"])
def test_rpgnn_step(benchmark, impl):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from benchmarks.baselines.torch_rp import one_hot_ids

    graph, gen, m = _batch(), torch.Generator().manual_seed(0), 8

    class GNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.GINConv(nn.Sequential(nn.Linear(1 + m, HIDDEN), nn.ReLU()))
            self.conv2 = pyg_nn.GINConv(nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.ReLU()))
            self.head = nn.Linear(HIDDEN, 1)

        def forward(self, x, edge_index, batch):
            h = self.conv2(self.conv1(x, edge_index), edge_index)
            return self.head(pyg_nn.global_add_pool(h, batch))

    gnn = GNN()
    if impl == "rpfast":
        model = RPGNN(gnn, id_dim=m, strategy=PiSGD(train_samples=P), generator=gen).train()
        run = lambda: model(graph)  # noqa: E731
    else:
        N, E = graph.total_nodes, graph.num_edges

        def run():
            ids = one_hot_ids(graph.batch, B, m, P, gen)  # [P, N, m]
            x = torch.cat([graph.x.expand(P, N, 1), ids], dim=-1).reshape(P * N, -1)
            edges = graph.edge_index.repeat(1, P) + torch.arange(P).repeat_interleave(E) * N
            batch = (graph.batch + B * torch.arange(P).unsqueeze(1)).reshape(-1)
            return gnn(x, edges, batch).reshape(P, B, -1).mean(dim=0)
    benchmark.group = f"RP training step: RP-GNN (2 PyG GINConv, P={P}, m={m}), {B} molecule-like graphs"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, gnn.parameters(), torch.zeros(1)), rounds=15, warmup_rounds=2, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "networkx+torch"])
def test_dfs_vecrnn_step(benchmark, impl):
    import networkx as nx
    from benchmarks.baselines.torch_rp import dfs_relabel

    graph, gen, size = _batch(), torch.Generator().manual_seed(0), 12
    f = VecRNN(size, 1, 1, HIDDEN, 1, cell="gru")
    if impl == "rpfast":
        model = RelationalPooling(f, Oriented("dfs", size, train_samples=P), generator=gen).train()
        run = lambda: model(graph)  # noqa: E731
    else:
        graphs_nx = []
        for b in range(B):
            lo, hi = int(graph.ptr[b]), int(graph.ptr[b + 1])
            G = nx.empty_graph(hi - lo)
            inside = graph.batch[graph.edge_index[0]] == b
            G.add_edges_from((graph.edge_index[:, inside] - lo).t().tolist())
            graphs_nx.append(G)
        dense_adj, dense_x = graph.dense_adj(), graph.dense_x()

        def run():
            adj, x, mask = dfs_relabel(graphs_nx, dense_adj, dense_x, size, P, gen)
            return f(adj, x, mask).reshape(B, P, -1).mean(dim=1)
    benchmark.group = f"RP training step: Oriented(dfs, random starts, P={P}, 12 vertices) + GRU, {B} molecule-like graphs"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, f.parameters(), torch.zeros(1)), rounds=10, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "itertools+torch"])
def test_exact_adjcnn_step(benchmark, impl):
    from benchmarks.baselines.torch_rp import exact_relabel

    n, graphs = 6, 16
    graph = molecule_like(graphs, low=n, high=n, seed=3)
    graph.x = torch.randn(graph.total_nodes, 2, generator=torch.Generator().manual_seed(0))
    f = AdjCNN(n, 1, 2, 16, 1)
    if impl == "rpfast":
        model = RelationalPooling(f, Exact(n)).train()
        run = lambda: model(graph)  # noqa: E731
    else:
        dense_adj, dense_x = graph.dense_adj(), graph.dense_x()

        def run():
            adj, x, mask = exact_relabel(dense_adj, dense_x, n)
            return f(adj, x, mask).reshape(graphs, -1, 1).mean(dim=1)
    benchmark.group = f"RP training step: Exact (all 720 relabelings) + AdjCNN, {graphs} graphs of {n} vertices"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, f.parameters(), torch.zeros(1)), rounds=10, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "torch"])
def test_separate_pisgd_vecmlp_step(benchmark, impl):
    rows, cols, samples, batch = 30, 20, 8, 64
    gen = torch.Generator().manual_seed(0)
    adj = (torch.rand(batch, rows, cols, 1, generator=gen) < 0.2).float()
    f = VecMLP((rows, cols), 1, 0, HIDDEN, 1)
    if impl == "rpfast":
        model = RelationalPooling(f, (PiSGD(rows, train_samples=samples), PiSGD(cols, train_samples=samples)),
                                  mode="separate", generator=gen).train()
        run = lambda: model(adj)  # noqa: E731
    else:
        masks = (torch.ones(batch * samples, rows, dtype=torch.bool), torch.ones(batch * samples, cols, dtype=torch.bool))

        def run():
            r = torch.rand(batch, samples, rows, generator=gen).argsort(dim=-1)
            c = torch.rand(batch, samples, cols, generator=gen).argsort(dim=-1)
            bb = torch.arange(batch).view(batch, 1, 1, 1)
            relabeled = adj[bb, r.unsqueeze(-1), c.unsqueeze(-2)]  # [B, P, rows, cols, 1]
            return f(relabeled.flatten(0, 1), None, masks).reshape(batch, samples, -1).mean(dim=1)
    benchmark.group = f"RP training step: separate PiSGD(P={samples}) + VecMLP, {batch} bipartite 30x20 tensors"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(_step(run, f.parameters(), torch.zeros(1)), rounds=10, warmup_rounds=1, iterations=1)


def test_kary_baseline_computes_the_same_average():
    """The k-ary baseline is the same function: equal outputs on the same graphs and f."""
    from benchmarks.baselines.torch_rp import connected_triples_relabel

    graph = molecule_like(8, low=5, high=12, seed=2)
    graph.x = torch.randn(graph.total_nodes, 1)
    f = VecMLP(3, 1, 1, 8, 2)
    ours = RelationalPooling(f, KAry(3, prune="disconnected"))(graph)
    lists = [(graph.edge_index[:, (graph.batch[graph.edge_index[0]] == b)] - graph.ptr[b], int(n))
             for b, n in enumerate(graph.num_nodes)]
    xs = [graph.x[graph.ptr[b]:graph.ptr[b + 1]] for b in range(graph.num_graphs)]
    adj, x, mask, graph_of, rows = connected_triples_relabel(lists, xs)
    theirs = torch.zeros(graph.num_graphs, 2).index_add_(0, graph_of, f(adj, x, mask)) / rows.unsqueeze(1)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
