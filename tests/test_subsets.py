"""k-subset enumeration against brute force (itertools + networkx), counts, streaming, sampling."""
import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from rpfast.data import GraphBatch
from rpfast.ops import count_k_subsets, iter_k_subsets, k_subsets, sample_k_subsets, set_memory_budget
from rpfast.ops.subsets import get_memory_budget

from reference import k_subsets_reference, keep_subset  # noqa: E402

MODES = ["none", "edgeless", "isolated", "connected"]


@st.composite
def graph_lists(draw):
    graphs = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 8))
        kind = draw(st.sampled_from(["random", "empty", "complete", "path", "star", "cycle"]))
        if kind == "random" and n:
            pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=16))
        elif kind == "complete":
            pairs = list(itertools.combinations(range(n), 2))
        elif kind == "path":
            pairs = [(i, i + 1) for i in range(n - 1)]
        elif kind == "star":
            pairs = [(0, i) for i in range(1, n)]
        elif kind == "cycle" and n >= 3:
            pairs = [(i, (i + 1) % n) for i in range(n)]
        else:
            pairs = []
        ei = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t()
        if draw(st.booleans()):  # store both directions, as PyG does
            ei = torch.cat([ei, ei.flip(0)], dim=1)
        graphs.append((ei, n))
    return graphs


@settings(max_examples=120, deadline=None)
@given(graph_lists(), st.integers(1, 5), st.sampled_from(MODES))
def test_matches_brute_force(graphs, k, prune):
    batch = GraphBatch.from_edge_lists(graphs)
    subsets, ptr = k_subsets(batch, k, prune)
    expected, expected_ptr = k_subsets_reference(graphs, k, prune)
    assert torch.equal(ptr, expected_ptr)
    assert torch.equal(subsets, expected)
    assert count_k_subsets(batch, k, prune).tolist() == expected_ptr.diff().tolist()
    chunks = list(iter_k_subsets(batch, k, prune, chunk_size=3))
    assert all(len(c.subsets) <= 3 for c in chunks)
    streamed = torch.cat([c.subsets for c in chunks]) if chunks else torch.zeros(0, k, dtype=torch.int64)
    assert torch.equal(streamed, expected)
    if chunks:
        graph_ids = torch.cat([c.graph for c in chunks])
        assert torch.equal(graph_ids, torch.repeat_interleave(torch.arange(len(graphs)), expected_ptr.diff()))


@pytest.mark.parametrize("n", [5, 8, 12])
def test_cycle_has_n_connected_subsets_of_each_size(n):
    ei = torch.tensor([[i, (i + 1) % n] for i in range(n)]).t()
    for k in range(1, n):
        assert count_k_subsets(ei, k, "connected", num_nodes=n).item() == n


@pytest.mark.parametrize("prune", MODES)
def test_complete_graph_keeps_everything(prune):
    n = 9
    ei = torch.tensor(list(itertools.permutations(range(n), 2))).t()
    for k in range(2, n + 1):
        assert count_k_subsets(ei, k, prune, num_nodes=n).item() == math.comb(n, k)


def test_self_loops_do_not_count_as_edges():
    ei = torch.tensor([[0, 1, 2], [0, 1, 2]])
    assert k_subsets(ei, 2, "edgeless", num_nodes=3)[0].shape == (0, 2)
    assert count_k_subsets(ei, 1, "connected", num_nodes=3).item() == 3


def test_k_larger_than_graph_gives_empty_result_and_bad_k_raises():
    ei = torch.tensor([[0], [1]])
    subsets, ptr = k_subsets(ei, 5, num_nodes=3)
    assert subsets.shape == (0, 5) and ptr.tolist() == [0, 0]
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="k must be"):
            k_subsets(ei, bad, num_nodes=3)
    with pytest.raises(ValueError, match="prune must be one of"):
        k_subsets(ei, 2, "sparse", num_nodes=3)
    with pytest.raises(TypeError, match="graph must be a GraphBatch"):
        k_subsets("edges", 2)
    with pytest.raises(IndexError, match="out of range"):
        k_subsets(torch.tensor([[0], [7]]), 2, num_nodes=3)


