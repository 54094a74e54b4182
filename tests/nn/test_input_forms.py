"""One input convention (rpfast.nn.graph_input.read_graph_input): every graph layer gives the same
output for a GraphBatch, a PyG Data/Batch, (x, graph) and (x, edge_index, batch, edge_attr), and
RP layers also for dense (adj, x, num_nodes); anything else is one clear TypeError."""
import importlib.util

import pytest
import torch
from torch import nn

from rpfast.data import GraphBatch
from rpfast.nn import (GIN, RPGIN, RPGNN, Duvenaud, GINConv, Oriented, PiSGD, RelationalPooling, RPDuvenaud,
                       SubgraphRP, VecMLP)
from rpfast.nn.graph_input import GraphInput, read_graph_input

F_IN, D_EDGE, ID_DIM = 3, 2, 4
HAS_PYG = importlib.util.find_spec("torch_geometric") is not None


def graph_with_everything(seed=0, sizes=(5, 3, 4)):
    """A batch with node features [N, 3], edge features [E, 2] and an ``element`` label per node."""
    gen = torch.Generator().manual_seed(seed)
    pairs = []
    for n in sizes:
        upper = torch.triu(torch.rand(n, n, generator=gen) < 0.6, diagonal=1)
        i, j = torch.nonzero(upper, as_tuple=True)
        pairs.append((torch.stack([torch.cat([i, j]), torch.cat([j, i])]), n))
    base = GraphBatch.from_edge_lists(pairs)
    N, E = base.total_nodes, base.num_edges
    graph = GraphBatch(base.edge_index, x=torch.randn(N, F_IN, generator=gen, dtype=torch.float64), ptr=base.ptr,
                       edge_attr=torch.randn(E, D_EDGE, generator=gen, dtype=torch.float64))
    graph.extras["element"] = torch.randint(0, 3, (N,), generator=gen)
    return graph


class PlainGCN(nn.Module):
    """A GCN written out in PyTorch, PyG-style and without edge features:
    ``H = D^-1/2 (A + I) D^-1/2 X W``, ReLU, per-graph sum, linear head -> [B, 2]."""

    def __init__(self, in_dim):
        super().__init__()
        self.lin, self.head = nn.Linear(in_dim, 8), nn.Linear(8, 2)

    def forward(self, x, edge_index, batch):
        N = x.shape[0]
        loops = torch.arange(N, device=x.device)
        src, dst = torch.cat([edge_index[0], loops]), torch.cat([edge_index[1], loops])
        degree = torch.zeros(N, dtype=x.dtype, device=x.device).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        norm = (degree[src] * degree[dst]).rsqrt().unsqueeze(1)
        z = self.lin(x)
        h = torch.relu(torch.zeros_like(z).index_add_(0, dst, norm * z[src]))
        B = int(batch.max()) + 1 if batch.numel() else 0
        return self.head(torch.zeros(B, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, batch, h))


def _gen():
    return torch.Generator().manual_seed(0)


LAYERS = {
    "RelationalPooling": lambda: RelationalPooling(VecMLP(5, 1 + D_EDGE, F_IN, 8, 2), PiSGD(5, 2, 3),
                                                   generator=_gen()),
    "RPGNN": lambda: RPGNN(PlainGCN(F_IN + ID_DIM), ID_DIM, strategy=PiSGD(train_samples=2, eval_samples=3),
                           generator=_gen()),
    "RPGIN": lambda: RPGIN(F_IN, 8, 2, 2, ID_DIM, edge_dim=D_EDGE, generator=_gen()),
    "GIN": lambda: GIN(F_IN, 8, 2, 2, edge_dim=D_EDGE),  # GINE layers: edge_attr reaches every layer
    "SubgraphRP": lambda: SubgraphRP(Duvenaud(F_IN, 2, conv=(8,), dense=8),
                                     Oriented("bfs", 3, train_samples=2, eval_samples=3), generator=_gen()),
    "Duvenaud": lambda: Duvenaud(F_IN, 2, conv=(8,), dense=8),
    "RPDuvenaud": lambda: RPDuvenaud(F_IN, 2, ID_DIM, conv=(8,), dense=8, generator=_gen()),
}
FORMS = ["graph", "pyg", "x_graph", "edge_index", "dense"]


