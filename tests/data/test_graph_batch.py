"""GraphBatch: construction paths, cached CSR/dense views, validation."""
import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rpfast.data import GraphBatch


@st.composite
def edge_lists(draw):
    """A list of (edge_index [2, E] local, num_nodes) with self-loops and isolated nodes allowed."""
    graphs = []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 6))
        pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12)) if n else []
        graphs.append((torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t(), n))
    return graphs


@settings(max_examples=80, deadline=None)
@given(edge_lists())
def test_views_match_per_graph_construction(graphs):
    batch = GraphBatch.from_edge_lists(graphs)
    assert batch.num_graphs == len(graphs)
    assert batch.num_nodes.tolist() == [n for _, n in graphs]
    n_max = max((n for _, n in graphs), default=0)
    adj = batch.dense_adj()
    assert adj.shape == (len(graphs), n_max, n_max, 1)
    for b, (ei, n) in enumerate(graphs):
        expected = torch.zeros(n_max, n_max)
        for u, v in ei.t().tolist():
            expected[u, v] += 1
        assert torch.equal(adj[b, :, :, 0], expected)
        assert batch.node_mask[b].tolist() == [i < n for i in range(n_max)]
    # CSR rows hold exactly the out-neighbours, sorted; the transpose the in-neighbours.
    ei = batch.edge_index
    for u in range(batch.total_nodes):
        out_nb = sorted(ei[1, ei[0] == u].tolist())
        in_nb = sorted(ei[0, ei[1] == u].tolist())
        assert batch.col[batch.rowptr[u]:batch.rowptr[u + 1]].tolist() == out_nb
        assert batch.t_col[batch.t_rowptr[u]:batch.t_rowptr[u + 1]].tolist() == in_nb
    assert torch.equal(ei[1, batch.csr_edge_order], batch.col)


def test_pyg_layout_with_features_and_matches_to_dense_adj():
    pyg = pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data
    from torch_geometric.utils import to_dense_adj, to_dense_batch

    gen = torch.Generator().manual_seed(0)
    datas = []
    for n in (3, 5, 1, 4):
        ei = torch.randint(0, n, (2, 2 * n), generator=gen)
        datas.append(Data(x=torch.randn(n, 3, generator=gen), edge_index=ei, edge_attr=torch.randn(2 * n, 2, generator=gen)))
    pyg_batch = Batch.from_data_list(datas)
    batch = GraphBatch.from_pyg(pyg_batch)
    dense = batch.dense_adj()
    torch.testing.assert_close(dense[..., 0], to_dense_adj(pyg_batch.edge_index, pyg_batch.batch))
    torch.testing.assert_close(dense[..., 1:], to_dense_adj(pyg_batch.edge_index, pyg_batch.batch, pyg_batch.edge_attr))
    x_dense, mask = to_dense_batch(pyg_batch.x, pyg_batch.batch)
    torch.testing.assert_close(batch.dense_x(), x_dense)
    assert torch.equal(batch.node_mask, mask)
    same = GraphBatch(pyg_batch.edge_index, x=pyg_batch.x, edge_attr=pyg_batch.edge_attr, batch=pyg_batch.batch)
    assert torch.equal(same.ptr, pyg_batch.ptr)
    assert pyg.__name__ == "torch_geometric"


def test_from_networkx_undirected_gets_both_directions():
    g1 = nx.path_graph(3)
    g2 = nx.cycle_graph(4)
    nx.set_edge_attributes(g2, 2.0, "w")
    nx.set_edge_attributes(g1, 1.0, "w")
    nx.set_node_attributes(g1, 1.0, "f")
    nx.set_node_attributes(g2, 3.0, "f")
    batch = GraphBatch.from_networkx([g1, g2], node_attr="f", edge_attr="w")
    assert batch.num_nodes.tolist() == [3, 4] and batch.num_edges == 2 * (2 + 4)
    adj = batch.dense_adj()
    assert torch.equal(adj[0, :3, :3, 0], torch.from_numpy(nx.to_numpy_array(g1)).float())
    assert torch.equal(adj[1, :, :, 1], 2 * torch.from_numpy(nx.to_numpy_array(g2)).float())
    assert batch.dense_x()[1, :, 0].tolist() == [3.0] * 4


