"""Regression tests for issue 8: argument validation, empty inputs, PyG round trips, select with
repeats, double backward, and the GINConv CSR cache."""
import networkx as nx
import numpy as np
import pytest
import torch

from rpfast.data import GraphBatch, clear_graph_cache
from rpfast._validation import check_count
from rpfast.data.cache import cache_size, graph_for_edge_index
from rpfast.nn import GINConv, PiSGD, RelationalPooling
from rpfast.ops import (
    batch_norm_relu,
    bfs_order,
    dfs_order,
    gin_aggregate,
    permute_adjacency,
    permute_nodes,
    random_permutations,
    segment_sum,
    wl_order,
)

EMPTY = torch.zeros(2, 0, dtype=torch.int64)


def _graphs():
    """Three small graphs with node and edge features (local edge lists)."""
    gen = torch.Generator().manual_seed(0)
    graphs = [(torch.tensor([[0, 1, 1], [1, 0, 2]]), 3), (torch.tensor([[0, 0], [1, 0]]), 2), (EMPTY, 1)]
    x = [torch.randn(n, 2, generator=gen) for _, n in graphs]
    ea = [torch.randn(ei.shape[1], 3, generator=gen) for ei, _ in graphs]
    return graphs, x, ea


def _assert_same_batch(a: GraphBatch, b: GraphBatch):
    assert torch.equal(a.ptr, b.ptr)
    assert torch.equal(a.edge_index, b.edge_index)
    assert torch.equal(a.x, b.x)
    assert torch.equal(a.edge_attr, b.edge_attr)


# ------------------------------------------------------------------ 9: select with repeats
@pytest.mark.parametrize("picks", [[0, 0], [1, 0, 1], [2, 2, 0], [0, 1, 2, 0, 1, 2]])
def test_select_with_repeats_matches_batching_the_graphs(picks):
    graphs, x, ea = _graphs()
    batch = GraphBatch.from_edge_lists(graphs, x=x, edge_attr=ea)
    expected = GraphBatch.from_edge_lists([graphs[i] for i in picks], x=[x[i] for i in picks],
                                          edge_attr=[ea[i] for i in picks])
    _assert_same_batch(batch.select(picks), expected)


def test_select_nothing_keeps_feature_widths():
    graphs, x, ea = _graphs()
    none = GraphBatch.from_edge_lists(graphs, x=x, edge_attr=ea).select([])
    assert none.num_graphs == 0 and none.x.shape == (0, 2) and none.edge_attr.shape == (0, 3)


def test_select_on_a_batch_with_unsorted_edges():
    # edges listed graph 1 first: each copy still gets exactly its own edges
    batch = GraphBatch(torch.tensor([[3, 0, 2], [2, 1, 3]]), ptr=torch.tensor([0, 2, 4]),
                       edge_attr=torch.tensor([1.0, 2.0, 3.0]), x=torch.arange(4.0))
    picked = batch.select([1, 1])
    assert picked.edge_index.tolist() == [[1, 0, 3, 2], [0, 1, 2, 3]]
    assert picked.edge_attr[:, 0].tolist() == [1.0, 3.0, 1.0, 3.0]
    assert picked.x[:, 0].tolist() == [2.0, 3.0, 2.0, 3.0]


# ------------------------------------------------------------------ 14: int-like arguments
@pytest.mark.parametrize("bad", [3.7, 3.0, "5", True, None, torch.tensor(2.0), np.float64(2)])
def test_check_count_rejects_non_integers(bad):
    with pytest.raises(TypeError, match=r"n must be an int, got"):
        check_count(bad, "n")


def test_check_count_accepts_int_likes():
    assert check_count(np.int32(4), "n") == 4
    assert check_count(torch.tensor(4), "n") == 4
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_count(0, "n", minimum=1)


@pytest.mark.parametrize("bad", [3.7, "5", True])
def test_num_nodes_must_be_an_int(bad):
    with pytest.raises(TypeError, match=rf"num_nodes must be an int, got {bad!r}"):
        GraphBatch(EMPTY, num_nodes=bad)
    with pytest.raises(TypeError, match=rf"graphs\[0\] num_nodes must be an int, got {bad!r}"):
        GraphBatch.from_edge_lists([(EMPTY, bad)])
    with pytest.raises(TypeError, match=rf"num_graphs must be an int, got {bad!r}"):
        GraphBatch(EMPTY, batch=torch.tensor([0, 0]), num_graphs=bad)


