"""RootWalks (gated walk counts around a view's first vertex), Concat, and balanced starts."""
import random
from collections import Counter

import networkx as nx
import pytest
import torch
from torch import nn

from rpfast.data import GraphBatch
from rpfast.datasets.pair_families import latin_square_graph, random_latin_square
from rpfast.datasets.pairs import networkx_edge_index
from rpfast.nn import Concat, Oriented, RelationalPooling, RootWalks, VecMLP


def _dense(graph: nx.Graph, order):
    """``adj [1, K, K, 1]``, ``x [1, K, 1]``, ``mask [1, K]`` of ``graph`` with vertex ``order[i]`` at position i."""
    K = len(order)
    adj = torch.zeros(1, K, K, 1)
    for i, u in enumerate(order):
        for j, v in enumerate(order):
            adj[0, i, j, 0] = float(graph.has_edge(u, v))
    return adj, torch.ones(1, K, 1), torch.ones(1, K, dtype=torch.bool)


def _neighbour_gates(walks: RootWalks) -> RootWalks:
    """Gates set to the indicator of the first vertex's neighbours, features exposed."""
    with torch.no_grad():
        walks.gate.weight.zero_()
        walks.gate.weight[:, 1] = 60.0  # descriptor 1: adjacent to position 0
        walks.gate.bias.fill_(-30.0)
    walks.norm, walks.read = nn.Identity(), nn.Identity()
    return walks.eval()


def test_walk_features_count_the_edges_and_triangles_among_the_start_neighbours():
    graph = nx.gnp_random_graph(9, 0.6, seed=4)
    start = max(graph, key=graph.degree)
    order = [start] + [v for v in graph if v != start]
    walks = _neighbour_gates(RootWalks(9, 1, 1, 8, 4, channels=1))
    edges, two_walks, closed_three = walks(*_dense(graph, order))[0].tolist()
    around = graph.subgraph(list(graph[start]))
    assert edges == pytest.approx(2 * around.number_of_edges(), abs=1e-3)
    assert two_walks == pytest.approx(sum(d * d for _, d in around.degree()), abs=1e-3)
    assert closed_three / 6 == pytest.approx(sum(nx.triangles(around).values()) / 3, abs=1e-3)


def test_walk_features_depend_on_the_first_position_only():
    graph = nx.gnp_random_graph(8, 0.5, seed=1)
    walks = RootWalks(8, 1, 1, 16, 5).eval()
    base = walks(*_dense(graph, list(range(8))))
    shuffled = walks(*_dense(graph, [0, 5, 2, 7, 1, 3, 6, 4]))
    moved = walks(*_dense(graph, [3, 0, 1, 2, 4, 5, 6, 7]))
    torch.testing.assert_close(base, shuffled)
    assert not torch.allclose(base, moved)


def test_four_cliques_through_the_start_separate_latin_square_graphs_of_order_five():
    cyclic = latin_square_graph([[(i + j) % 5 for j in range(5)] for i in range(5)])
    rng = random.Random(1)
    other = next(g for g in (latin_square_graph(random_latin_square(5, rng)) for _ in range(200))
                 if not nx.is_isomorphic(g, cyclic))
    assert nx.is_strongly_regular(other) and nx.is_strongly_regular(cyclic)
    walks = _neighbour_gates(RootWalks(13, 1, 1, 8, 4, channels=1))

    def cliques_through(graph, start):
        order = [start] + list(graph[start])
        return round(walks(*_dense(graph, order))[0, 2].item() / 6)

    assert {cliques_through(cyclic, v) for v in cyclic} == {12}
    assert Counter(cliques_through(other, v) for v in other) != Counter({12: 25})


def test_ego_gates_ignore_the_vertices_beyond_the_first_vertex_neighbourhood():
    graph = nx.gnp_random_graph(10, 0.4, seed=3)
    start = min(graph, key=graph.degree)
    around = [start] + list(graph[start])
    beyond = [v for v in graph if v not in around]
    assert len(beyond) >= 2
    views = [around + beyond, around + beyond[::-1]]  # a different vertex beyond in the window
    window = len(around) + 1
    torch.manual_seed(0)
    ego = RootWalks(10, 1, 1, 8, 4, window=window, ego_channels=2).eval()
    free = RootWalks(10, 1, 1, 8, 4, window=window).eval()
    free.load_state_dict(ego.state_dict())
    torch.testing.assert_close(ego(*_dense(graph, views[0])), ego(*_dense(graph, views[1])))
    assert not torch.allclose(free(*_dense(graph, views[0])), free(*_dense(graph, views[1])))
    with pytest.raises(ValueError, match="ego_channels = 3 is above channels = 2"):
        RootWalks(10, 1, 1, 8, 4, ego_channels=3)
    with pytest.raises(ValueError, match="ego_channels"):
        RootWalks(10, 1, 1, 8, 4, ego_channels=-1)


