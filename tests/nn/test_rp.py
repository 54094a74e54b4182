"""rpfast.nn.rp: RelationalPooling over the Exact, PiSGD, KAry and Oriented strategies."""
import itertools
import math

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from rpfast.data import GraphBatch
from rpfast.nn import RPGNN, AdjCNN, Exact, KAry, Oriented, PiSGD, RelationalPooling, VecMLP, VecRNN
from rpfast.nn.rp import Relabelings

from tests.helpers.reference import keep_subset, nx_graph
from tests.helpers.strategies import graph_lists


class SensitiveMLP(nn.Module):
    """A permutation-sensitive f: an MLP over the flattened (masked) adjacency and features."""

    def __init__(self, K: int, C: int, F: int, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(K * K * C + K * F + K, 16), nn.Tanh(), nn.Linear(16, 3)).double()

    def forward(self, adj, x, mask):
        M = adj.shape[0]
        return self.net(torch.cat([adj.reshape(M, -1), x.reshape(M, -1), mask.to(adj.dtype)], dim=1))


def random_batch(sizes, seed=0, p=0.5, features=2):
    gen = torch.Generator().manual_seed(seed)
    graphs, xs = [], []
    for n in sizes:
        upper = torch.triu(torch.rand(n, n, generator=gen) < p, diagonal=1)
        i, j = torch.nonzero(upper, as_tuple=True)
        graphs.append((torch.stack([torch.cat([i, j]), torch.cat([j, i])]), n))
        xs.append(torch.randn(n, features, generator=gen, dtype=torch.float64))
    return GraphBatch.from_edge_lists(graphs, x=xs)


def graph_b(graph: GraphBatch, b: int) -> nx.Graph:
    """Graph ``b`` of a batch as networkx, local vertex ids."""
    lo, hi = int(graph.ptr[b]), int(graph.ptr[b + 1])
    inside = (graph.edge_index[0] >= lo) & (graph.edge_index[0] < hi)
    return nx_graph(graph.edge_index[:, inside] - lo, hi - lo)


def relabel(graph: GraphBatch, seed: int) -> GraphBatch:
    """The same graphs with every graph's vertices renumbered at random."""
    gen = torch.Generator().manual_seed(seed)
    new_of_old = torch.cat([torch.randperm(int(n), generator=gen) + int(s)
                            for n, s in zip(graph.num_nodes, graph.ptr[:-1])])
    x = torch.empty_like(graph.x)
    x[new_of_old] = graph.x
    return GraphBatch(new_of_old[graph.edge_index], x=x, ptr=graph.ptr)


def dense_f(K, F=2):
    return SensitiveMLP(K, 1, F)


@pytest.mark.parametrize("strategy", [Exact(5), KAry(3), KAry(3, prune="edgeless"), KAry(2, prune="disconnected"),
                                      KAry(5), Oriented("dfs", 5, starts="all", tiebreak="features"),
                                      Oriented("bfs", 3, starts="all", tiebreak="features"),
                                      Oriented("wl", 5, tiebreak="features"), Oriented("wl", 3, eval_samples=2,
                                                                                       tiebreak="features")])
def test_exact_strategies_are_invariant(strategy):
    graph = random_batch([5, 4, 3, 5], seed=1)
    rp = RelationalPooling(dense_f(strategy.size), strategy).eval()
    out = rp(graph)
    for seed in range(3):
        torch.testing.assert_close(rp(relabel(graph, seed)), out, rtol=0, atol=1e-9)


def test_exact_counts_and_weights():
    graph = random_batch([4, 2, 0])
    perms, weights = Exact(4).relabel(graph, training=False)
    assert perms.shape == (3, 24, 4)
    assert (weights > 0).sum(dim=1).tolist() == [24, 2, 1]  # an empty graph: one empty relabeling
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(3, dtype=torch.float64))
    rows = {tuple(r) for r in perms[0].tolist()}
    assert rows == set(itertools.permutations(range(4)))


def test_pisgd_training_estimate_is_unbiased_and_eval_average_converges():
    graph = random_batch([4, 3], seed=2)
    f = dense_f(4)
    exact = RelationalPooling(f, Exact(4)).eval()(graph).detach()
    gen = torch.Generator().manual_seed(0)
    train = RelationalPooling(f, PiSGD(4, train_samples=1), generator=gen).train()
    draws = torch.stack([train(graph).detach() for _ in range(3000)])
    stderr = draws.std(dim=0) / math.sqrt(len(draws))
    assert bool(((draws.mean(dim=0) - exact).abs() < 5 * stderr + 1e-12).all())
    errors = []
    for samples in (1, 16, 256):
        rp = RelationalPooling(f, PiSGD(4, eval_samples=samples), generator=gen).eval()
        errors.append(float((rp(graph).detach() - exact).abs().max()))
    assert errors[2] < errors[0] and errors[2] < 0.25 * max(errors[0], 1e-12) + 1e-3