def test_num_nodes_accepts_numpy_and_tensor_ints():
    assert GraphBatch(EMPTY, num_nodes=np.int64(3)).total_nodes == 3
    assert GraphBatch(EMPTY, num_nodes=torch.tensor(3)).total_nodes == 3
    with pytest.raises(ValueError, match="num_graphs = 2 but batch/ptr describe 3 graphs"):
        GraphBatch(EMPTY, ptr=torch.tensor([0, 1, 1, 2]), num_graphs=2)


def test_relational_pooling_counts_live_in_the_strategy():
    with pytest.raises(TypeError, match="k must be an int, got True"):
        PiSGD(k=True)
    with pytest.raises(TypeError, match="train_samples must be an int, got 2.0"):
        PiSGD(4, train_samples=2.0)
    with pytest.raises(ValueError, match="eval_samples must be >= 1, got 0"):
        PiSGD(4, eval_samples=0)
    assert PiSGD(k=np.int64(3)).size == 3
    with pytest.raises(TypeError, match="unexpected keyword argument 'train_samples'"):
        RelationalPooling(torch.nn.Identity(), train_samples=2)  # the removed legacy form (CHANGELOG)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        RelationalPooling(torch.nn.Identity(), PiSGD(4), 3)


def test_orders_take_int_like_k():
    batch = GraphBatch.from_networkx([nx.path_graph(3)])
    assert dfs_order(batch, "all", k=torch.tensor(2)).shape == (1, 3, 2)
    with pytest.raises(TypeError, match="k must be an int, got 2.5"):
        bfs_order(batch, "all", k=2.5)
    with pytest.raises(TypeError, match="num_samples must be an int, got '2'"):
        dfs_order(batch, "random", num_samples="2")


# ------------------------------------------------------------------ 14: other inputs
def test_batch_norm_relu_momentum_none_and_bad_numbers():
    H = 3
    params = [torch.ones(H), torch.zeros(H), torch.zeros(H), torch.ones(H)]
    x = torch.randn(4, H)
    with pytest.raises(TypeError):  # what torch's own functional form does
        torch.nn.functional.batch_norm(x, params[2], params[3], training=True, momentum=None)
    with pytest.raises(ValueError, match=r"momentum=None .* num_batches_tracked"):
        batch_norm_relu(x, *params, True, momentum=None)
    with pytest.raises(TypeError, match="momentum must be a float or a tensor of one float, got '0.1'"):
        batch_norm_relu(x, *params, True, momentum="0.1")
    with pytest.raises(TypeError, match="eps must be a float"):
        batch_norm_relu(x, *params, True, eps=None)
    with pytest.raises(TypeError, match="training must be a bool, got 'yes'"):
        batch_norm_relu(x, *params, "yes")
    # numpy scalars are fine
    batch_norm_relu(x, *params, True, momentum=np.float32(0.1), eps=np.float64(1e-5))


def test_batch_norm_relu_zero_channels_and_double_backward_error():
    out = batch_norm_relu(torch.zeros(4, 0), torch.ones(0), torch.zeros(0), torch.zeros(0), torch.ones(0), True)
    assert out.shape == (4, 0)
    x = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    p = [torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
         torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)]
    (g,) = torch.autograd.grad(batch_norm_relu(x, *p, True).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        g.sum().backward()


def test_from_networkx_missing_attribute_names_node_and_attribute():
    G = nx.path_graph(["a", "b", "c"])
    nx.set_node_attributes(G, {"a": 1.0, "b": 2.0}, "w")
    nx.set_edge_attributes(G, {("a", "b"): 0.5}, "len")
    with pytest.raises(ValueError, match=r"node_attr='w': graphs\[0\] node 'c' has no attribute 'w'"):
        GraphBatch.from_networkx(G, node_attr="w")
    with pytest.raises(ValueError, match=r"edge_attr='len': graphs\[0\] edge \('b', 'c'\) has no attribute 'len'"):
        GraphBatch.from_networkx(G, edge_attr="len")
    nx.set_node_attributes(G, {"c": "heavy"}, "w")
    with pytest.raises(ValueError, match="node_attr='w': the values in graphs\\[0\\] must be numbers"):
        GraphBatch.from_networkx(G, node_attr="w")


def test_from_networkx_with_attributes_and_no_graphs():
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: 1.0, 1: 2.0, 2: 3.0}, "w")
    assert GraphBatch.from_networkx(G, node_attr="w").x[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert GraphBatch.from_networkx([], node_attr="w").num_graphs == 0


@pytest.mark.parametrize("which", ["x", "edge_attr"])
def test_from_edge_lists_needs_one_feature_entry_per_graph(which):
    graphs = [(torch.tensor([[0], [1]]), 2), (torch.tensor([[0], [1]]), 2)]  # 2 nodes, 1 edge each
    rows = 2 if which == "x" else 1
    with pytest.raises(ValueError, match=rf"{which} has 3 entries but there are 2 graphs"):
        GraphBatch.from_edge_lists(graphs, **{which: [torch.zeros(rows, 1)] * 3})
    with pytest.raises(ValueError, match=rf"{which} has 1 entries but there are 2 graphs"):
        GraphBatch.from_edge_lists(graphs, **{which: [torch.zeros(rows, 1)]})
    with pytest.raises(ValueError, match=rf"{which}\[1\] has 2 columns but earlier entries have 1"):
        GraphBatch.from_edge_lists(graphs, **{which: [torch.zeros(rows, 1), torch.zeros(rows, 2)]})
    with pytest.raises(TypeError, match=rf"{which} must be a list with one tensor per graph"):
        GraphBatch.from_edge_lists(graphs, **{which: torch.zeros(2 * rows, 1)})


def test_pyg_objects_are_not_index_tensors():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data

    data = Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]), y=torch.tensor([1]))
    batch = Batch.from_data_list([data, data])
    with pytest.raises(TypeError, match=r"edge_index is a torch_geometric DataBatch.*GraphBatch.from_pyg\(batch\)"):
        GraphBatch(batch)
    with pytest.raises(TypeError, match=r"data must be a torch_geometric.data.Data or Batch, got list.*from_data_list"):
        GraphBatch.from_pyg([data])
    with pytest.raises(TypeError, match="data must be a torch_geometric.data.Data or Batch, got Tensor"):
        GraphBatch.from_pyg(data.edge_index)


