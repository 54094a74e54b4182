"""DFS/BFS/WL orientations: agreement with networkx, poly-canonical invariance, errors."""
import math

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset
from rpfast.ops import bfs_order, dfs_order, permute_adjacency, wl_order


from tests.helpers.reference import traversal_order_reference as reference_order  # noqa: E402


@st.composite
def batches(draw):
    graphs = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 9))
        pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=18))
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_edges_from(pairs)
        graphs.append(G)
    return graphs


@settings(max_examples=100, deadline=None)
@given(batches(), st.integers(1, 3), st.booleans(), st.integers(0, 2**31), st.booleans())
def test_matches_networkx_with_restarts(graphs, P, depth_first, seed, custom_ranks):
    batch = GraphBatch.from_networkx(graphs)
    gen = torch.Generator().manual_seed(seed)
    n_max = batch.n_max
    start = torch.stack([torch.randint(0, G.number_of_nodes(), (P,), generator=gen) for G in graphs])
    tiebreak = None
    if custom_ranks:
        tiebreak = torch.stack([torch.stack([torch.cat([torch.randperm(G.number_of_nodes(), generator=gen),
                                                        torch.arange(G.number_of_nodes(), n_max)])
                                             for _ in range(P)]) for G in graphs])
    fn = dfs_order if depth_first else bfs_order
    out = fn(batch, start, tiebreak)
    assert out.shape == (len(graphs), P, n_max)
    for b, G in enumerate(graphs):
        n = G.number_of_nodes()
        for p in range(P):
            rank = list(range(n)) if tiebreak is None else tiebreak[b, p, :n].tolist()
            expected = reference_order(G, int(start[b, p]), rank, depth_first)
            assert out[b, p].tolist() == expected + [-1] * (n_max - n)


@settings(max_examples=60, deadline=None)
@given(batches(), st.booleans(), st.integers(0, 2**31))
def test_poly_canonical_invariance(graphs, depth_first, seed):
    """Relabel by sigma, map start and tiebreak through sigma: identical oriented adjacency."""
    gen = torch.Generator().manual_seed(seed)
    sigmas = [torch.randperm(G.number_of_nodes(), generator=gen) for G in graphs]
    relabeled = [nx.relabel_nodes(G, {v: int(s[v]) for v in G}) for G, s in zip(graphs, sigmas)]
    relabeled = [nx.convert_node_labels_to_integers(H, ordering="sorted") for H in relabeled]
    a, b_ = GraphBatch.from_networkx(graphs), GraphBatch.from_networkx(relabeled)
    n_max = a.n_max
    start = torch.stack([torch.randint(0, G.number_of_nodes(), (1,), generator=gen) for G in graphs])
    ranks = [torch.randperm(G.number_of_nodes(), generator=gen) for G in graphs]
    pad = lambda r: torch.cat([r, torch.arange(len(r), n_max)])  # noqa: E731
    tie_a = torch.stack([pad(r) for r in ranks]).unsqueeze(1)
    tie_b = []
    for r, s in zip(ranks, sigmas):
        mapped = torch.empty_like(r)
        mapped[s] = r  # vertex sigma(v) keeps v's rank
        tie_b.append(pad(mapped))
    tie_b = torch.stack(tie_b).unsqueeze(1)
    start_b = torch.stack([s[st_] for s, st_ in zip(sigmas, start)])
    fn = dfs_order if depth_first else bfs_order
    adj_a = permute_adjacency(a.dense_adj(), fn(a, start, tie_a))
    adj_b = permute_adjacency(b_.dense_adj(), fn(b_, start_b, tie_b))
    assert torch.equal(adj_a, adj_b)