def test_memory_budget_refuses_and_points_to_streaming():
    ei = torch.tensor(list(itertools.combinations(range(30), 2))).t()
    with pytest.raises(ValueError, match=r"142506 'none' 5-subsets would need .* iter_k_subsets"):
        k_subsets(ei, 5, num_nodes=30, max_bytes=1000)
    before = get_memory_budget()
    try:
        set_memory_budget(1000)
        with pytest.raises(ValueError, match="memory budget"):
            k_subsets(ei, 5, num_nodes=30)
    finally:
        set_memory_budget(before)
    assert k_subsets(ei, 5, num_nodes=30)[0].shape == (142506, 5)


def test_count_overflow_is_reported():
    n = 200
    with pytest.raises(OverflowError, match="more than a 64-bit count"):
        count_k_subsets(torch.zeros(2, 0, dtype=torch.int64), 100, num_nodes=n)


def test_identical_for_any_thread_count():
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 60, (2, 150), generator=gen)
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append([k_subsets(ei, 4, prune, num_nodes=60)[0] for prune in MODES])
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*results))


# ------------------------------------------------------------------------- sampling
def csl_like():
    return GraphBatch.from_networkx([nx.cycle_graph(7), nx.path_graph(5), nx.empty_graph(3),
                                     nx.disjoint_union(nx.path_graph(2), nx.cycle_graph(4))])


@pytest.mark.parametrize("method", ["bfs", "dfs"])
def test_grown_samples_are_connected_distinct_and_reproducible(method):
    batch = csl_like()
    samples = sample_k_subsets(batch, 3, 50, method, generator=torch.Generator().manual_seed(1))
    assert samples.shape == (4, 50, 3)
    assert (samples[2] == -1).all()  # no component with 3 vertices
    graphs = [nx.cycle_graph(7), nx.path_graph(5), None, nx.disjoint_union(nx.path_graph(2), nx.cycle_graph(4))]
    for b in (0, 1, 3):
        for row in samples[b].tolist():
            assert len(set(row)) == 3
            assert nx.is_connected(graphs[b].subgraph(row))
            # visiting order: every vertex after the first is adjacent to an earlier one
            assert all(any(graphs[b].has_edge(row[j], row[i]) for j in range(i)) for i in range(1, 3))
    again = sample_k_subsets(batch, 3, 50, method, generator=torch.Generator().manual_seed(1))
    assert torch.equal(samples, again)
    assert set(samples[3].flatten().tolist()) <= {2, 3, 4, 5}  # only the 4-cycle is big enough


@pytest.mark.parametrize("prune", ["none", "connected"])
def test_uniform_sampling_is_uniform(prune):
    G = nx.path_graph(6)
    batch = GraphBatch.from_networkx([G])
    subsets = [c for c in itertools.combinations(range(6), 3) if keep_subset(G, c, prune)]
    index = {c: i for i, c in enumerate(subsets)}
    samples = sample_k_subsets(batch, 3, 200 * len(subsets), "uniform", prune=prune,
                               generator=torch.Generator().manual_seed(2))
    counts = np.zeros(len(subsets))
    for row in samples[0].tolist():
        counts[index[tuple(row)]] += 1
    assert counts.min() > 0
    assert chisquare(counts).pvalue > 1e-3


def test_uniform_pruned_sampling_without_memory_for_the_enumeration():
    """The budget only has to hold the samples: picked rows are written during one search."""
    star = nx.star_graph(30)  # centre 0; C(30, 3) = 4060 connected 4-subsets, 130 KB enumerated
    batch = GraphBatch.from_networkx([star, nx.empty_graph(2)])
    before = get_memory_budget()
    try:
        set_memory_budget(2 * 60 * 4 * 8)  # exactly the output
        samples = sample_k_subsets(batch, 4, 60, prune="connected", generator=torch.Generator().manual_seed(4))
    finally:
        set_memory_budget(before)
    rows = samples[0].tolist()
    assert all(r[0] == 0 and 0 < r[1] < r[2] < r[3] <= 30 for r in rows)
    assert len({tuple(r) for r in rows}) > 50
    assert (samples[1] == -1).all()


def test_sampling_rejects_bad_arguments():
    batch = csl_like()
    with pytest.raises(ValueError, match="method must be"):
        sample_k_subsets(batch, 3, 5, "random-walk")
    with pytest.raises(ValueError, match="num_samples must be >= 1"):
        sample_k_subsets(batch, 3, 0)