@pytest.mark.parametrize("n, k", [(5, 2), (5, 3), (4, 4), (6, 1)])
def test_kary_term_counts(n, k):
    graph = random_batch([n], seed=n + k)
    ordered = KAry(k).relabel(graph, training=False)
    assert int((ordered.weights > 0).sum()) == math.factorial(n) // math.factorial(n - k)
    invariant = KAry(k, order="invariant").relabel(graph, training=False)
    assert int((invariant.weights > 0).sum()) == math.comb(n, k)  # Prop. 2.2


def test_kary_with_k_equal_n_is_exact():
    graph = random_batch([4, 4, 4], seed=5)
    f = dense_f(4)
    torch.testing.assert_close(RelationalPooling(f, KAry(4)).eval()(graph), RelationalPooling(f, Exact(4)).eval()(graph))


@pytest.mark.parametrize("prune", ["edgeless", "isolated", "disconnected"])
def test_kary_pruned_subsets_match_a_brute_force_filter(prune):
    graph = random_batch([6, 5, 4], seed=7, p=0.35)
    perms, weights = KAry(3, prune=prune, order="invariant").relabel(graph, training=False)
    for b in range(graph.num_graphs):
        G = graph_b(graph, b)
        expected = {c for c in itertools.combinations(range(G.number_of_nodes()), 3) if keep_subset(G, c, prune)}
        got = {tuple(r) for r, w in zip(perms[b].tolist(), weights[b].tolist()) if w > 0}
        assert got == expected


def test_sampled_subsets_and_random_orders_are_admissible():
    graph = random_batch([6, 5], seed=8, p=0.4)
    gen = torch.Generator().manual_seed(3)
    perms, weights = KAry(3, subsets="sample", train_samples=7, prune="disconnected", order="random").relabel(
        graph, training=True, generator=gen)
    for b in range(graph.num_graphs):
        G = graph_b(graph, b)
        for row, w in zip(perms[b].tolist(), weights[b].tolist()):
            if w > 0:
                assert nx.is_connected(G.subgraph(row))


def test_oriented_all_starts_gives_one_order_per_vertex():
    graph = random_batch([6, 5], seed=9, p=0.5)
    perms, weights = Oriented("dfs", 6, starts="all").relabel(graph, training=False)
    for b, n in enumerate(graph.num_nodes.tolist()):
        real = perms[b][weights[b] > 0]
        assert sorted(real[:, 0].tolist()) == list(range(n))  # every vertex starts one order
        torch.testing.assert_close(weights[b].sum(), torch.tensor(1.0, dtype=torch.float64))
    gen = torch.Generator().manual_seed(0)
    sampled = Oriented("bfs", 3, train_samples=4, eval_samples=2)
    assert sampled.relabel(graph, training=True, generator=gen).perms.shape == (2, 4, 3)
    assert sampled.relabel(graph, training=False, generator=gen).perms.shape == (2, 2, 3)
    assert Oriented("dfs", 3).samples(True) == 1 and Oriented("dfs", 3).samples(False) == 5
    assert Oriented("wl", 3, tiebreak="id").samples(False) == 1  # deterministic orders: one is enough


def test_oriented_views_of_random_length_are_prefixes_of_the_orders():
    graph = random_batch([7, 6], seed=11, p=0.6)
    full = Oriented("bfs", 6, train_samples=400).relabel(graph, True, torch.Generator().manual_seed(3)).perms
    short = Oriented("bfs", 6, train_samples=400, min_size=3).relabel(graph, True,
                                                                     torch.Generator().manual_seed(3)).perms
    lengths = (short >= 0).sum(dim=-1)
    assert set(lengths.unique().tolist()) == {3, 4, 5, 6}  # graph 1 has 6 vertices: 6 at most
    placed = short >= 0
    assert bool((placed[..., 1:] <= placed[..., :-1]).all())  # a prefix, then padding
    same_draws = torch.where(placed, full, short)  # the orders come first from the same generator
    assert bool((same_draws[placed] == full[placed]).all())
    assert "min_size=3" in repr(Oriented("dfs", 6, min_size=3))
    for kwargs, match in [(dict(min_size=7), "min_size = 7 is above size = 6"),
                          (dict(min_size=0), "min_size"),
                          (dict(min_size=2, starts="all"), "random or balanced starts")]:
        with pytest.raises(ValueError, match=match):
            Oriented("bfs", 6, **kwargs)


