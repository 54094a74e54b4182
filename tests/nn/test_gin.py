"""gin_aggregate and GINConv against PyTorch Geometric and index_add_ references."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.assertions import assert_backward_matches, assert_thread_invariant
from rpfast.data import GraphBatch
from rpfast.data.cache import cache_size, graph_for_edge_index
from rpfast.nn import GINConv
from rpfast.ops import gin_aggregate


def reference(x, edge_index, eps):
    """(1 + eps) x_i + sum_{j -> i} x_j with index_add_ over the edge list."""
    src, dst = edge_index
    return (1 + eps) * x + torch.zeros_like(x).index_add_(x.dim() - 2, dst, x.index_select(x.dim() - 2, src))


@st.composite
def graphs(draw):
    n = draw(st.integers(0, 12))
    pairs = draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))), max_size=40)) if n else []
    return torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t().contiguous(), n


@settings(max_examples=100, deadline=None)
@given(graphs(), st.integers(1, 3), st.integers(1, 9), st.floats(-1, 2), st.booleans())
def test_matches_reference_values_and_gradients(graph, R, F, eps, replicas):
    edge_index, n = graph
    batch = GraphBatch(edge_index, num_nodes=n)
    shape = (R, n, F) if replicas else (n, F)
    x1 = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    e1 = torch.tensor(eps, dtype=torch.float64, requires_grad=True)
    e2 = e1.detach().clone().requires_grad_()
    out = gin_aggregate(x1, batch, e1)
    ref = reference(x2, edge_index, e2)
    torch.testing.assert_close(out, ref)
    g = torch.randn(shape, dtype=torch.float64)
    assert_backward_matches(out, ref, g, [(x1, x2), (e1, e2)])


def test_gradcheck():
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 0]])
    batch = GraphBatch(edge_index, num_nodes=5)
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    eps = torch.tensor([0.25], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, e: gin_aggregate(a, batch, e), (x, eps))


def test_float32_and_python_eps():
    edge_index = torch.tensor([[0, 1], [1, 2]])
    x = torch.randn(3, 4)
    out = gin_aggregate(x, GraphBatch(edge_index, num_nodes=3), 0.5)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, reference(x, edge_index, 0.5))


@pytest.mark.kernels
def test_bitwise_identical_across_thread_counts():
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 3000, (2, 20000), generator=gen)
    batch = GraphBatch(edge_index, num_nodes=3000)
    x = torch.randn(3000, 32, generator=gen)
    g = torch.randn(3000, 32, generator=gen)

    def run():
        xt = x.clone().requires_grad_()
        eps = torch.tensor(0.1, requires_grad=True)
        out = gin_aggregate(xt, batch, eps)
        (out * g).sum().backward()
        return out, xt.grad, eps.grad

    assert_thread_invariant(run)


def test_rejects_bad_input():
    batch = GraphBatch(torch.tensor([[0], [1]]), num_nodes=3)
    with pytest.raises(ValueError, match="x has 4 nodes"):
        gin_aggregate(torch.zeros(4, 2), batch)
    with pytest.raises(TypeError, match="float32 or float64"):
        gin_aggregate(torch.zeros(3, 2, dtype=torch.int64), batch)
    with pytest.raises(ValueError, match=r"x must have shape \[N, F\]"):
        gin_aggregate(torch.zeros(3), batch)
    with pytest.raises(TypeError, match="graph must be an rpfast.data.GraphBatch"):
        gin_aggregate(torch.zeros(3, 2), torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match="eps must be a float or a one-element"):
        gin_aggregate(torch.zeros(3, 2), batch, torch.zeros(2))
    with pytest.raises(TypeError, match="eps must be a float or a tensor"):
        gin_aggregate(torch.zeros(3, 2), batch, "0.1")


def test_kernel_validates_csr():
    """The compiled kernel checks the CSR itself, so no Python path can read out of bounds."""
    from rpfast import _backend

    x, out, eps = torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), torch.zeros(1)
    with pytest.raises(IndexError, match=r"col\[0\] = 7"):
        _backend.call("gin_aggregate", x, torch.tensor([0, 1, 1, 1]), torch.tensor([7]), eps, out)
    with pytest.raises(ValueError, match="rowptr decreases"):
        _backend.call("gin_aggregate", x, torch.tensor([0, 1, 0, 1]), torch.tensor([0]), eps, out)
    with pytest.raises(ValueError, match="eps: expected one element"):
        _backend.call("gin_aggregate", x, torch.tensor([0, 1, 1, 1]), torch.tensor([0]), torch.zeros(2), out)
    with pytest.raises(TypeError, match="eps: expected dtype float32"):
        _backend.call("gin_aggregate", x, torch.tensor([0, 1, 1, 1]), torch.tensor([0]), eps.double(), out)


def _mlp():
    """Children to reset in order, a nested module without reset_parameters, and parameter-free layers."""
    inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), inner, torch.nn.Linear(8, 4))


def _reset_as_pyg_documents(module):
    """torch_geometric.nn.inits.reset: the module's reset_parameters(), else each child's, in order."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    else:
        for child in module.children():
            _reset_as_pyg_documents(child)