def _arguments(form, graph):
    if form == "graph":
        return (graph,), {}
    if form == "pyg":
        return (graph.to_pyg(),), {}
    if form == "x_graph":
        return (graph.x, graph), {}
    if form == "edge_index":
        return (graph.x, graph.edge_index, graph.batch), {"edge_attr": graph.edge_attr}
    return (graph.dense_adj(), graph.dense_x(), graph.num_nodes), {}


def _reseed(model):
    if getattr(model, "generator", None) is not None:
        model.generator.manual_seed(0)


def _run(model, form, graph):
    _reseed(model)
    args, kwargs = _arguments(form, graph)
    return model(*args, **kwargs)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_input_form_gives_the_same_output(name, form, training):
    if form == "pyg" and not HAS_PYG:
        pytest.skip("torch_geometric is not installed")
    if form == "dense" and name != "RelationalPooling":
        pytest.skip("only RelationalPooling takes dense (adj, x, num_nodes)")
    graph = graph_with_everything()
    torch.manual_seed(0)
    model = LAYERS[name]().double().train(training)
    if name == "RPDuvenaud" and form == "edge_index":
        with pytest.raises(ValueError, match="RPDuvenaud needs each atom's element"):
            _run(model, form, graph)  # (x, edge_index, ...) carries no element labels
        return
    expected = _run(model, "graph", graph)
    out = _run(model, form, graph)
    assert out.shape[0] == graph.num_graphs
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("name", sorted(set(LAYERS) - {"RPDuvenaud"}))  # it needs element labels
def test_edge_index_without_batch_is_one_graph(name):
    graph = graph_with_everything(sizes=(5,))
    torch.manual_seed(0)
    model = LAYERS[name]().double().eval()
    one = _run(model, "graph", graph)
    _reseed(model)
    torch.testing.assert_close(model(graph.x, graph.edge_index, edge_attr=graph.edge_attr), one)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_other_inputs_are_one_clear_type_error(name):
    graph = graph_with_everything()
    model = LAYERS[name]().double()
    accepted = (r"takes a GraphBatch, a PyG Data/Batch, \(x, edge_index, batch=None, edge_attr=None\) or "
                r"\(x or None, GraphBatch\); got ")
    with pytest.raises(TypeError, match=f"^{name} {accepted}str$"):
        model("graph")
    with pytest.raises(TypeError, match=f"^{name}: edge_index must hold integers \\(int64\\), got float32$"):
        model(graph.x, graph.edge_index.float())  # a float "edge_index" is no index
    with pytest.raises(ValueError, match=r"edge_index must have shape \[2, E\], got \[\d+, 2\] \(transposed"):
        model(graph.x, graph.edge_index.t())
    with pytest.raises(TypeError, match="edge_index must be a torch integer tensor .* got ndarray"):
        model(graph.x, graph.edge_index.numpy())
    with pytest.raises(ValueError, match=r"needs node features x \[N, F\]"):
        model(None, graph.edge_index, graph.batch)
    with pytest.raises(TypeError, match=f"{name} takes nothing beside a graph object.*got edge_index too"):
        model(graph, graph.edge_index)
    with pytest.raises(TypeError, match=f"{name} takes nothing beside \\(x, graph\\).*got edge_attr too"):
        model(graph.x, graph, edge_attr=graph.edge_attr)