def test_ginconv_accepts_pyg_batch():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data

    gen = torch.Generator().manual_seed(1)
    datas = [Data(x=torch.randn(n, 3, generator=gen), edge_index=torch.randint(0, n, (2, 2 * n), generator=gen))
             for n in (3, 4)]
    batch = Batch.from_data_list(datas)
    conv = GINConv(torch.nn.Linear(3, 2), eps=0.2)
    uncached = GINConv(conv.nn, eps=0.2, cache=False)  # re-initialises the shared nn, as PyG's constructor does
    expected = conv(batch.x, GraphBatch.from_pyg(batch))
    torch.testing.assert_close(conv(batch.x, batch), expected)
    torch.testing.assert_close(uncached(batch.x, batch), expected)
    with pytest.raises(ValueError, match="x has 5 nodes .* has 7"):
        conv(batch.x[:5], batch)


def test_sparse_adjacency_as_edge_index():
    """GraphBatch takes an edge_index and names the conversion; the layers take PyG's adj_t
    (tests/data/test_sparse_input.py)."""
    adj = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2), (2, 2),
                                  check_invariants=True)
    with pytest.raises(TypeError, match=r"edge_index is a sparse tensor .*edge_index_from_adj_t\(adj_t\)"):
        GraphBatch(adj)
    assert GINConv(torch.nn.Identity())(torch.ones(2, 1), adj).tolist() == [[2.0], [2.0]]


def test_ragged_edge_index_is_a_type_error():
    with pytest.raises(TypeError, match="edge_index must be an integer tensor/array, got list"):
        GraphBatch([[0, 1], [1]])


def test_from_pyg_keeps_extras_and_to_pyg_round_trips():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data

    gen = torch.Generator().manual_seed(0)
    datas = [Data(x=torch.randn(n, 2, generator=gen), edge_index=torch.randint(0, n, (2, 2 * n), generator=gen),
                  edge_attr=torch.randn(2 * n, 1, generator=gen), y=torch.tensor([float(n)]), name=f"g{n}")
             for n in (3, 1, 4)]
    pyg = Batch.from_data_list(datas)
    graph = GraphBatch.from_pyg(pyg)
    assert torch.equal(graph.y, pyg.y) and graph.name == ["g3", "g1", "g4"]
    assert set(graph.extras) == {"y", "name"}
    back = graph.to_pyg()
    assert isinstance(back, Batch) and back.num_graphs == 3
    for key in ("x", "edge_index", "edge_attr", "batch", "ptr", "y"):
        assert torch.equal(back[key], pyg[key]), key
    assert back.name == pyg.name
    restored = back.to_data_list()[2]
    assert torch.equal(restored.edge_index, datas[2].edge_index) and restored.name == "g4"
    single = GraphBatch.from_pyg(datas[0])
    assert torch.equal(single.y, datas[0].y) and single.to_pyg().num_graphs == 1
    # a batch built another way converts too
    plain = GraphBatch.from_edge_lists([(EMPTY, 2), (torch.tensor([[0], [1]]), 2)]).to_pyg()
    assert plain.num_graphs == 2 and plain.num_nodes == 4 and plain.ptr.tolist() == [0, 2, 4]
    with pytest.raises(AttributeError, match="GraphBatch has no attribute 'z'"):
        graph.z