def test_single_graph_and_empty_graphs():
    g = GraphBatch(torch.tensor([[0, 1], [1, 0]]), num_nodes=4)
    assert g.num_graphs == 1 and g.n_max == 4 and g.num_nodes.tolist() == [4]
    empty = GraphBatch(torch.zeros(2, 0, dtype=torch.int64), batch=torch.tensor([0, 0, 2]), num_graphs=4)
    assert empty.num_nodes.tolist() == [2, 0, 1, 0]
    assert empty.dense_adj().shape == (4, 2, 2, 1)
    nothing = GraphBatch.from_edge_lists([])
    assert nothing.num_graphs == 0 and nothing.dense_adj().shape == (0, 0, 0, 1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"edge_index": torch.tensor([[0, 5], [1, 0]]), "num_nodes": 3}, IndexError, r"edge_index\[0, 1\] = 5"),
        ({"edge_index": torch.tensor([[0, -1], [1, 0]]), "num_nodes": 3}, IndexError, "= -1 is out of range"),
        ({"edge_index": torch.tensor([[0.0, 1.0], [1.0, 0.0]])}, TypeError, "edge_index must hold integers"),
        ({"edge_index": torch.tensor([0, 1, 2])}, ValueError, r"shape \[2, E\]"),
        ({"edge_index": torch.tensor([[0], [2]]), "batch": torch.tensor([0, 0, 1])}, ValueError, "connects graph 0 to graph 1"),
        ({"edge_index": torch.tensor([[0], [1]]), "batch": torch.tensor([1, 0, 1])}, ValueError, "non-decreasing"),
        ({"edge_index": torch.tensor([[0], [1]]), "x": torch.zeros(3, 2), "batch": torch.tensor([0, 0])}, ValueError, "x has 3 rows"),
        ({"edge_index": torch.tensor([[0], [1]]), "ptr": torch.tensor([0, 3, 2])}, ValueError, "negative"),
        ({"edge_index": torch.tensor([[0], [1]]), "num_nodes": 2, "edge_attr": torch.zeros(3, 1)}, ValueError, r"edge_attr must have shape \[E=1"),
        ({"edge_index": torch.tensor([[0], [1]]), "batch": torch.tensor([0, 0]), "ptr": torch.tensor([0, 2])}, ValueError, "either batch or ptr"),
    ],
)
def test_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        GraphBatch(**kwargs)


def test_from_edge_lists_rejects_out_of_range_local_index():
    with pytest.raises(IndexError, match=r"graphs\[1\] edge_index holds 0..3, outside 0..2"):
        GraphBatch.from_edge_lists([(torch.tensor([[0], [1]]), 2), (torch.tensor([[0], [3]]), 3)])
    with pytest.raises(ValueError, match=r"graphs\[0\] num_nodes must be >= 0, got -1"):
        GraphBatch.from_edge_lists([(torch.zeros(2, 0, dtype=torch.int64), -1)])


def test_select_keeps_graphs_features_and_order():
    graphs = [(torch.tensor([[0, 1], [1, 0]]), 2), (torch.tensor([[0, 1, 2], [1, 2, 0]]), 3), (torch.zeros(2, 0, dtype=torch.int64), 1)]
    x = [torch.full((n, 1), float(i)) for i, (_, n) in enumerate(graphs)]
    ea = [torch.full((ei.shape[1], 1), float(i)) for i, (ei, _) in enumerate(graphs)]
    batch = GraphBatch.from_edge_lists(graphs, x=x, edge_attr=ea)
    picked = batch.select([2, 1])
    assert picked.num_nodes.tolist() == [1, 3]
    assert torch.equal(picked.dense_adj()[1], batch.dense_adj()[1])
    assert picked.x[:, 0].tolist() == [2.0, 1.0, 1.0, 1.0]
    assert picked.edge_attr[:, 0].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(IndexError, match="graph indices"):
        batch.select([3])


def test_num_nodes_means_vertices_per_graph():
    edges = torch.tensor([[0, 1, 3], [1, 0, 4]])
    by_sizes = GraphBatch(edges, num_nodes=[2, 0, 3])
    assert by_sizes.num_nodes.tolist() == [2, 0, 3] and by_sizes.ptr.tolist() == [0, 2, 2, 5]
    same = GraphBatch(edges, ptr=torch.tensor([0, 2, 2, 5]), num_nodes=torch.tensor([2, 0, 3]))
    assert torch.equal(same.ptr, by_sizes.ptr)
    with_batch = GraphBatch(edges, batch=torch.tensor([0, 0, 1, 1, 1]), num_nodes=[2, 3, 0])
    assert with_batch.num_nodes.tolist() == [2, 3, 0]  # trailing empty graph kept
    assert GraphBatch(edges, num_nodes=6).num_nodes.tolist() == [6]  # an int: one graph
    assert GraphBatch(edges, batch=torch.tensor([0, 0, 1, 1, 1]), total_nodes=5).num_graphs == 2
    assert "total_nodes=5" in repr(by_sizes)


