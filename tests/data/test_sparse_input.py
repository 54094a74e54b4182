"""PyG's sparse transposed adjacency ``adj_t`` (``T.ToSparseTensor``: stored entry adj_t[i, j] is
the edge j -> i) in edge_index's place: COO and CSR, read with the right orientation."""
import pytest
import torch

from rpfast.data import GraphBatch, edge_index_from_adj_t
from rpfast.nn import GIN, Duvenaud, GINConv

# a directed graph: reading adj_t the wrong way round reverses every edge and changes the result
EDGE_INDEX = torch.tensor([[0, 0, 1, 2, 3, 3], [1, 2, 2, 3, 0, 1]])
N = 4


def _adj_t(layout, edge_index=EDGE_INDEX, n=N, values=None):
    """adj_t as PyG builds it: T.ToSparseTensor when PyG is installed, else by hand as PyG documents
    (entries at (target, source), sorted by target then source, edge_attr in that order)."""
    order = torch.argsort(edge_index[1] * n + edge_index[0])
    try:
        import torch_geometric.transforms as T
        from torch_geometric.data import Data
    except ImportError:
        pass
    else:
        if values is None:
            data = Data(edge_index=edge_index, num_nodes=n)
            return T.ToSparseTensor(layout=layout)(data).adj_t, order
    flipped = edge_index.flip(0)[:, order]
    weights = torch.ones(flipped.shape[1]) if values is None else values[order]
    adj_t = torch.sparse_coo_tensor(flipped, weights, (n, n)).coalesce()
    return (adj_t.to_sparse_csr() if layout == torch.sparse_csr else adj_t), order


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_adj_t_reads_as_the_edge_index_it_came_from(layout):
    adj_t, order = _adj_t(layout)
    assert torch.equal(edge_index_from_adj_t(adj_t), EDGE_INDEX[:, order])


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_ginconv_on_adj_t_equals_edge_index_and_pyg(layout, cache):
    adj_t, _ = _adj_t(layout)
    x = torch.randn(N, 3)
    conv = GINConv(torch.nn.Linear(3, 2), eps=0.1, cache=cache)
    expected = conv(x, EDGE_INDEX)
    torch.testing.assert_close(conv(x, adj_t), expected)
    assert not torch.allclose(conv(x, EDGE_INDEX.flip(0)), expected)  # the orientation matters here
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    theirs = pyg_nn.GINConv(torch.nn.Linear(3, 2), eps=0.1)
    theirs.nn.load_state_dict(conv.nn.state_dict())
    torch.testing.assert_close(theirs(x, adj_t), expected)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_pyg_data_and_batch_holding_adj_t(layout):
    pyg = pytest.importorskip("torch_geometric")
    import torch_geometric.transforms as T

    x = torch.randn(N, 3)
    edge_attr = torch.randn(EDGE_INDEX.shape[1], 2)
    data = pyg.data.Data(x=x, edge_index=EDGE_INDEX, edge_attr=edge_attr)
    sparse = T.ToSparseTensor(layout=layout)(data.clone())
    assert sparse.edge_index is None and sparse.adj_t.layout == layout
    conv = GINConv(torch.nn.Identity())
    torch.testing.assert_close(conv(sparse), conv(data))
    torch.testing.assert_close(conv(x, sparse), conv(data))
    gin = GIN(3, 8, 2, 2, edge_dim=2).eval()  # edge_attr rows follow adj_t's entries
    torch.testing.assert_close(gin(sparse), gin(data))
    torch.testing.assert_close(gin(sparse.x, sparse.adj_t, edge_attr=sparse.edge_attr), gin(data))
    duvenaud = Duvenaud(3, 2).eval()
    torch.testing.assert_close(duvenaud(sparse), duvenaud(data))
    batch = pyg.data.Batch.from_data_list([sparse, sparse])
    expected = conv(pyg.data.Batch.from_data_list([data, data]))
    torch.testing.assert_close(conv(batch), expected)
    graph = GraphBatch.from_pyg(batch)
    assert graph.num_graphs == 2 and "adj_t" not in graph.extras


def test_the_hint_for_graph_batch_is_right_for_coo_and_csr():
    for layout in (torch.sparse_coo, torch.sparse_csr):
        adj_t, order = _adj_t(layout)
        with pytest.raises(TypeError, match=r"edge_index_from_adj_t\(adj_t\)"):
            GraphBatch(adj_t)
        graph = GraphBatch(edge_index_from_adj_t(adj_t), num_nodes=N)
        assert torch.equal(graph.edge_index, EDGE_INDEX[:, order])


def test_repeated_coo_entries_are_repeated_edges():
    adj_t = torch.sparse_coo_tensor(torch.tensor([[1, 1], [0, 0]]), torch.ones(2), (2, 2))  # uncoalesced
    out = GINConv(torch.nn.Identity())(torch.tensor([[1.0], [10.0]]), adj_t)
    assert out.tolist() == [[1.0], [12.0]]  # node 1 receives node 0's message twice, as PyG sums them


def test_torch_sparse_tensor_duck_type():
    class SparseTensor:  # the torch_sparse interface rpfast reads
        def __init__(self, row, col, value, sizes):
            self._coo, self._sizes = (row, col, value), sizes

        def coo(self):
            return self._coo

        def sparse_sizes(self):
            return self._sizes

    flipped = EDGE_INDEX.flip(0)
    adj_t = SparseTensor(flipped[0], flipped[1], None, (N, N))
    x = torch.randn(N, 3)
    conv = GINConv(torch.nn.Identity())
    torch.testing.assert_close(conv(x, adj_t), conv(x, EDGE_INDEX))


@pytest.mark.parametrize("make, error, message", [
    (lambda: _adj_t(torch.sparse_csr, values=torch.rand(6) + 2)[0], ValueError, "edge weights"),
    (lambda: torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.ones(1), (2, 3)), ValueError, "square"),
    (lambda: torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.ones(1, 2), (4, 4, 2)), ValueError,
     "dense dimension"),
    (lambda: torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.ones(1), (5, 5)), ValueError,
     "adj_t is \\[5, 5\\] but x has 4 nodes"),
])
def test_unusable_adj_t_is_refused_clearly(make, error, message):
    for conv in (GINConv(torch.nn.Identity()), GINConv(torch.nn.Identity(), cache=False)):
        with pytest.raises(error, match=message):
            conv(torch.ones(N, 1), make())
    with pytest.raises(error, match=message):
        GIN(1, 4, 1, 2)(torch.ones(N, 1), make())


def test_edge_index_from_adj_t_validates_its_input():
    with pytest.raises(TypeError, match="adj_t must be a torch.sparse COO/CSR tensor"):
        edge_index_from_adj_t(EDGE_INDEX)
    with pytest.raises(TypeError, match="got list"):
        edge_index_from_adj_t([[0, 1]])