# ------------------------------------------------------------------ 14: double backward
def test_gin_aggregate_double_backward():
    graph = GraphBatch.from_edge_lists([(torch.tensor([[0, 1, 2, 0, 1], [1, 2, 0, 0, 1]]), 3),
                                        (torch.tensor([[0], [1]]), 2), (EMPTY, 1)])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    eps = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a, e: gin_aggregate(a, graph, e), (x, eps))
    assert torch.autograd.gradgradcheck(lambda a: gin_aggregate(a[0], graph, 0.5), (x,))


def test_ginconv_and_segment_sum_double_backward():
    torch.manual_seed(0)
    conv = GINConv(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh()), train_eps=True).double()
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    ptr = torch.tensor([0, 1, 4])
    assert torch.autograd.gradgradcheck(lambda a: segment_sum(conv(a, edge_index), ptr), (x,))
    # gradient penalty style: d/d(params) of |d out / d x|^2
    (g,) = torch.autograd.grad(conv(x, edge_index).sum(), x, create_graph=True)
    g.square().sum().backward()
    assert conv.eps.grad is not None and conv.nn[0].weight.grad is not None


# ------------------------------------------------------------------ 14: RelationalPooling k and dense inputs
class _Sum(torch.nn.Module):
    def forward(self, adj, x):
        self.shapes = (tuple(adj.shape), tuple(x.shape))
        return adj.flatten(1).sum(1, keepdim=True) + x.flatten(1).sum(1, keepdim=True)


def test_relational_pooling_k_larger_than_graphs_pads_with_zeros():
    graph = GraphBatch.from_edge_lists([(torch.tensor([[0, 1], [1, 2]]), 3), (torch.tensor([[0], [1]]), 2)],
                                       x=[torch.ones(3, 2), torch.ones(2, 2)])
    f = _Sum()
    out = RelationalPooling(f, PiSGD(k=6, train_samples=2))(graph)
    assert f.shapes == ((4, 6, 6, 1), (4, 6, 2))
    # padding adds nothing: the sums equal those of the unpadded graphs
    assert out[:, 0].tolist() == [2.0 + 6.0, 1.0 + 4.0]


def test_relational_pooling_checks_dense_inputs():
    graph = GraphBatch.from_edge_lists([(EMPTY, 3), (EMPTY, 2)], x=[torch.ones(3, 2), torch.ones(2, 2)])
    adj, x = graph.dense_adj(), graph.dense_x()
    rp = RelationalPooling(_Sum())
    with pytest.raises(ValueError, match=r"num_nodes\[1\] = 4 exceeds the n = 3 positions of adj"):
        rp(adj, x, torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="num_nodes has 1 entries but adj holds 2 graphs"):
        rp(adj, x, [3])
    with pytest.raises(ValueError, match=r"x must have shape \[B=2, n=3, F\] to match adj, got \(1, 3, 2\)"):
        rp(adj, x[:1], graph.num_nodes)
    with pytest.raises(TypeError, match="num_nodes must hold integers"):
        rp(adj, x, [3.0, 2.0])


# ------------------------------------------------------------------ 16: empty inputs
def test_empty_batches_build():
    nothing = GraphBatch.from_edge_lists([], x=[], edge_attr=[])
    assert nothing.num_graphs == 0 and nothing.x.shape == (0, 0) and nothing.edge_attr.shape == (0, 0)
    assert nothing.dense_x().shape == (0, 0, 0)
    # graphs of 0 nodes given 1-D empty features take the common width
    mixed = GraphBatch.from_edge_lists([(EMPTY, 0), (EMPTY, 2)], x=[torch.zeros(0), torch.ones(2, 3)])
    assert mixed.x.shape == (2, 3) and mixed.dense_x().shape == (2, 2, 3)


def _empty_batches():
    return {
        "no graphs": GraphBatch.from_edge_lists([]),
        "one empty graph": GraphBatch.from_edge_lists([(EMPTY, 0)]),
        "two empty graphs": GraphBatch.from_edge_lists([(EMPTY, 0), (EMPTY, 0)]),
    }