def test_read_graph_input_forms():
    graph = graph_with_everything()
    assert read_graph_input("L", graph) == GraphInput(graph.x, graph)
    x = torch.ones(graph.total_nodes, 1)
    assert read_graph_input("L", x, graph) == GraphInput(x, graph)  # x beside the graph wins
    assert read_graph_input("L", None, graph).x is None
    built = read_graph_input("L", graph.x, graph.edge_index, graph.batch, graph.edge_attr)
    assert built.x is built.graph.x and torch.equal(built.graph.ptr, graph.ptr)
    assert torch.equal(built.graph.edge_attr, graph.edge_attr)
    single = read_graph_input("L", graph.x, graph.edge_index)
    assert single.graph.num_graphs == 1
    with pytest.raises(TypeError, match=r"L\(x, graph\) takes x as a tensor \[N, F\] or None, got str"):
        read_graph_input("L", "x", graph)
    with pytest.raises(TypeError, match=r"L takes a GraphBatch.*; got \(Tensor\[12, 3\] float64, NoneType, "
                                        r"Tensor\[12\] int64\)"):
        read_graph_input("L", graph.x, None, graph.batch)
    if HAS_PYG:
        pyg = read_graph_input("L", graph.to_pyg())
        assert torch.equal(pyg.graph.edge_index, graph.edge_index) and torch.equal(pyg.x, graph.x)


def test_a_gcn_without_edge_attr_wraps_in_rpgnn_on_a_batch_with_edge_attr():
    graph = graph_with_everything()
    assert graph.edge_attr is not None
    model = RPGNN(PlainGCN(F_IN + ID_DIM), ID_DIM, generator=_gen()).double()
    out = model(graph)
    assert out.shape == (graph.num_graphs, 2)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    torch.testing.assert_close(model(graph.x, graph.edge_index, graph.batch, edge_attr=graph.edge_attr).shape,
                               torch.Size([graph.num_graphs, 2]))


def test_relational_pooling_edge_features_as_channels_are_switchable():
    """use_edge_attr=True: f sees [indicator, edge_attr] channels; False: the indicator alone."""
    graph = graph_with_everything()
    seen = []

    def f(adj, x):
        seen.append(adj.shape[-1])
        return adj.sum(dim=(1, 2, 3)).unsqueeze(1) + x.sum(dim=(1, 2)).unsqueeze(1)

    RelationalPooling(f, PiSGD(5))(graph)
    RelationalPooling(f, PiSGD(5), use_edge_attr=False)(graph)
    assert seen == [1 + D_EDGE, 1]
    with pytest.raises(TypeError, match="use_edge_attr must be a bool"):
        RelationalPooling(f, use_edge_attr="yes")
    with pytest.raises(TypeError, match="dense RP input .* no edge_attr"):
        RelationalPooling(f)(graph.dense_adj(), graph.dense_x(), graph.num_nodes, edge_attr=graph.edge_attr)


@pytest.mark.parametrize("form", ["graph", "pyg", "x_graph", "edge_index"])
def test_gin_conv_takes_pyg_s_forms_and_a_graph_alone(form):
    """GINConv keeps PyG's GINConv signature (x, edge_index, size=None), node-level (no batch or
    edge features), and also takes a GraphBatch or PyG Data alone."""
    if form == "pyg" and not HAS_PYG:
        pytest.skip("torch_geometric is not installed")
    graph = graph_with_everything()
    torch.manual_seed(0)
    conv = GINConv(nn.Linear(F_IN, 4), train_eps=True).double()
    expected = conv(graph.x, graph.edge_index)
    args = {"graph": (graph,), "pyg": (graph.to_pyg(),), "x_graph": (graph.x, graph),
            "edge_index": (graph.x, graph.edge_index)}[form]
    torch.testing.assert_close(conv(*args), expected)
    with pytest.raises(TypeError, match="got Tensor and no edges"):
        conv(graph.x)


def test_gin_ids_are_keyword_only_with_a_clear_message():
    graph = graph_with_everything()
    model = GIN(F_IN, 8, 2, 2, id_dim=ID_DIM).double()
    ids = torch.zeros(1, graph.total_nodes, dtype=torch.int64)
    assert model(graph.x, graph, ids=ids).shape == (1, graph.num_graphs, 2)
    for args in [(graph.x, graph, ids), (graph, ids), (graph.x, graph.edge_index, graph.batch, ids)]:
        with pytest.raises(TypeError, match=r"GIN takes ids as a keyword argument \(gin\(graph, ids=ids\)"):
            model(*args)
    with pytest.raises(ValueError, match="id_dim=0 and takes no ids"):
        GIN(F_IN, 8, 2, 2).double()(graph, ids=ids)