def test_inputs_pyg_tuple_dense_and_errors():
    pyg = pytest.importorskip("torch_geometric.data")
    graph = random_batch([4, 3], seed=10)
    rp = RelationalPooling(dense_f(4), Exact(4)).eval()
    out = rp(graph)
    torch.testing.assert_close(rp(graph.to_pyg()), out)
    torch.testing.assert_close(rp(graph.x, graph.edge_index, graph.batch), out)
    torch.testing.assert_close(rp(graph.dense_adj(), graph.dense_x(), graph.num_nodes), out)
    assert isinstance(graph.to_pyg(), pyg.Batch)
    with pytest.raises(ValueError, match="graph 0 has 4 vertices, more than the max_nodes = 3"):
        RelationalPooling(dense_f(3), Exact(3))(graph)
    with pytest.raises(ValueError, match="max_nodes = 12 is above 11"):
        Exact(12)
    with pytest.raises(TypeError, match="unexpected keyword argument 'k'"):
        RelationalPooling(dense_f(4), Exact(4), k=3)
    with pytest.raises(TypeError, match="strategy must be an rpfast.nn.rp Strategy"):
        RelationalPooling(dense_f(4), "exact")
    with pytest.raises(ValueError, match="train_samples and eval_samples are for subsets='sample'"):
        KAry(3, train_samples=2)
    assert KAry(3, subsets="sample").samples(True) == 1 and KAry(3, subsets="sample").samples(False) == 5
    with pytest.raises(ValueError, match="starts='all' implies the count"):
        Oriented("dfs", 4, starts="all", eval_samples=3)
    with pytest.raises(ValueError, match="method must be"):
        Oriented("nope", 4)
    with pytest.raises(ValueError, match="a WL orientation has no start vertex"):
        Oriented("wl", 4, starts="all")


def test_gradients_reach_f_and_two_argument_f_still_works():
    graph = random_batch([4, 3], seed=11)
    f = dense_f(4)
    RelationalPooling(f, PiSGD(4, train_samples=3)).train()(graph).sum().backward()
    assert all(p.grad is not None for p in f.parameters())

    class TwoArgs(nn.Module):
        def forward(self, adj, x):
            return adj.sum(dim=(1, 2)).reshape(adj.shape[0], -1) + x.sum(dim=1)

    out = RelationalPooling(TwoArgs(), Exact(4)).eval()(graph)
    assert out.shape == (2, 2)
    assert isinstance(Exact(4).relabel(graph, False), Relabelings)


# ------------------------------------------------------------------------------ graph input's relabeled adjacency
@settings(max_examples=60, deadline=None)
@given(graph_lists(max_graphs=4, max_nodes=7), st.integers(1, 3), st.integers(0, 9), st.integers(0, 2),
       st.booleans(), st.booleans(), st.integers(0, 2**31 - 1))
def test_graph_adjacency_is_relabeled_from_its_edges_as_from_its_dense_view(graphs, P, K, D, edge_features,
                                                                           shuffle_padding, seed):
    """``_permute_graph_adjacency`` (what RelationalPooling runs on graph input) is
    ``permute_adjacency(graph.dense_adj())`` bit for bit: self-loops, multi-edges (added up in edge
    order), empty graphs, K below and above n_max, padding anywhere in a row; so is its gradient
    in edge_attr."""
    from rpfast.nn.rp.relational_pooling import _permute_graph_adjacency
    from rpfast.ops import permute_adjacency
    from tests.helpers.strategies import partial_permutations

    gen = torch.Generator().manual_seed(seed)
    attrs = [torch.randn(e.shape[1], D, generator=gen, dtype=torch.float64) for e, _ in graphs] if D else None
    graph = GraphBatch.from_edge_lists(graphs, edge_attr=attrs) if graphs else GraphBatch(
        torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.zeros(0, dtype=torch.int64))
    if graph.edge_attr is not None:
        graph.edge_attr.requires_grad_(True)
    perms = partial_permutations(graph.num_nodes, P, K, seed, shuffle_padding)
    dense = graph.dense_adj() if edge_features else graph.dense_adj()[..., :1]
    expected = permute_adjacency(dense, perms)
    got = _permute_graph_adjacency(graph, perms, edge_features)
    assert got.dtype == expected.dtype and torch.equal(got, expected)
    if graph.num_edges and D and edge_features and expected.numel():
        weights = torch.randn(expected.shape, generator=gen, dtype=expected.dtype)
        (want,) = torch.autograd.grad((expected * weights).sum(), graph.edge_attr)
        (have,) = torch.autograd.grad((got * weights).sum(), graph.edge_attr)
        torch.testing.assert_close(have, want, rtol=0, atol=1e-12)


def test_graph_input_never_builds_the_dense_view():
    """A batch holding one large graph costs RelationalPooling K x K blocks, not n_max x n_max:
    graph input and its dense form agree, and the graph's dense view is never computed."""
    torch.manual_seed(0)
    graph = random_batch([60, 4, 5], seed=3, p=0.1)
    f = VecRNN(4, 1, 2, 8, 3, cell="lstm").double()
    rp = RelationalPooling(f, Oriented("dfs", 4, eval_samples=3), generator=torch.Generator().manual_seed(1)).eval()
    out = rp(graph)
    assert "_lazy__dense_adj" not in vars(graph)
    dense = RelationalPooling(f, Oriented("dfs", 4, eval_samples=3), generator=torch.Generator().manual_seed(1)).eval()
    torch.testing.assert_close(dense(graph.dense_adj(), graph.dense_x(), graph.num_nodes), out, rtol=0, atol=0)