def test_root_walks_and_concat_shapes_and_errors():
    walks = RootWalks(6, 2, 3, 8, 5, window=4)
    vec = VecMLP(6, 2, 3, 8, 2)
    both = Concat(walks, vec).eval()
    adj, x, mask = torch.rand(7, 6, 6, 2), torch.randn(7, 6, 3), torch.ones(7, 6, dtype=torch.bool)
    assert both(adj, x, mask).shape == (7, 7)
    assert walks.eval()(adj[:0], x[:0], mask[:0]).shape == (0, 5)
    walks.train()
    for rows in (0, 1, 2):  # fewer than two training views: the running statistics normalise
        out = walks(adj[:rows], x[:rows], mask[:rows])
        assert out.shape == (rows, 5) and bool(torch.isfinite(out).all())
    with pytest.raises(ValueError, match="window = 7 is above max_nodes = 6"):
        RootWalks(6, 1, 1, 8, 4, window=7)
    with pytest.raises(ValueError, match="joint RP"):
        RootWalks((3, 4), 1, 0, 8, 4)
    with pytest.raises(ValueError, match="built for K=6"):
        walks(torch.rand(2, 5, 5, 2), torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="two or more"):
        Concat(walks)


def test_balanced_starts_spread_the_orders_evenly_over_the_vertices():
    graphs = [(networkx_edge_index(nx.cycle_graph(5)), 5), (networkx_edge_index(nx.path_graph(6)), 6),
              (torch.zeros(2, 0, dtype=torch.int64), 0)]
    batch = GraphBatch.from_edge_lists(graphs)
    strategy = Oriented("bfs", 4, starts="balanced", train_samples=13, eval_samples=12, min_size=3)
    assert "starts='balanced'" in repr(strategy)
    perms, _ = strategy.relabel(batch, True, torch.Generator().manual_seed(0))
    assert perms.shape == (3, 13, 4)
    assert sorted(Counter(perms[0, :, 0].tolist()).values()) == [2, 2, 3, 3, 3]  # 13 = 2 * 5 + 3
    assert sorted(Counter(perms[1, :, 0].tolist()).values()) == [2, 2, 2, 2, 2, 3]
    assert bool((perms[2] == -1).all())
    lengths = (perms[:2] >= 0).sum(-1)
    assert lengths.min() >= 3 and lengths.max() == 4
    perms, weights = strategy.relabel(batch, False, torch.Generator().manual_seed(1))
    assert Counter(perms[1, :, 0].tolist()) == Counter({v: 2 for v in range(6)})
    for b, n in ((0, 5), (1, 6)):  # every start carries 1 / n of the average
        per_start = Counter()
        for p in range(12):
            per_start[int(perms[b, p, 0])] += float(weights[b, p])
        assert sorted(per_start) == list(range(n)) and all(w == pytest.approx(1 / n) for w in per_start.values())
    assert bool((weights[2] == 0).all())
    few = Oriented("bfs", 4, starts="balanced", eval_samples=3)
    perms, weights = few.relabel(batch, False, torch.Generator().manual_seed(3))
    assert len(set(perms[0, :, 0].tolist())) == 3 and torch.allclose(weights[:2], torch.full((2, 3), 1 / 3,
                                                                                             dtype=torch.float64))
    rp = RelationalPooling(Concat(RootWalks(4, 1, 1, 8, 3), VecMLP(4, 1, 1, 8, 1)), strategy,
                           generator=torch.Generator().manual_seed(2), use_edge_attr=False).eval()
    assert rp(torch.ones(11, 1), batch).shape == (3, 4)
    with pytest.raises(ValueError, match="'random', 'balanced' or 'all'"):
        Oriented("bfs", 4, starts="even")