def test_subgraph_rp_calls_a_pyg_style_gnn_pyg_style():
    """SubgraphRP calls a GNN whose forward needs (x, edge_index, batch) that way, like RPGNN does;
    the GCN here takes no edge_attr and gets none although the batch has bond features."""
    graph = graph_with_everything()
    strategy = Oriented("bfs", 3, train_samples=2, eval_samples=3)
    model = SubgraphRP(PlainGCN(F_IN), strategy, generator=_gen()).double().eval()
    out = model(graph)
    assert out.shape == (graph.num_graphs, 2)

    class GraphStyle(nn.Module):  # the same GCN behind forward(graph)
        def __init__(self, gcn):
            super().__init__()
            self.gcn = gcn

        def forward(self, sub):
            return self.gcn(sub.x, sub.edge_index, sub.batch)

    twin = SubgraphRP(GraphStyle(model.gnn), strategy, generator=_gen()).eval()
    torch.testing.assert_close(twin(graph), out)


def test_rpgin_graph_embedding_takes_every_form():
    graph = graph_with_everything()
    model = RPGIN(F_IN, 8, 2, 2, ID_DIM, generator=_gen()).double().eval()

    def embed(*args):
        model.generator.manual_seed(0)
        return model.graph_embedding(*args)

    expected = embed(graph)
    assert expected.shape == (graph.num_graphs, model.gin.embedding_dim)
    for args in [(graph.x, graph), (graph.x, graph.edge_index, graph.batch)] + ([(graph.to_pyg(),)] if HAS_PYG else []):
        torch.testing.assert_close(embed(*args), expected)


def test_graph_sum_takes_pyg_s_batch_vector_and_batches():
    from rpfast.ops import graph_sum

    graph = graph_with_everything()
    expected = graph_sum(graph.x, graph)
    torch.testing.assert_close(graph_sum(graph.x, graph.batch), expected)
    if HAS_PYG:
        torch.testing.assert_close(graph_sum(graph.x, graph.to_pyg()), expected)
    with pytest.raises(ValueError, match="sorted order"):
        graph_sum(graph.x, graph.batch.flip(0))
    with pytest.raises(TypeError, match="a PyG Data/Batch or a batch vector"):
        graph_sum(graph.x, "graph")


def test_gin_conv_checks_size_as_pyg_does():
    graph = graph_with_everything()
    conv = GINConv(nn.Linear(F_IN, 4)).double()
    N = graph.total_nodes
    assert conv(graph.x, graph.edge_index, (N, N)).shape == (N, 4)
    for size in [(3, 3), (N, N - 1), graph.batch]:  # a batch vector in size's place: a PyG habit
        with pytest.raises(ValueError, match=rf"size must be \(N, N\) = \({N}, {N}\)"):
            conv(graph.x, graph.edge_index, size)


def test_relational_pooling_defaults_to_its_encoder_s_positions():
    """An rpfast encoder built for K positions gets PiSGD(max_nodes=K) by default, so batches whose
    largest graph is smaller than K are padded instead of refused."""
    graph = graph_with_everything(sizes=(3, 4))
    model = RelationalPooling(VecMLP(6, 1 + D_EDGE, F_IN, 8, 2), generator=_gen()).double()
    assert model.strategy.size == 6
    assert model(graph).shape == (2, 2)
    fixed = RelationalPooling(VecMLP(6, 1 + D_EDGE, F_IN, 8, 2), PiSGD(), generator=_gen()).double()
    with pytest.raises(ValueError, match=r"give it a strategy of K=6 positions, e.g. PiSGD\(max_nodes=K\)"):
        fixed(graph)  # a size-free PiSGD takes the batch's n_max = 4
