"""neighbour_max and graph_max (Duvenaud's max pools) against torch's scatter_reduce("amax")."""
import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.ops import graph_max, neighbour_max
from tests.helpers.assertions import assert_thread_invariant


def _reference(x, graph):
    source, target = graph.edge_index
    return x.scatter_reduce(0, target.unsqueeze(1).expand(-1, x.shape[1]), x[source], "amax", include_self=True)


def _graph(seed, num_nodes=60, num_edges=150):
    """Two graphs and an empty one, with multi-edges and self-loops."""
    gen = torch.Generator().manual_seed(seed)
    first = num_nodes // 3
    parts = [(torch.randint(0, first, (2, num_edges // 3), generator=gen), first), (torch.zeros(2, 0, dtype=torch.int64), 0),
             (torch.randint(0, num_nodes - first, (2, num_edges - num_edges // 3), generator=gen), num_nodes - first)]
    return GraphBatch.from_edge_lists(parts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", [False, True])
def test_values_and_gradient_match_scatter_reduce(dtype, ties):
    graph = _graph(1)
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(-2, 3, (60, 7), generator=gen).to(dtype) if ties else torch.randn(60, 7, generator=gen,
                                                                                         dtype=dtype)
    g = torch.randn(60, 7, generator=gen, dtype=dtype)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    out, expected = neighbour_max(a, graph), _reference(b, graph)
    assert torch.equal(out, expected)
    out.backward(g)
    expected.backward(g)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=1e-6)


def test_isolated_nodes_and_nan():
    graph = GraphBatch(torch.tensor([[0, 1], [1, 0]]), total_nodes=3)
    x = torch.tensor([[1.0, float("nan")], [2.0, 0.0], [5.0, -1.0]])
    out = neighbour_max(x, graph)
    assert torch.equal(out[:, 0], torch.tensor([2.0, 2.0, 5.0]))
    assert out[0, 1].isnan() and out[1, 1].isnan() and out[2, 1] == -1.0


def test_thread_count_does_not_change_the_result():
    graph = _graph(3, num_nodes=30000, num_edges=90000)
    x = torch.randn(30000, 64)

    def run():
        xx = x.clone().requires_grad_()
        out = neighbour_max(xx, graph)
        out.square().sum().backward()
        return out, xx.grad

    assert_thread_invariant(run)


def test_rejects_wrong_shapes():
    graph = _graph(4)
    with pytest.raises(ValueError, match="nodes"):
        neighbour_max(torch.randn(59, 3), graph)
    with pytest.raises(TypeError):
        neighbour_max(torch.ones(60, 3, dtype=torch.int64), graph)
    with pytest.raises(ValueError, match=r"\[N, F\]"):
        graph_max(torch.randn(2, 60, 3), graph)


@pytest.mark.parametrize("ties", [False, True])
def test_second_derivatives_match_scatter_reduce(ties):
    """Gradient of a gradient (a gradient penalty): the tie mask counts as constant, as in torch."""
    graph = _graph(7)
    gen = torch.Generator().manual_seed(8)
    x = torch.randint(-2, 2, (60, 5), generator=gen).double() + 0.5 if ties else \
        torch.randn(60, 5, generator=gen, dtype=torch.float64)
    source, target = graph.edge_index
    index = graph.batch.unsqueeze(1).expand(-1, 5)
    ops = [(neighbour_max, lambda v: v.scatter_reduce(0, target.unsqueeze(1).expand(-1, 5), v[source], "amax",
                                                      include_self=True)),
           (graph_max, lambda v: v.new_zeros(3, 5).scatter_reduce(0, index, v, "amax", include_self=False))]
    for op, reference in ops:
        results = []
        for fn in (op, reference):
            leaf = x.clone().requires_grad_()
            first = lambda v: fn(v) if fn is reference else fn(v, graph)  # noqa: E731
            (grad,) = torch.autograd.grad(first(leaf).pow(3).sum(), leaf, create_graph=True)
            (second,) = torch.autograd.grad(grad.pow(2).sum(), leaf)
            results.append((grad.detach(), second))
        torch.testing.assert_close(results[0][0], results[1][0])
        torch.testing.assert_close(results[0][1], results[1][1])


def test_duvenaud_gradient_penalty():
    from rpfast.nn import Duvenaud

    graph = _graph(9)
    model = Duvenaud(4, 2).double()
    x = torch.randn(60, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(10), requires_grad=True)
    (grad,) = torch.autograd.grad(model(x, graph.edge_index, graph.batch).sum(), x, create_graph=True)
    grad.pow(2).sum().backward()  # raised "differentiate twice" while the pools were once-differentiable
    weight_grads = [w.grad for w in model.convs[0].weights if w.grad is not None]
    assert weight_grads and all(torch.isfinite(g).all() for g in weight_grads)
    assert sum(g.abs().sum() for g in weight_grads) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", [False, True])
def test_graph_max_matches_scatter_reduce(dtype, ties):
    graph = _graph(5)  # its middle graph has no nodes: max 0, no gradient
    gen = torch.Generator().manual_seed(6)
    # ties at +-0.5, +-1.5: a maximum of exactly 0 would also tie, in torch's backward, with the
    # initial zero that include_self=False discards (a torch quirk graph_max does not copy)
    x = torch.randint(-2, 2, (60, 21), generator=gen).to(dtype) + 0.5 if ties else \
        torch.randn(60, 21, generator=gen, dtype=dtype)
    g = torch.randn(3, 21, generator=gen, dtype=dtype)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    index = graph.batch.unsqueeze(1).expand(-1, 21)
    expected = b.new_zeros(3, 21).scatter_reduce(0, index, b, "amax", include_self=False)
    out = graph_max(a, graph)
    assert torch.equal(out, expected)
    out.backward(g)
    expected.backward(g)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=1e-6)


def test_graph_max_shares_a_tie_among_the_graphs_nodes_only():
    graph = GraphBatch.from_edge_lists([(torch.zeros(2, 0, dtype=torch.int64), 2)])
    x = torch.zeros(2, 1, requires_grad=True)
    graph_max(x, graph).sum().backward()
    assert torch.equal(x.grad, torch.tensor([[0.5], [0.5]]))
