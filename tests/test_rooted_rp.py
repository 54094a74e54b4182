"""RootedRP: RP over one marked vertex, exact over every root in eval mode."""
import networkx as nx
import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.data.pair_families import cfi_pair
from rpfast.data.pairs import networkx_edge_index
from rpfast.nn import Concat, RootedRP


def _batch(*graphs, features: int = 1, dtype=torch.float64) -> GraphBatch:
    return GraphBatch.from_edge_lists([(networkx_edge_index(g), g.number_of_nodes()) for g in graphs],
                                      x=[torch.ones(g.number_of_nodes(), features, dtype=dtype) for g in graphs])


def _model(**kwargs) -> RootedRP:
    torch.manual_seed(0)
    return RootedRP(1, 8, kwargs.pop("layers", 12), 3, **kwargs).double().eval()


def _relabeled(graph: nx.Graph, seed: int) -> nx.Graph:
    order = torch.randperm(graph.number_of_nodes(), generator=torch.Generator().manual_seed(seed)).tolist()
    return nx.relabel_nodes(graph, dict(zip(graph.nodes, order)))


def test_eval_output_is_the_mean_over_every_root_of_one_marked_pass():
    graph = nx.gnp_random_graph(9, 0.4, seed=1)
    model = _model(layers=3)
    batch = _batch(graph)
    out = model(batch.x, batch)
    with torch.no_grad():  # the formula, one root at a time, with a dense adjacency
        adj = torch.tensor(nx.to_numpy_array(graph, nodelist=range(9)))
        per_root = []
        for root in range(9):
            marked = torch.zeros(9, 1, dtype=torch.float64)
            marked[root] = 1
            h = torch.cos(model.embed(batch.x) + marked * model.marker)
            for layer in model.rounds:
                h = torch.cos(layer(torch.cat([h, h + adj @ h], dim=-1)))
            per_root.append(model.read(h.mean(dim=0)))
    assert torch.allclose(out[0], torch.stack(per_root).mean(dim=0), atol=1e-12)


def test_eval_output_is_invariant_and_blocks_of_roots_do_not_change_it():
    graph = nx.random_regular_graph(3, 12, seed=2)
    model = _model()
    batch = _batch(graph, _relabeled(graph, 5), nx.path_graph(4), nx.empty_graph(0))
    out = model(batch.x, batch)
    assert out.shape == (4, 3)
    assert torch.allclose(out[0], out[1], atol=1e-12)  # exact over the roots: no sampling spread
    assert bool((out[3] == 0).all())  # an empty graph has no root
    alone = model(*(lambda b: (b.x, b))(_batch(nx.path_graph(4))))
    assert torch.allclose(out[2], alone[0], atol=1e-12)  # roots past a smaller graph's size weigh 0
    one_root_per_block = _model(block_elements=1)
    assert torch.allclose(one_root_per_block(batch.x, batch), out, atol=1e-12)


def test_it_separates_cfi_pairs_that_rooted_refinement_separates_and_no_others():
    model = _model()
    diamond = nx.Graph([(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)])  # treewidth 2: a root's refinement sees the twist
    g, h = cfi_pair(diamond)
    out = model(*(lambda b: (b.x, b))(_batch(g, h)))
    assert (out[0] - out[1]).abs().max() > 1e-4
    g, h = cfi_pair(nx.complete_graph(4))  # treewidth 3: one marked vertex is not enough
    out = model(*(lambda b: (b.x, b))(_batch(g, h)))
    assert (out[0] - out[1]).abs().max() < 1e-9


def test_training_draws_roots_reproducibly_and_trains_every_parameter():
    graph = nx.gnp_random_graph(10, 0.3, seed=3)
    batch = _batch(graph, graph, dtype=torch.float32)

    def draw(seed):
        torch.manual_seed(0)
        model = RootedRP(1, 8, 4, 2, train_roots=3, generator=torch.Generator().manual_seed(seed)).train()
        return model, model(batch.x, batch)

    model, out = draw(7)
    assert torch.equal(out, draw(7)[1]) and not torch.equal(out, draw(8)[1])
    assert not torch.equal(out[0], out[1])  # each graph draws its own roots
    out.sum().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())


def test_concat_joins_whole_graph_models():
    torch.manual_seed(0)
    both = Concat(RootedRP(1, 4, 2, 3), RootedRP(1, 4, 2, 2)).eval()
    batch = _batch(nx.cycle_graph(5), dtype=torch.float32)
    assert both(batch.x, batch).shape == (1, 5)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(num_layers=0), ValueError, "num_layers must be >= 1"),
    (dict(train_roots=0), ValueError, "train_roots must be >= 1"),
    (dict(init_gain=0.0), ValueError, "init_gain must be positive"),
    (dict(init_gain="3"), TypeError, "init_gain must be a float"),
    (dict(generator=1), TypeError, "generator must be a torch.Generator"),
])
def test_arguments_are_checked(kwargs, error, message):
    args = dict(in_dim=1, hidden=4, num_layers=2, out_dim=2)
    with pytest.raises(error, match=message):
        RootedRP(**{**args, **kwargs})


def test_inputs_are_checked():
    model = RootedRP(2, 4, 2, 2)
    batch = _batch(nx.cycle_graph(4), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"built for float x \[N, 2\], got \(4, 1\)"):
        model(batch.x, batch)
    with pytest.raises(ValueError, match=r"got \(4, 2\) torch.int64"):
        model(torch.ones(4, 2, dtype=torch.int64), batch)
    with pytest.raises(ValueError, match="needs node features"):
        model(None, batch)