# ------------------------------------------------------------------------------ encoders
@pytest.mark.parametrize("make", [
    lambda: VecMLP(5, 1, 2, 16, 3),
    lambda: VecRNN(5, 1, 2, 8, 3, cell="lstm"),
    lambda: VecRNN(5, 1, 2, 8, 3, cell="gru"),
    lambda: AdjCNN(5, 1, 2, 8, 3),
])
def test_encoders_under_exact_rp_are_invariant_and_ignore_padding(make):
    torch.manual_seed(0)
    f = make().double()
    graph = random_batch([5, 3, 4], seed=12)
    rp = RelationalPooling(f, Exact(5)).eval()
    out = rp(graph)
    assert out.shape == (3, 3)
    torch.testing.assert_close(rp(relabel(graph, 1)), out, rtol=0, atol=1e-9)
    # Graph 1 alone, or next to bigger graphs: the padding it gets differs only in amount.
    alone = RelationalPooling(f, Exact(5)).eval()(graph.select([1]))
    torch.testing.assert_close(alone[0], out[1], rtol=0, atol=1e-9)
    out.sum().backward()
    assert all(p.grad is not None for p in f.parameters())


def test_encoders_check_their_widths():
    with pytest.raises(ValueError, match="VecMLP was built for K=4 positions, C=1 edge channels and F=2"):
        VecMLP(4, 1, 2, 8, 3)(torch.zeros(2, 5, 5, 1), torch.zeros(2, 5, 2), torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="cell must be 'lstm' or 'gru'"):
        VecRNN(4, 1, 2, 8, 3, cell="rnn")
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        AdjCNN(4, 1, 2, 8, 3, kernel_size=2)


# ------------------------------------------------------------------------------ RP for any GNN
def _pyg_model(conv: str, in_dim: int, edge_dim=None):
    pyg_nn = pytest.importorskip("torch_geometric.nn")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            if conv == "gcn":
                self.conv = pyg_nn.GCNConv(in_dim, 8)
            else:
                self.conv = pyg_nn.GINEConv(nn.Sequential(nn.Linear(in_dim, 8), nn.ReLU()), edge_dim=edge_dim)
            self.head = nn.Linear(8, 2)

        def forward(self, x, edge_index, batch, edge_attr=None):
            h = self.conv(x, edge_index) if edge_attr is None else self.conv(x, edge_index, edge_attr)
            return self.head(pyg_nn.global_add_pool(torch.relu(h), batch))

    return Net().double()


@pytest.mark.parametrize("conv, edge_dim", [("gcn", None), ("gine", 3)])
def test_rpgnn_wraps_pyg_convolutions(conv, edge_dim):
    torch.manual_seed(0)
    graph = random_batch([5, 3, 4], seed=13)
    if edge_dim:
        graph = GraphBatch(graph.edge_index, x=graph.x, ptr=graph.ptr,
                           edge_attr=torch.randn(graph.num_edges, edge_dim, dtype=torch.float64))
    model = RPGNN(_pyg_model(conv, 2 + 4, edge_dim), id_dim=4, strategy=PiSGD(train_samples=2, eval_samples=1),
                  generator=torch.Generator().manual_seed(1))
    out = model(graph.to_pyg())
    assert out.shape == (3, 2)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    # one relabeling = the GNN on [x, onehot(position mod m)], computed by hand
    model.eval()
    gen_state = model.generator.get_state()
    (ids, weights), = model.node_ids(graph)
    assert weights is None and ids.shape == (1, graph.total_nodes)
    ids = ids[0]
    model.generator.set_state(gen_state)
    x = torch.cat([graph.x, torch.nn.functional.one_hot(ids, 4).double()], dim=1)
    extra = {} if graph.edge_attr is None else {"edge_attr": graph.edge_attr}
    torch.testing.assert_close(model(graph), model.gnn(x, graph.edge_index, graph.batch, **extra))


def test_rpgnn_passes_edge_attr_only_to_a_gnn_that_takes_it():
    """A GNN whose forward has no edge_attr (a plain GCN) wraps a batch with bond features; one
    that takes edge_attr (by name or **kwargs) gets them, repeated for every relabeling."""
    graph = random_batch([4, 3], seed=2)
    graph = GraphBatch(graph.edge_index, x=graph.x, ptr=graph.ptr,
                       edge_attr=torch.randn(graph.num_edges, 3, dtype=torch.float64))
    seen = {}

    class NoEdges(nn.Module):
        def forward(self, x, edge_index, batch):
            return torch.zeros(int(batch.max()) + 1, 2, dtype=x.dtype).index_add_(0, batch, x[:, :2])

    class Named(NoEdges):
        def forward(self, x, edge_index, batch, edge_attr=None):
            seen["named"] = edge_attr.shape
            return super().forward(x, edge_index, batch)

    class Keywords(NoEdges):
        def forward(self, x, edge_index, batch, **kwargs):
            seen["keywords"] = sorted(kwargs)
            return super().forward(x, edge_index, batch)

    assert RPGNN(NoEdges(), id_dim=2, strategy=PiSGD(train_samples=3))(graph).shape == (2, 2)
    RPGNN(Named(), id_dim=2, strategy=PiSGD(train_samples=3))(graph)
    RPGNN(Keywords(), id_dim=2, strategy=PiSGD(train_samples=3))(graph)
    assert seen == {"named": (3 * graph.num_edges, 3), "keywords": ["edge_attr"]}