@pytest.mark.parametrize("name", list(_empty_batches()))
def test_ops_on_empty_batches(name):
    graph = _empty_batches()[name]
    B = graph.num_graphs
    for F in (2, 0):
        res = wl_order(graph, x=torch.zeros(0, F))
        assert res.order.shape == (B, 1, 0) and res.colours.shape == (0,) and res.num_orders == [1] * B
    for order in (dfs_order, bfs_order):
        assert order(graph).shape == (B, 1, 0)
        assert order(graph, "all").shape == (B, 0, 0)
        assert order(graph, "random", k=2, num_samples=3).tolist() == [[[-1, -1]] * 3] * B
    perms = random_permutations(graph.num_nodes, 2, k=2)
    assert permute_adjacency(graph.dense_adj(), perms).shape == (B, 2, 2, 2, 1)
    assert permute_nodes(torch.zeros(B, 0, 3), perms).shape == (B, 2, 2, 3)
    assert segment_sum(torch.zeros(0, 3), graph.ptr).tolist() == [[0.0] * 3] * B
    x = torch.zeros(0, 3, requires_grad=True)
    out = gin_aggregate(x, graph, 0.1)
    out.sum().backward()
    assert out.shape == (0, 3) and x.grad.shape == (0, 3)
    assert GINConv(torch.nn.Identity())(torch.zeros(0, 3), graph).shape == (0, 3)
    assert graph.select([]).num_graphs == 0


def test_wl_order_with_featureless_x():
    graph = GraphBatch.from_networkx([nx.path_graph(3)])
    torch.testing.assert_close(wl_order(graph, x=torch.zeros(3, 0)).colours, wl_order(graph).colours)
    with pytest.raises(TypeError, match="x must be a tensor"):
        wl_order(graph, x=[[0], [1], [2]])


# ------------------------------------------------------------------ 17: the CSR cache
def test_numpy_edits_need_clear_graph_cache():
    edge_index = torch.tensor([[0, 1], [1, 2]])
    x = torch.eye(3)
    conv = GINConv(torch.nn.Identity())
    before = conv(x, edge_index)
    edge_index.numpy()[1, 1] = 0  # bypasses the version counter: the cache cannot see it
    assert torch.equal(conv(x, edge_index), before)  # documented limitation: stale
    fresh = GINConv(torch.nn.Identity(), cache=False)(x, edge_index)
    assert not torch.equal(fresh, before)
    clear_graph_cache()
    assert torch.equal(conv(x, edge_index), fresh)


def test_ginconv_without_cache_stores_nothing():
    clear_graph_cache()
    assert cache_size() == 0
    edge_index = torch.tensor([[0, 1], [1, 2]])
    GINConv(torch.nn.Identity(), cache=False)(torch.eye(3), edge_index)
    assert cache_size() == 0
    graph_for_edge_index(edge_index, 3)
    assert cache_size() == 1
    clear_graph_cache()
    assert cache_size() == 0
    with pytest.raises(TypeError, match="cache must be a bool, got 'no'"):
        GINConv(torch.nn.Identity(), cache="no")
    with pytest.raises(TypeError, match="eps must be a float"):
        GINConv(torch.nn.Identity(), eps="0.5")


@pytest.mark.parametrize("make", [lambda v: torch.tensor(v, dtype=torch.uint64), lambda v: np.array(v, dtype=np.uint64)])
def test_unsigned_values_beyond_int64_are_reported_as_they_are(make):
    """Issue 24: a uint64 2^63 + 5 was reported as a negative number (it wrapped to int64)."""
    with pytest.raises(ValueError, match=r"num_nodes\[1\] = 9223372036854775813 is beyond int64"):
        random_permutations(make([3, 2**63 + 5]), 1)
    with pytest.raises(ValueError, match=r"edge_index\[1, 0\] = 9223372036854775813 is beyond int64"):
        GraphBatch(make([[0], [2**63 + 5]]), num_nodes=3)
    assert random_permutations(make([3]), 1).shape == (1, 1, 3)  # in range: accepted as before


def test_python_int_sizes_beyond_int64_are_named():
    """Found by the issue-24 campaign: a Python int 2^64 gave torch's 'Overflow when unpacking long long'."""
    ei = torch.tensor([[0, 1], [1, 0]])
    for build, name in ((lambda: GraphBatch(ei, num_nodes=2**64), "num_nodes"),
                        (lambda: GraphBatch.from_edge_lists([(ei, 2**64)]), r"graphs\[0\] num_nodes"),
                        (lambda: GraphBatch(ei, total_nodes=2**63), "total_nodes"),
                        (lambda: GraphBatch(ei, num_nodes=np.uint64(2**63 + 5)), "num_nodes")):
        with pytest.raises(ValueError, match=f"{name} must be <= 9223372036854775807"):
            build()