def test_num_nodes_disagreements_are_explained():
    edges = torch.tensor([[0], [1]])
    with pytest.raises(ValueError, match=r"num_nodes = 5 is one graph's size, but batch describes 2 graphs; "
                                         r"pass num_nodes as the \[2\] graph sizes, or total_nodes=5"):
        GraphBatch(edges, batch=torch.tensor([0, 0, 1, 1, 1]), num_nodes=5)
    with pytest.raises(ValueError, match=r"num_nodes = \[2, 2\] disagrees with the graph sizes that ptr describes"):
        GraphBatch(edges, ptr=torch.tensor([0, 3, 4]), num_nodes=[2, 2])
    with pytest.raises(ValueError, match="give num_nodes .* or total_nodes, not both"):
        GraphBatch(edges, num_nodes=2, total_nodes=2)
    with pytest.raises(ValueError, match=r"num_nodes\[1\] = -1 is negative"):
        GraphBatch(edges, num_nodes=[2, -1])


@pytest.mark.parametrize("num_nodes,num_edges,seed", [(1, 0, 0), (7, 40, 1), (50, 3000, 2), (300, 900, 3)])
def test_csr_equals_stable_sort_by_row_then_column(num_nodes, num_edges, seed):
    """The counting-sort CSR equals a stable argsort of row * N + col, with multi-edges (kept in
    input order), rows longer than the insertion-sort cut-off and empty rows."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    if num_edges:
        edge_index[0, : num_edges // 3] = 0  # one long row
    graph = GraphBatch(edge_index, total_nodes=num_nodes)
    for (rows, cols), (rowptr, col, order) in (
            (edge_index, (graph.rowptr, graph.col, graph.csr_edge_order)),
            (edge_index.flip(0), (graph.t_rowptr, graph.t_col, graph.t_edge_order))):
        expected = torch.argsort(rows * num_nodes + cols, stable=True)
        assert torch.equal(order, expected)
        assert torch.equal(col, cols[expected])
        assert torch.equal(rowptr, torch.cat([torch.zeros(1, dtype=torch.int64),
                                              torch.bincount(rows, minlength=num_nodes).cumsum(0)]))


def test_build_csr_kernel_rejects_out_of_range_edges():
    from rpfast import _backend

    rows, cols = torch.tensor([0, 3]), torch.tensor([1, 0])
    with pytest.raises(IndexError, match=r"edge 1 \(3 -> 0\) is outside \[0, 3\)"):
        _backend.call("build_csr", rows, cols, 3, torch.empty(4, dtype=torch.int64), torch.empty(2, dtype=torch.int64),
                      torch.empty(2, dtype=torch.int64))


def test_csr_without_the_compiled_builder_is_the_same(monkeypatch):
    from rpfast.data import batch as batch_module

    edge_index = torch.randint(0, 40, (2, 500), generator=torch.Generator().manual_seed(4))
    compiled = GraphBatch(edge_index, total_nodes=40)
    monkeypatch.setattr(batch_module, "_kernels_for", lambda t: False)
    fallback = GraphBatch(edge_index, total_nodes=40)
    for name in ("rowptr", "col", "csr_edge_order", "t_rowptr", "t_col", "t_edge_order"):
        assert torch.equal(getattr(compiled, name), getattr(fallback, name)), name


def _random_batch(seed: int) -> GraphBatch:
    """Graphs of 0-6 nodes with multi-edges and self-loops, their edges listed in random order
    (not grouped by graph), with node and edge features."""
    gen = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 7, (int(torch.randint(1, 6, (1,), generator=gen)),), generator=gen)
    ptr = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    edges = []
    for b, n in enumerate(sizes.tolist()):
        if n:
            count = int(torch.randint(0, 3 * n, (1,), generator=gen))
            edges.append(torch.randint(0, n, (2, count), generator=gen) + ptr[b])
    edge_index = torch.cat(edges, dim=1) if edges else torch.zeros(2, 0, dtype=torch.int64)
    edge_index = edge_index[:, torch.randperm(edge_index.shape[1], generator=gen)]
    N, E = int(ptr[-1]), edge_index.shape[1]
    return GraphBatch(edge_index, x=torch.randn(N, 2, generator=gen), edge_attr=torch.randn(E, 3, generator=gen),
                      ptr=ptr)


@pytest.mark.parametrize("seed", range(40))
def test_select_slices_the_csr_views_exactly_as_building_them(seed, monkeypatch):
    """select() copies the selected graphs' CSR slices (C++); every view must equal both the
    torch path and the views a freshly built batch computes."""
    from rpfast.data import batch as batch_module

    batch = _random_batch(seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    picks = torch.randint(0, batch.num_graphs, (int(torch.randint(0, 7, (1,), generator=gen)),), generator=gen)
    fast = batch.select(picks)
    monkeypatch.setattr(batch_module, "_kernels_for", lambda t: False)
    slow = batch.select(picks)
    fresh = GraphBatch(fast.edge_index, ptr=fast.ptr)
    for name in ("ptr", "edge_index", "x", "edge_attr"):
        assert torch.equal(getattr(fast, name), getattr(slow, name)), name
    for name in ("rowptr", "col", "csr_edge_order", "t_rowptr", "t_col", "t_edge_order", "batch"):
        assert torch.equal(getattr(fast, name), getattr(fresh, name)), name
    assert fast.total_nodes == slow.total_nodes and fast.num_graphs == len(picks)


def test_select_refuses_graph_indices_out_of_range():
    batch = _random_batch(0)
    with pytest.raises(IndexError, match=rf"graph indices must lie in \[0, {batch.num_graphs}\)"):
        batch.select([0, batch.num_graphs])
    with pytest.raises(IndexError, match="graph indices"):
        batch.select([-1])


def test_batches_and_the_edge_list_reader_under_a_float64_default(tmp_path):
    """Under torch.set_default_dtype(torch.float64) nothing mixes dtypes: index tensors stay int64,
    given float features keep their dtype, and what GraphBatch makes itself (integer features turned
    into floats, the edge indicator of a featureless batch) takes the default dtype, as documented."""
    from rpfast.data import read_edge_list

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        path = tmp_path / "graph.txt"
        path.write_text("0 1\n1 2\n5\n")
        graph, labels = read_edge_list(path)
        assert graph.edge_index.dtype == torch.int64 and labels.dtype.name == "int64"
        assert graph.dense_adj().dtype == torch.float64 and graph.rowptr.dtype == torch.int64
        pairs = [(torch.tensor([[0, 1], [1, 0]], dtype=torch.int64), 2),
                 (torch.zeros(2, 0, dtype=torch.int64), 1)]
        batch = GraphBatch.from_edge_lists(pairs, x=[torch.ones(2, 3, dtype=torch.float32),
                                                     torch.ones(1, 3, dtype=torch.float32)],
                                           edge_attr=[torch.tensor([[1], [2]], dtype=torch.int64),
                                                      torch.zeros(0, 1, dtype=torch.int64)])
        assert batch.x.dtype == batch.dense_x().dtype == torch.float32
        assert batch.edge_attr.dtype == batch.dense_adj().dtype == torch.float64
        assert batch.batch.dtype == batch.local_index.dtype == batch.ptr.dtype == torch.int64
        picked = batch.select([1, 0])
        assert picked.x.dtype == torch.float32 and picked.num_nodes.tolist() == [1, 2]
        assert GraphBatch.from_edge_lists([]).num_graphs == 0
    finally:
        torch.set_default_dtype(old)


def test_to_converts_features_and_moves_every_cached_view():
    batch = _random_batch(3)
    batch.extras["y"] = torch.tensor([1] * batch.num_graphs)
    batch.dense_adj()  # a cached dense view converts too
    double = batch.to(torch.float64)
    assert double.x.dtype == double.edge_attr.dtype == double.dense_adj().dtype == torch.float64
    assert double.dense_x().dtype == torch.float64 and double.rowptr.dtype == torch.int64
    fresh = GraphBatch(batch.edge_index, x=batch.x.double(), edge_attr=batch.edge_attr.double(), ptr=batch.ptr)
    for name in ("rowptr", "col", "csr_edge_order", "t_rowptr", "t_col", "t_edge_order", "batch", "node_mask"):
        assert torch.equal(getattr(double, name), getattr(fresh, name)), name
    torch.testing.assert_close(double.dense_adj(), fresh.dense_adj())  # summed in float32 before: last bits
    assert torch.equal(double.y, batch.y)
    assert batch.x.dtype == torch.float32  # the original is unchanged
    plain = GraphBatch(torch.tensor([[0, 1], [1, 0]]), num_nodes=3).to(dtype=torch.float64)
    assert plain.dense_adj().dtype == torch.float64  # no edge features: the adjacency follows dtype


def test_to_meta_keeps_shapes_and_structure_without_data():
    batch = _random_batch(5)
    meta = batch.to("meta")
    assert meta.x.device.type == meta.rowptr.device.type == meta.batch.device.type == "meta"
    assert (meta.num_graphs, meta.total_nodes, meta.num_edges, meta.n_max) == \
        (batch.num_graphs, batch.total_nodes, batch.num_edges, batch.n_max)
    assert meta.dense_adj().shape == batch.dense_adj().shape and meta.dense_x().shape == batch.dense_x().shape
    assert meta.undirected_csr()[0].shape == batch.undirected_csr()[0].shape


def test_host_views_stay_on_the_cpu_when_the_batch_moves():
    batch = _random_batch(5)
    batch.extras["element"] = torch.arange(batch.total_nodes) % 3
    meta = batch.to("meta")
    assert torch.equal(meta.host_ptr, batch.ptr) and meta.host_ptr.is_cpu
    assert torch.equal(meta.host_in_degree, batch.t_rowptr.diff()) and meta.host_in_degree.is_cpu
    assert torch.equal(meta.host_extra("element"), batch.extras["element"])
    assert meta.host_extra("y") is None and meta.extras["element"].device.type == "meta"
    assert batch.host_ptr is not batch.ptr  # host data is its own tensor, apart from the step's


def test_host_is_the_cpu_batch_a_batch_was_moved_from():
    batch = _random_batch(3)
    assert batch.host() is batch
    meta = batch.to("meta")
    assert meta.host() is batch and meta.to("meta").host() is batch  # kept by reference, through moves
    double = batch.to(torch.float64)
    assert double.host() is double and double.to("meta").host() is double  # the batch moved, not its source
    record = meta.__dict__["_host_batch"]
    meta.x = torch.zeros(meta.total_nodes, 5, device="meta")  # replaced: the source no longer stands for it
    assert not record.current(meta)
    with pytest.raises(NotImplementedError):  # so the next host() copies the batch (here: meta has no data)
        meta.host()


def test_host_extra_follows_the_extra():
    batch = _random_batch(3)
    batch.extras["element"] = torch.zeros(batch.total_nodes, dtype=torch.int64)
    assert batch.host_extra("element").sum() == 0
    batch.extras["element"] = torch.ones(batch.total_nodes, dtype=torch.int64)  # replaced
    assert batch.host_extra("element").sum() == batch.total_nodes
    batch.extras["element"].add_(1)  # changed in place
    assert batch.host_extra("element").sum() == 2 * batch.total_nodes
    assert batch.host_extra("element") is not batch.extras["element"]  # the host copy is apart


@pytest.mark.parametrize("copies", [1, 3])
def test_replicate_is_the_batch_of_the_copies(copies):
    """replicate(P) has the structure of a batch built from P copies of the edges, and its host
    views, without building anything again."""
    batch = _random_batch(4)
    N, E, B = batch.total_nodes, batch.num_edges, batch.num_graphs
    replicas = batch.replicate(copies)
    shift = (torch.arange(copies) * N).repeat_interleave(E)
    fresh = GraphBatch(batch.edge_index.repeat(1, copies) + shift, ptr=torch.cat(
        [batch.ptr[:-1] + p * N for p in range(copies)] + [torch.tensor([copies * N])]))
    assert (replicas.num_graphs, replicas.total_nodes, replicas.num_edges) == (copies * B, copies * N, copies * E)
    assert torch.equal(replicas.edge_index, fresh.edge_index) and torch.equal(replicas.ptr, fresh.ptr)
    for name in ("rowptr", "col", "csr_edge_order", "t_rowptr", "t_col", "t_edge_order", "batch", "host_ptr",
                 "host_in_degree"):
        assert torch.equal(getattr(replicas, name), getattr(fresh, name)), name
    assert replicas.n_max == batch.n_max
    with pytest.raises(ValueError, match="copies"):
        batch.replicate(0)


def test_to_rejects_what_is_not_a_device_or_float_dtype():
    batch = _random_batch(1)
    with pytest.raises(TypeError, match="floating-point torch.dtype"):
        batch.to(dtype=torch.int64)
    with pytest.raises(ValueError, match="device must name a torch device"):
        batch.to("no-such-device")