def test_rpgnn_errors():
    with pytest.raises(TypeError, match="gnn must be a torch.nn.Module"):
        RPGNN(lambda *a: a, id_dim=2)
    with pytest.raises(ValueError, match="id_dim must be >= 1"):
        RPGNN(nn.Identity(), id_dim=0)
    graph = random_batch([3], seed=1)
    with pytest.raises(TypeError, match="RPGNN takes a GraphBatch, a PyG Data/Batch"):
        RPGNN(nn.Identity(), id_dim=2)("graph")

    class EdgeRows(nn.Module):
        def forward(self, x, edge_index, batch):
            return edge_index.t().double()

    with pytest.raises(ValueError, match="it must return one row per graph"):
        RPGNN(EdgeRows(), id_dim=2).eval()(graph)


class SumGNN(nn.Module):
    """A permutation-equivariant message-passing GNN in plain PyTorch, PyG-style: node rows
    (``per_node=True``) or per-graph sums."""

    def __init__(self, in_dim, per_node=False):
        super().__init__()
        torch.manual_seed(0)
        self.lin, self.head, self.per_node = nn.Linear(in_dim, 6).double(), nn.Linear(6, 2).double(), per_node

    def forward(self, x, edge_index, batch):
        h = torch.tanh(self.lin(x))
        h = torch.tanh(h + torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]]))
        if self.per_node:
            return self.head(h)
        return self.head(torch.zeros(int(batch.max()) + 1, h.shape[1], dtype=h.dtype).index_add_(0, batch, h))


@pytest.mark.parametrize("per_node", [False, True], ids=["graph rows", "node rows"])
def test_rpgnn_takes_any_strategy_that_places_every_vertex(per_node):
    """Exact gives the exact RP-GNN average (invariant; equal to its blocks' weighted sum);
    orientations from every start weigh their padding rows 0; the module's mode picks the count."""
    graph = random_batch([4, 3, 4], seed=31, p=0.7)
    model = RPGNN(SumGNN(2 + 4, per_node), id_dim=4, strategy=Exact(4)).eval()
    out = model(graph)
    assert out.shape == ((graph.total_nodes if per_node else graph.num_graphs), 2)
    blocks = RPGNN(SumGNN(2 + 4, per_node), id_dim=4, strategy=Exact(4, chunk_size=2)).eval()
    torch.testing.assert_close(blocks(graph), out)
    again = relabel(graph, 5)
    if not per_node:  # node rows move with the relabeling; graph rows must not change
        torch.testing.assert_close(model(again), out)
    chunks = list(model.node_ids(graph))
    assert len(chunks) == 1 and chunks[0].positions.shape == (24, graph.total_nodes)
    oriented = RPGNN(SumGNN(2 + 4, per_node), id_dim=4, strategy=Oriented("bfs", 4, starts="all", tiebreak="id"))
    assert oriented.eval()(graph).shape == out.shape
    sampled = RPGNN(SumGNN(2 + 4, per_node), id_dim=4, strategy=Oriented("dfs", 4, train_samples=2, eval_samples=3),
                    generator=torch.Generator().manual_seed(0))
    connected = random_batch([4, 3], seed=31, p=1.0)
    assert [next(iter(sampled.train(mode).node_ids(connected))).positions.shape[0] for mode in (True, False)] == [2, 3]


def test_rpgnn_refuses_strategies_that_leave_a_vertex_without_a_position():
    from rpfast.nn import RPDuvenaud

    graph = random_batch([5, 3], seed=32, p=1.0)
    with pytest.raises(ValueError, match=r"places the first 3 vertices of a relabeling, but graph 0 has 5"):
        RPGNN(SumGNN(2 + 3), id_dim=3, strategy=PiSGD(k=3))(graph)
    with pytest.raises(ValueError, match=r"Oriented\('dfs', size=3.* places 3 of the 5 vertices of graph 0"):
        RPGNN(SumGNN(2 + 3), id_dim=3, strategy=Oriented("dfs", 3))(graph)
    with pytest.raises(ValueError, match=r"KAry\(k=3.* places 3 of the 5 vertices of graph 0"):
        RPGNN(SumGNN(2 + 3), id_dim=3, strategy=KAry(3, order="invariant"))(graph)
    # a traversal restarts in every component: a disconnected graph is placed whole
    two_parts = GraphBatch(torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]), x=torch.zeros(5, 2, dtype=torch.float64))
    assert RPGNN(SumGNN(2 + 3), id_dim=3, strategy=Oriented("dfs", 5))(two_parts).shape == (1, 2)
    with pytest.raises(ValueError, match="RPDuvenaud numbers nodes within groups .* use a PiSGD strategy"):
        RPDuvenaud(3, 2, id_dim=2, strategy=Exact(4))
    with pytest.raises(TypeError, match="strategy must be an rpfast.nn.rp Strategy"):
        RPGNN(SumGNN(2 + 3), id_dim=3, strategy="pisgd")