@pytest.mark.parametrize("train_eps", [False, True])
def test_ginconv_initialises_nn_as_pyg_from_one_seed(train_eps):
    torch.manual_seed(3)
    ours = GINConv(_mlp(), eps=0.25, train_eps=train_eps)
    after_ours = torch.rand(1)
    try:
        pyg_nn = __import__("torch_geometric.nn", fromlist=["GINConv"])
    except ImportError:  # without PyG: the calls PyG's reset makes, in its order
        torch.manual_seed(3)
        theirs = torch.nn.Module()
        theirs.nn = _mlp()
        _reset_as_pyg_documents(theirs.nn)
        theirs.eps = torch.tensor([0.25])
    else:
        torch.manual_seed(3)
        theirs = pyg_nn.GINConv(_mlp(), eps=0.25, train_eps=train_eps)
    assert torch.equal(after_ours, torch.rand(1))  # the same random numbers were drawn
    for (name, a), (_, b) in zip(ours.nn.state_dict().items(), theirs.nn.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(ours.eps, theirs.eps.detach())
    with torch.no_grad():
        ours.eps.fill_(9.0)
    torch.manual_seed(4)
    ours.reset_parameters()
    torch.manual_seed(4)
    _reset_as_pyg_documents(theirs.nn)
    assert ours.eps.item() == 0.25
    assert all(torch.equal(a, b) for a, b in zip(ours.nn.state_dict().values(), theirs.nn.state_dict().values()))


@pytest.mark.parametrize("train_eps", [False, True])
def test_ginconv_equals_pyg(train_eps):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    ours = GINConv(mlp, eps=0.3, train_eps=train_eps)
    theirs = pyg_nn.GINConv(mlp, eps=0.3, train_eps=train_eps)
    edge_index = torch.randint(0, 30, (2, 120))
    x1 = torch.randn(30, 6, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    out1, out2 = ours(x1, edge_index), theirs(x2, edge_index)
    torch.testing.assert_close(out1, out2, rtol=1e-5, atol=1e-5)
    out1.square().sum().backward()
    out2.square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-5, atol=1e-5)
    if train_eps:
        torch.testing.assert_close(ours.eps.grad, theirs.eps.grad, rtol=1e-4, atol=1e-5)
    # GraphBatch input gives the same result.
    torch.testing.assert_close(ours(x1, GraphBatch(edge_index, num_nodes=30)), out1)


def test_edge_index_converted_once_per_tensor():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    first = graph_for_edge_index(edge_index, 3)
    assert graph_for_edge_index(edge_index, 3) is first
    assert graph_for_edge_index(edge_index.clone(), 3) is not first
    edge_index[0, 0] = 2  # in-place change invalidates the entry
    assert graph_for_edge_index(edge_index, 3) is not first
    size = cache_size()
    del edge_index
    assert cache_size() == size - 1


def test_ginconv_rejects_pyg_options_it_does_not_implement():
    mlp = torch.nn.Linear(2, 2)
    GINConv(mlp, aggr="add")  # PyG's default: accepted
    with pytest.raises(ValueError, match="does not support aggr='mean'"):
        GINConv(mlp, aggr="mean")
    with pytest.raises(ValueError, match="does not support node_dim=0"):
        GINConv(mlp, node_dim=0)


@pytest.mark.parametrize("shape", [(7, 3), (2, 7, 3), (2, 7, 1100), (40, 64)])
def test_adjoint_kernel_fuses_the_eps_gradient(shape):
    """gin_aggregate_adjoint = the aggregation over the outgoing CSR plus sum(g * z), in one
    pass, for [N, F] and [R, N, F], with chunks of one row (F > 1024) and of many; the same bits
    with one thread and with two."""
    from rpfast import _backend

    gen = torch.Generator().manual_seed(len(shape) + shape[-1])
    N = shape[-2]
    edge_index = torch.randint(0, N, (2, 3 * N), generator=gen)
    batch = GraphBatch(edge_index, num_nodes=N)
    g, z = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    eps = torch.tensor([0.25])

    def run():
        grad_z, total = torch.empty_like(g), torch.empty((), dtype=torch.float64)
        _backend.call("gin_aggregate_adjoint", g, batch.rowptr, batch.col, eps, z, grad_z, total)
        return grad_z, total

    grad_z, total = assert_thread_invariant(run)
    expected = torch.empty_like(g)
    _backend.call("gin_aggregate", g, batch.rowptr, batch.col, eps, expected)
    assert torch.equal(grad_z, expected)
    # chunks of ~1024 products are summed in float32 (in SIMD lanes or one by one, by build), so
    # the error scales with the magnitudes summed; a lost or doubled chunk would be off by ~10
    terms = g.double() * z.double()
    assert abs(total.item() - terms.sum().item()) <= 1e-6 * terms.abs().sum().item()
    with pytest.raises(ValueError, match="z: dimension"):
        _backend.call("gin_aggregate_adjoint", g, batch.rowptr, batch.col, eps, z[..., :1].contiguous(), grad_z,
                      total)
    with pytest.raises(ValueError, match="grad_eps: expected one element"):
        _backend.call("gin_aggregate_adjoint", g, batch.rowptr, batch.col, eps, z, grad_z, torch.empty(2))


def test_one_element_eps_keeps_its_shape():
    """A [1] eps (GINConv's parameter) is used as it is and gets a [1] gradient."""
    batch = GraphBatch(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 2, requires_grad=True)
    eps = torch.tensor([0.5], requires_grad=True)
    gin_aggregate(x, batch, eps).sum().backward()
    assert eps.grad.shape == (1,)
    torch.testing.assert_close(eps.grad, x.detach().sum().reshape(1))


def test_a_used_batch_pickles_and_copies_with_its_views():
    """A batch whose CSR a kernel has read pickles and copies; the copy aggregates the same."""
    import copy
    import pickle

    batch = GraphBatch(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 2)
    expected = gin_aggregate(x, batch, 0.5)
    for clone in (pickle.loads(pickle.dumps(batch)), copy.deepcopy(batch), copy.copy(batch)):
        torch.testing.assert_close(gin_aggregate(x, clone, 0.5), expected)