def test_start_modes_and_k():
    batch = GraphBatch.from_networkx([nx.path_graph(4), nx.empty_graph(0), nx.star_graph(2)])
    every = dfs_order(batch, "all")
    assert every.shape == (3, 4, 4)
    assert every[0, :, 0].tolist() == [0, 1, 2, 3] and (every[1] == -1).all()
    assert every[2, 3].tolist() == [-1] * 4  # the star has 3 vertices
    first_two = bfs_order(batch, "all", k=2)
    assert torch.equal(first_two, bfs_order(batch, "all")[..., :2])
    gen = torch.Generator().manual_seed(0)
    a = dfs_order(batch, "random", num_samples=5, generator=gen)
    b = dfs_order(batch, "random", num_samples=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and a.shape == (3, 5, 4)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"start": torch.tensor([[5], [0]])}, IndexError, r"start\[0, 0\] = 5 is not a vertex of graph 0"),
    ({"start": torch.tensor([[0], [-2]])}, IndexError, r"start\[1, 0\] = -2"),
    ({"start": torch.tensor([[0], [0]]), "tiebreak": torch.tensor([[[0, 0, 1]], [[0, 1, 2]]])}, ValueError,
     r"tiebreak\[0, 0\] is not a permutation"),
    ({"start": torch.tensor([[0], [0]]), "tiebreak": torch.zeros(2, 1, 2, dtype=torch.int64)}, ValueError,
     "tiebreak must have shape"),
    ({"start": "first"}, ValueError, "start must be a tensor"),
    ({"start": torch.tensor([[0.0], [0.0]])}, TypeError, "start must hold integers"),
    ({"start": torch.tensor([[0], [0]]), "k": 0}, ValueError, "k must be >= 1"),
])
def test_rejects_bad_input(kwargs, error, match):
    batch = GraphBatch.from_networkx([nx.path_graph(3), nx.path_graph(2)])
    with pytest.raises(error, match=match):
        dfs_order(batch, **kwargs)


# ------------------------------------------------------------------------------ WL
def test_wl_on_csl_is_one_class_with_n_factorial_orders():
    graphs, _ = csl_dataset(per_class=1)
    result = wl_order(csl_batch(graphs, [0, 5]))
    assert (result.colours == 0).all()
    assert result.num_orders == [math.factorial(41)] * 2
    torch.testing.assert_close(result.log_num_orders, torch.full((2,), math.lgamma(42), dtype=torch.float64))


def test_wl_counts_classes_per_graph_in_a_mixed_batch():
    graphs = [nx.path_graph(n) for n in range(1, 9)] + [nx.star_graph(4), nx.empty_graph(0)]
    result = wl_order(GraphBatch.from_networkx(graphs))
    # a path on n vertices has floor(n/2) mirror pairs; a star's 4 leaves form one class
    expected = [2 ** (n // 2) for n in range(1, 9)] + [math.factorial(4), 1]
    assert result.num_orders == expected
    torch.testing.assert_close(result.log_num_orders,
                               torch.tensor([math.log(c) for c in expected], dtype=torch.float64))


def test_wl_with_distinct_colours_is_canonical_whatever_the_tiebreak():
    """An asymmetric tree refines to singletons: isomorphic copies give identical orientations."""
    G = nx.Graph([(0, 1), (0, 2), (2, 3), (0, 4), (4, 5), (5, 6)])  # spider with legs 1, 2, 3: no automorphism
    gen = torch.Generator().manual_seed(3)
    copies = [nx.relabel_nodes(G, dict(zip(range(7), torch.randperm(7, generator=gen).tolist()))) for _ in range(4)]
    batch = GraphBatch.from_networkx(copies)
    tiebreak = torch.stack([torch.randperm(7, generator=gen) for _ in range(4)]).unsqueeze(1)
    result = wl_order(batch, tiebreak)
    assert result.num_orders == [1] * 4
    oriented = permute_adjacency(batch.dense_adj(), result.order)
    assert all(torch.equal(oriented[0], oriented[i]) for i in range(1, 4))


def test_wl_uses_node_features_and_counts_classes():
    G = nx.path_graph(4)
    batch = GraphBatch.from_networkx([G])
    plain = wl_order(batch)
    assert plain.num_orders == [4]  # {0, 3} and {1, 2}
    x = torch.tensor([[1.0], [0.0], [0.0], [0.0]])  # marks one end
    marked = wl_order(batch, x=x)
    assert marked.num_orders == [1]
    assert sorted(marked.order[0, 0].tolist()) == [0, 1, 2, 3]
    assert len(set(marked.colours.tolist())) == 4
    with pytest.raises(ValueError, match="x must be a tensor"):
        wl_order(batch, x=torch.zeros(3, 1))
    with pytest.raises(ValueError, match=r"tiebreak\[0, 0\] is not a permutation"):
        wl_order(batch, torch.tensor([[[0, 1, 1, 2]]]))