def test_oriented_random_tiebreak_is_invariant_in_expectation():
    graph = random_batch([6, 5], seed=14, p=0.5)
    f = dense_f(4)
    gen = torch.Generator().manual_seed(0)
    rp = RelationalPooling(f, Oriented("dfs", 4, eval_samples=4000), generator=gen).eval()
    draws = RelationalPooling(f, Oriented("dfs", 4, eval_samples=1), generator=gen).eval()
    spread = torch.stack([draws(graph).detach() for _ in range(200)]).std(dim=0) / math.sqrt(4000)
    difference = (rp(graph) - rp(relabel(graph, 3))).detach().abs()
    assert bool((difference < 6 * spread + 1e-9).all()), (difference, spread)
    with pytest.raises(ValueError, match="tiebreak must be 'random', 'features' or 'id'"):
        Oriented("dfs", 4, tiebreak="degree")


# ------------------------------------------------------------------------------ streaming, node counts, RDKit
def test_exact_blocks_add_up_to_the_whole_sum():
    graph = random_batch([5, 3, 0, 4], seed=21)
    f = dense_f(5)
    whole = RelationalPooling(f, Exact(5)).eval()(graph)
    blocks = list(Exact(5, chunk_size=7).relabel_chunks(graph, training=False))
    assert len(blocks) == 5 * 4  # 5! / 3! blocks of 3! = 6 <= 7 relabelings for the largest graph
    rows = [{tuple(r) for blk in blocks for r, w in zip(blk.perms[b].tolist(), blk.weights[b].tolist()) if w > 0}
            for b in range(4)]
    assert rows[0] == {p + (-1,) * 0 for p in itertools.permutations(range(5))}
    assert sum(float(blk.weights[1].sum()) for blk in blocks) == pytest.approx(1.0)
    torch.testing.assert_close(RelationalPooling(f, Exact(5, chunk_size=7)).eval()(graph), whole, rtol=0, atol=1e-12)


def test_f_with_four_arguments_gets_the_node_counts():
    graph = random_batch([4, 2], seed=22)
    seen = {}

    def f(adj, x, mask, num_nodes):
        seen["counts"] = num_nodes
        assert torch.equal(mask, torch.arange(mask.shape[1]).unsqueeze(0) < num_nodes.unsqueeze(1))
        return num_nodes.to(torch.float64).unsqueeze(1)

    out = RelationalPooling(f, KAry(3)).eval()(graph)
    assert set(seen["counts"].tolist()) == {3, 0}  # padding rows of the smaller graph count 0
    assert out[:, 0].tolist() == [3.0, 0.0]  # a graph with fewer than k vertices has no term


def test_rdkit_orientation_does_not_depend_on_atom_numbering():
    Chem = pytest.importorskip("rdkit.Chem")
    from rpfast.datasets import batch_from_smiles
    from rpfast.ops import permute_adjacency

    smiles = ["CC(=O)Oc1ccccc1C(=O)O", "CCN(CC)CC", "OCC1OC(O)C(O)C1O"]
    shuffled = []
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        order = torch.randperm(mol.GetNumAtoms(), generator=torch.Generator().manual_seed(i)).tolist()
        shuffled.append(Chem.MolToSmiles(Chem.RenumberAtoms(mol, order), canonical=False))
    assert shuffled != smiles
    strategy = Oriented("rdkit", size=14)
    views = []
    for batch_smiles in (smiles, shuffled):
        graph, _ = batch_from_smiles(batch_smiles)
        perms = strategy.relabel(graph, training=False).perms
        elements = torch.tensor([([a.GetAtomicNum() for a in Chem.MolFromSmiles(s).GetAtoms()] + [0] * 14)[:14]
                                 for s in batch_smiles])
        views.append((permute_adjacency(graph.dense_adj(), perms), elements.gather(1, perms[:, 0].clamp(min=0)) * (perms[:, 0] >= 0)))
    assert torch.equal(views[0][0], views[1][0]) and torch.equal(views[0][1], views[1][1])
    with pytest.raises(ValueError, match="needs the molecules: give the graph a 'smiles' or 'mol'"):
        strategy.relabel(random_batch([3]), training=False)
    with pytest.raises(ValueError, match="one canonical order per molecule"):
        Oriented("rdkit", 4, eval_samples=3)


@pytest.mark.paper_scale  # 11! relabelings: the Exact tests above cover its composed path
def test_exact_rp_separates_the_csl_graphs_of_figure_1_and_gin_does_not():
    """CSL(11, 2) and CSL(11, 3) are 4-regular on 11 vertices: 1-WL, and so GIN, cannot tell them
    apart; the exact average of a permutation-sensitive MLP on vec(A) over all 11! relabelings can."""
    from rpfast.datasets.csl import csl_graph
    from rpfast.nn import GIN

    graph = GraphBatch.from_edge_lists([(csl_graph(11, 2), 11), (csl_graph(11, 3), 11)],
                                       x=[torch.ones(11, 1)] * 2)
    torch.manual_seed(0)
    gin = GIN(1, 16, 3, 4).eval()
    gin_out = gin(graph.x, graph)
    torch.testing.assert_close(gin_out[0], gin_out[1])

    mlp = nn.Sequential(nn.Flatten(), nn.Linear(121, 8), nn.ReLU(), nn.Linear(8, 1))
    rp = RelationalPooling(lambda adj, x: mlp(adj).double(), Exact(11)).eval()  # float64 sums
    with torch.no_grad():
        out = rp(graph)[:, 0]
    # each float32 term is within ~1e-7 of its exact value, so the averages are too; they differ by ~1e-4
    assert abs(float(out[0] - out[1])) > 1e-5, out


# ------------------------------------------------------------------ issue 24 regressions
def _int_f(adj, x):
    """An integer-valued, permutation-sensitive f: 3 * (edge 0-1 present) + 1 + (position 0 real)."""
    adj = adj[..., 0] if adj.dim() == 4 else adj  # the edge indicator
    present = (adj[:, 0, 1] != 0).to(torch.int64) if adj.shape[1] > 1 else torch.zeros(adj.shape[0], dtype=torch.int64)
    first = (x[:, 0, 0] != 0).to(torch.int64) if x.shape[1] else torch.zeros(adj.shape[0], dtype=torch.int64)
    return (3 * present + 1 + first).unsqueeze(1)


@pytest.mark.parametrize("strategy", [Exact(3), KAry(2), PiSGD(3)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_and_bool_f_are_averaged_in_floating_point(strategy, dtype):
    """The repro: an int64 f whose every term is 2 gave [[0]] (weights 1/n! cast to int64)."""
    graph = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.tensor([3]), x=torch.ones(3, 1))
    f = lambda adj, x: torch.full((adj.shape[0], 1), 2 if dtype != torch.bool else 1, dtype=dtype)  # noqa: E731
    out = RelationalPooling(f, strategy)(graph)
    assert out.dtype == torch.get_default_dtype()
    assert torch.equal(out, torch.full((1, 1), 2.0 if dtype != torch.bool else 1.0))


@settings(max_examples=30, deadline=None)
@given(graph_lists(max_graphs=3, max_nodes=5, min_graphs=1), st.sampled_from(["exact", "kary"]))
def test_integer_f_average_matches_a_brute_force_reference(graphs, which):
    """Property: RP of an integer f equals the exact average over itertools' relabelings, in floats."""
    xs = [torch.arange(n, dtype=torch.float64).remainder(2) for _, n in graphs]  # feature 0 on odd vertices
    graph = GraphBatch.from_edge_lists(graphs, x=[x.unsqueeze(1) for x in xs])
    n_max = max(n for _, n in graphs)
    strategy = Exact(max(n_max, 1)) if which == "exact" else KAry(2)
    out = RelationalPooling(_int_f, strategy)(graph)
    for b, (edges, n) in enumerate(graphs):
        adjacent = {(int(u), int(v)) for u, v in edges.t().tolist()}  # directed, as stored
        terms = []
        size = n if which == "exact" else 2
        for subset in itertools.combinations(range(n), size):
            for order in itertools.permutations(subset):
                edge01 = len(order) > 1 and (order[0], order[1]) in adjacent
                terms.append(3 * edge01 + 1 + (len(order) > 0 and bool(xs[b][order[0]] != 0)))
        expected = sum(terms) / len(terms) if terms else 0.0
        assert math.isclose(float(out[b, 0]), expected, rel_tol=1e-6, abs_tol=1e-6), b  # float32 (the default dtype)


def test_f_with_the_wrong_number_of_rows_or_a_scalar_is_named():
    graph = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.tensor([3]), x=torch.ones(3, 1))
    for f, error in ((lambda a, x: torch.tensor(1.0), ValueError), (lambda a, x: torch.ones(2, 1), ValueError),
                     (lambda a, x: 3, TypeError)):
        with pytest.raises(error, match=r"f must return a tensor \[M, \.\.\.\] with one row per relabeled graph"):
            RelationalPooling(f, Exact(3))(graph)


def test_kary_builds_no_orders_up_front_and_caps_k_like_exact():
    import tracemalloc

    tracemalloc.start()
    KAry(10)
    KAry(11)
    assert tracemalloc.get_traced_memory()[1] < 2**20  # was 975 MB for k = 10
    tracemalloc.stop()
    with pytest.raises(ValueError, match=r"k = 12 is above 11 \(4.79e\+08 orders per subset\)"):
        KAry(12)
    with pytest.raises(ValueError, match=r"k must be <= 9223372036854775807, got 9223372036854775808"):
        KAry(2**63)
    with pytest.raises(ValueError, match="about 1e"):
        KAry(2**62)
    assert KAry(12, order="invariant").k == 12


def test_kary_order_blocks_add_up_to_the_whole_sum_and_the_budget_is_checked_first():
    from rpfast import get_memory_budget, set_memory_budget

    graph = random_batch([5, 4, 2, 0], seed=3)
    f = dense_f(4)
    whole = RelationalPooling(f, KAry(4, chunk_size=10**9))(graph)  # one block
    for chunk in (1, 7, 24, 100):
        torch.testing.assert_close(RelationalPooling(f, KAry(4, chunk_size=chunk))(graph), whole)
    relabelings = KAry(4).relabel(graph, True)
    assert relabelings.perms.shape == (4, 5 * 24, 4)
    torch.testing.assert_close(relabelings.weights.sum(1), torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64))
    before = get_memory_budget()
    set_memory_budget(2**20)
    try:  # KAry(9) on a 12-vertex graph: 220 subsets x 9! orders, refused before allocating
        big = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.tensor([12]))
        with pytest.raises(ValueError, match="memory budget"):
            KAry(9).relabel(big, True)
    finally:
        set_memory_budget(before)


@pytest.mark.parametrize("make", [VecMLP, VecRNN, AdjCNN])
@pytest.mark.parametrize("case", ["no_kept_subset", "empty_batch", "oriented_all_on_empty_graphs"])
def test_encoders_give_zero_for_graphs_without_relabelings(make, case):
    x = torch.ones(3, 1)
    sizes = {"no_kept_subset": [2, 1], "empty_batch": [], "oriented_all_on_empty_graphs": [0, 0]}[case]
    graph = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.tensor(sizes, dtype=torch.int64),
                       x=torch.ones(sum(sizes), 1))
    strategy = Oriented("dfs", 3, starts="all") if case.startswith("oriented") else KAry(3)
    rp = RelationalPooling(make(3, 1, 1, 4, 2), strategy)
    out = rp(graph)
    assert out.shape == (len(sizes), 2) and torch.equal(out, torch.zeros(len(sizes), 2))
    out.sum().backward()  # the graph is still differentiable
    del x


def test_rpgnn_on_an_empty_batch_returns_no_rows():
    from torch_geometric.nn import GINConv, global_add_pool

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GINConv(nn.Linear(3 + 4, 5))

        def forward(self, x, edge_index, batch):
            return global_add_pool(self.conv(x, edge_index), batch)

    empty = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=torch.zeros(0, dtype=torch.int64),
                       x=torch.ones(0, 3))
    assert RPGNN(Net(), id_dim=4)(empty).shape[0] == 0


def test_permute_adjacency_refuses_positions_whose_block_cannot_be_laid_out():
    from rpfast.ops import permute_adjacency

    huge = 2**62  # [1, 0, K, K, 1]: no entry, but strides beyond 2^63
    with pytest.raises(ValueError, match=rf"permute_adjacency output of shape \[1, 0, {huge}, {huge}, 1\] cannot be"):
        permute_adjacency(torch.zeros(1, 2, 2), torch.zeros(1, 0, 2**62, dtype=torch.int64))


def test_relational_pooling_takes_pyg_argument_order():
    """forward(x, edge_index, batch, edge_attr) gives what the GraphBatch form gives, edge
    features included (they become adjacency channels); a stray edge_attr= is refused."""
    base = random_batch([4, 3], seed=5)
    edge_attr = torch.randn(base.num_edges, 2, dtype=torch.float64)
    graph = GraphBatch(base.edge_index, x=base.x, ptr=base.ptr, edge_attr=edge_attr)
    rp = RelationalPooling(VecMLP(4, 3, 2, 8, 2).double(), Exact(4)).eval()
    expected = rp(graph)
    torch.testing.assert_close(rp(graph.x, graph.edge_index, graph.batch, edge_attr=edge_attr), expected)
    plain = RelationalPooling(VecMLP(4, 1, 2, 8, 2).double(), Exact(4)).eval()
    torch.testing.assert_close(plain(base.x, base.edge_index, base.batch), plain(base))
    with pytest.raises(TypeError, match="RelationalPooling takes nothing beside a graph object"):
        rp(graph, edge_attr=edge_attr)
    with pytest.raises(TypeError, match="RelationalPooling takes a GraphBatch, a PyG Data/Batch"):
        plain((base.x, base.edge_index, base.batch))  # a tuple is no input form
