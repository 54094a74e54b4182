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
from rpfast import _backend, _testing
from rpfast.ops import subsets_bounded as subsets_module
from rpfast.ops.subsets import DEFAULT_MAX_VISITS, PRUNE_MODES, Prune, get_memory_budget

from tests.helpers.assertions import assert_thread_invariant  # noqa: E402
from tests.helpers.reference import k_subsets_reference, keep_subset  # noqa: E402
from tests.helpers.strategies import graph_lists  # noqa: E402

MODES = ["none", "edgeless", "isolated", "disconnected"]




@settings(max_examples=120, deadline=None)
@given(graph_lists(min_graphs=1), st.integers(1, 5), st.sampled_from(MODES))
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
        assert count_k_subsets(ei, k, "disconnected", num_nodes=n).item() == n


@pytest.mark.parametrize("prune", MODES)
def test_complete_graph_keeps_everything(prune):
    n = 9
    ei = torch.tensor(list(itertools.permutations(range(n), 2))).t()
    for k in range(2, n + 1):
        assert count_k_subsets(ei, k, prune, num_nodes=n).item() == math.comb(n, k)


def test_self_loops_do_not_count_as_edges():
    ei = torch.tensor([[0, 1, 2], [0, 1, 2]])
    assert k_subsets(ei, 2, "edgeless", num_nodes=3)[0].shape == (0, 2)
    assert count_k_subsets(ei, 1, "disconnected", num_nodes=3).item() == 3


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
    assert_thread_invariant(lambda: [k_subsets(ei, 4, prune, num_nodes=60)[0] for prune in MODES])


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


@pytest.mark.parametrize("prune", ["none", "disconnected"])
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
        samples = sample_k_subsets(batch, 4, 60, prune="disconnected", generator=torch.Generator().manual_seed(4))
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


# ------------------------------------------------------------------------- prune vocabulary
def small_batch():
    return GraphBatch.from_networkx([nx.gnp_random_graph(9, 0.4, seed=3), nx.path_graph(5), nx.empty_graph(2),
                                     nx.disjoint_union(nx.path_graph(3), nx.cycle_graph(4))])


def test_prune_is_an_enum_of_what_is_dropped():
    assert [p.value for p in Prune] == MODES
    assert [p.code for p in Prune] == [0, 1, 2, 3]
    assert PRUNE_MODES == {p.value: p for p in Prune}
    assert Prune("disconnected") is Prune.DISCONNECTED and Prune.DISCONNECTED == "disconnected"
    assert f"{Prune.ISOLATED}" == str(Prune.ISOLATED) == "isolated"
    batch = small_batch()
    for prune in Prune:
        assert torch.equal(k_subsets(batch, 3, prune)[0], k_subsets(batch, 3, prune.value)[0])
        assert torch.equal(count_k_subsets(batch, 3, prune), count_k_subsets(batch, 3, prune.value))


def test_connected_is_a_deprecated_alias_of_disconnected():
    batch = small_batch()
    expected = k_subsets(batch, 3, Prune.DISCONNECTED)
    message = 'prune="connected" was renamed "disconnected"'
    with pytest.warns(DeprecationWarning, match=message) as caught:
        renamed = k_subsets(batch, 3, "connected")
    assert caught[0].filename == __file__  # the warning points at the caller
    assert torch.equal(renamed[0], expected[0]) and torch.equal(renamed[1], expected[1])
    with pytest.warns(DeprecationWarning, match=message):
        assert torch.equal(count_k_subsets(batch, 3, "connected"), count_k_subsets(batch, 3, "disconnected"))
    with pytest.warns(DeprecationWarning, match=message):
        streamed = torch.cat([c.subsets for c in iter_k_subsets(batch, 3, prune="connected", chunk_size=4)])
    assert torch.equal(streamed, expected[0])
    generator = torch.Generator().manual_seed(5)
    with pytest.warns(DeprecationWarning, match=message):
        sampled = sample_k_subsets(batch, 3, 20, prune="connected", generator=generator)
    assert torch.equal(sampled, sample_k_subsets(batch, 3, 20, prune="disconnected",
                                                 generator=torch.Generator().manual_seed(5)))
    with pytest.warns(DeprecationWarning, match=message) as caught:
        assert Prune("connected") is Prune.DISCONNECTED
    assert caught[0].filename == __file__


@pytest.mark.parametrize("bad", ["sparse", "", "NONE", "connected ", None, 3, 1.0, ["none"]])
def test_invalid_prune_is_refused_by_every_function(bad):
    batch = small_batch()
    for call in (lambda: k_subsets(batch, 3, bad), lambda: count_k_subsets(batch, 3, bad),
                 lambda: iter_k_subsets(batch, 3, bad), lambda: sample_k_subsets(batch, 3, 4, prune=bad),
                 lambda: sample_k_subsets(batch, 3, 4, "bfs", prune=bad)):
        with pytest.raises(ValueError, match=r"prune must be one of \['none', 'edgeless', 'isolated', 'disconnected'\]"):
            call()


def test_kernels_refuse_an_unknown_prune_code():
    batch = small_batch()
    rowptr, col = batch.undirected_csr()
    for code in (-1, 4, 2**40):
        with pytest.raises(ValueError, match=f"unknown prune mode {code}"):
            _backend.call("subsets_count", batch.ptr, rowptr, col, 3, code, 2**63 - 1, 2**64 - 1)
        with pytest.raises(ValueError, match=f"unknown prune mode {code}"):
            _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 3, code,
                            torch.zeros(batch.total_nodes + 1, dtype=torch.int64), 4)


# ------------------------------------------------------------------------- the stream object
def _task_rows(rows: torch.Tensor, graph: torch.Tensor, batch: GraphBatch) -> list:
    """Rows per (graph, root) task, from an enumeration (the root is a row's first vertex)."""
    counts = [0] * batch.total_nodes
    for (root, *_), b in zip(rows.tolist(), graph.tolist()):
        counts[int(batch.ptr[b]) + root] += 1
    return counts


def _reference_chunk_sizes(task_rows: list, chunk: int) -> list:
    """The chunking of iter_k_subsets: runs of whole tasks that fit in a chunk; a task larger
    than a chunk alone, in chunk-sized pieces."""
    offsets = np.concatenate([[0], np.cumsum(task_rows)])
    sizes, t = [], 0
    while t < len(task_rows):
        if task_rows[t] == 0:
            t += 1
            continue
        end = int(np.searchsorted(offsets, offsets[t] + chunk, side="right")) - 1
        if end > t:
            sizes.append(int(offsets[end] - offsets[t]))
            t = end
            continue
        left = task_rows[t]
        while left:
            sizes.append(min(chunk, left))
            left -= sizes[-1]
        t += 1
    return sizes


@pytest.mark.parametrize("prune", MODES)
@pytest.mark.parametrize("chunk_size", [1, 7, 40, 1 << 40])
def test_stream_keeps_its_position_between_chunks(prune, chunk_size):
    batch = GraphBatch.from_networkx([nx.star_graph(9), nx.empty_graph(3), nx.gnp_random_graph(10, 0.5, seed=1),
                                      nx.cycle_graph(6), nx.complete_graph(7)])
    expected, ptr = k_subsets(batch, 4, prune)
    graph_of_row = torch.repeat_interleave(torch.arange(batch.num_graphs), ptr.diff())
    stream = iter_k_subsets(batch, 4, prune, chunk_size=chunk_size)
    assert stream.total == len(expected) and torch.equal(stream.counts, ptr.diff())
    chunks = list(stream)
    assert [len(c.subsets) for c in chunks] == _reference_chunk_sizes(_task_rows(expected, graph_of_row, batch),
                                                                      chunk_size)
    assert torch.equal(torch.cat([c.subsets for c in chunks]), expected)
    assert torch.equal(torch.cat([c.graph for c in chunks]), graph_of_row)
    again = list(stream)  # every pass starts from the beginning
    assert all(torch.equal(a.subsets, b.subsets) and torch.equal(a.graph, b.graph) for a, b in zip(chunks, again))


def test_two_passes_over_one_stream_are_independent():
    batch = GraphBatch.from_networkx([nx.star_graph(12), nx.cycle_graph(8)])
    stream = iter_k_subsets(batch, 3, "disconnected", chunk_size=5)
    first, second = iter(stream), iter(stream)
    a = [next(first), next(first)]
    b = [next(second)]
    a += list(first)
    b += list(second)
    expected = k_subsets(batch, 3, "disconnected")[0]
    assert torch.equal(torch.cat([c.subsets for c in a]), expected)
    assert torch.equal(torch.cat([c.subsets for c in b]), expected)


def _enumerator(batch, k, prune, chunk_size):
    stream = iter_k_subsets(batch, k, prune, chunk_size=chunk_size)
    rowptr, col = batch.undirected_csr()
    return _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, k, Prune(prune).code, stream._offsets,
                           chunk_size)


def _drain(enumerator, k):
    rows = []
    while (n := enumerator.next_rows()) > 0:
        out, graph = torch.empty(n, k, dtype=torch.int64), torch.empty(n, dtype=torch.int64)
        assert enumerator.fill(out, graph) == n
        rows.append(out)
    return torch.cat(rows) if rows else torch.zeros(0, k, dtype=torch.int64)


def test_enumerator_object_interface():
    batch = GraphBatch.from_networkx([nx.star_graph(9), nx.path_graph(4)])
    expected = k_subsets(batch, 3, "disconnected")[0]  # C(9, 2) = 36 rows rooted at the centre, then 2
    enumerator = _enumerator(batch, 3, "disconnected", 10)
    assert (enumerator.total, enumerator.position, enumerator.k, enumerator.chunk_size) == (len(expected), 0, 3, 10)
    assert enumerator.next_rows() == 10 and enumerator.next_rows() == 10  # asking does not advance
    with pytest.raises(ValueError, match="the next chunk has 10 rows, more than the buffers hold"):
        enumerator.fill(torch.empty(9, 3, dtype=torch.int64), torch.empty(9, dtype=torch.int64))
    with pytest.raises(ValueError, match="out: dimension 1 is 4, expected 3"):
        enumerator.fill(torch.empty(10, 4, dtype=torch.int64), torch.empty(10, dtype=torch.int64))
    with pytest.raises(TypeError, match="out: expected dtype int64"):
        enumerator.fill(torch.empty(10, 3), torch.empty(10, dtype=torch.int64))
    assert enumerator.position == 0
    out, graph = torch.full((12, 3), -7, dtype=torch.int64), torch.full((12,), -7, dtype=torch.int64)
    assert enumerator.fill(out, graph) == 10  # a larger buffer: only the chunk is written
    assert torch.equal(out[:10], expected[:10]) and (out[10:] == -7).all() and (graph[:10] == 0).all()
    assert enumerator.position == 10
    rest = _drain(enumerator, 3)
    assert torch.equal(rest, expected[10:])
    assert enumerator.position == enumerator.total and enumerator.next_rows() == 0
    assert enumerator.fill(out, graph) == 0  # exhausted


def test_enumerator_checks_its_graph_once_at_construction():
    batch = GraphBatch.from_networkx([nx.path_graph(4)])
    rowptr, col = batch.undirected_csr()
    offsets = torch.zeros(5, dtype=torch.int64)
    bad_col = col.clone()
    bad_col[0] = 9
    with pytest.raises(IndexError, match="not a local vertex of graph 0"):
        _backend.create("SubsetEnumerator", batch.ptr, rowptr, bad_col, 2, 0, offsets, 4)
    with pytest.raises(ValueError, match="offsets: dimension 0 is 4, expected 5"):
        _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 2, 0, offsets[:4], 4)
    with pytest.raises(ValueError, match="offsets decreases at task 1"):
        _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 2, 0, torch.tensor([0, 3, 2, 2, 2]), 4)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 2, 0, offsets, 0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 0, 0, offsets, 4)
    # the enumerator keeps copies: changing the arrays afterwards cannot lead it astray
    rowptr, col = rowptr.clone(), col.clone()
    enumerator = _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 2, 3,
                                 torch.tensor([0, 1, 1, 1, 0]).cumsum(0), 4)
    col.fill_(10**6)
    rowptr.fill_(0)
    assert _drain(enumerator, 2).tolist() == [[0, 1], [1, 2], [2, 3]]


@pytest.mark.parametrize("chunk_size", [5, 31464])  # whole tasks in parallel / a piece of one large task
def test_interrupted_fill_keeps_the_position(chunk_size):
    # K_32, k = 5: the centre task alone has C(31, 4) = 31465 rows, more than either chunk;
    # a piece of 31464 rows takes > 4096 search steps, so the search polls for Ctrl-C.
    batch = GraphBatch.from_networkx([nx.path_graph(6), nx.complete_graph(32)] if chunk_size > 5
                                     else [nx.path_graph(6), nx.cycle_graph(7)])
    expected = k_subsets(batch, 5, "none")[0]
    enumerator = _enumerator(batch, 5, "none", chunk_size)
    first = enumerator.next_rows()
    out, graph = torch.empty(first, 5, dtype=torch.int64), torch.empty(first, dtype=torch.int64)
    enumerator.fill(out, graph)
    n = enumerator.next_rows()
    try:
        _testing.set_interrupt_countdown(1)
        with pytest.raises(KeyboardInterrupt):
            enumerator.fill(torch.empty(n, 5, dtype=torch.int64), torch.empty(n, dtype=torch.int64))
    finally:
        _testing.set_interrupt_countdown(0)
    assert enumerator.position == first and enumerator.next_rows() == n
    assert torch.equal(torch.cat([out, _drain(enumerator, 5)]), expected)


def test_enumerator_objects_check_devices_like_kernels():
    batch = GraphBatch.from_networkx([nx.path_graph(4)])
    rowptr, col = batch.undirected_csr()
    meta = torch.device("meta")
    with pytest.raises(ValueError, match="SubsetEnumerator's input is on meta"):
        _backend.create("SubsetEnumerator", batch.ptr.to(meta), rowptr, col, 2, 0, torch.zeros(5, dtype=torch.int64), 4)
    enumerator = _enumerator(batch, 2, "none", 4)
    with pytest.raises(ValueError, match="SubsetEnumerator.fill's input is on meta"):
        enumerator.fill(torch.empty(4, 2, dtype=torch.int64, device=meta), torch.empty(4, dtype=torch.int64))


def test_stream_with_k_beyond_every_graph_and_inconsistent_offsets():
    batch = GraphBatch.from_networkx([nx.path_graph(4)])
    stream = iter_k_subsets(batch, 1 << 40)
    assert stream.total == 0 and list(stream) == []
    rowptr, col = batch.undirected_csr()
    claims_too_many = torch.tensor([0, 9, 9, 9, 9])  # root 0 has 3 rows for k = 2, not 9
    enumerator = _backend.create("SubsetEnumerator", batch.ptr, rowptr, col, 2, 0, claims_too_many, 2)
    assert _drain_until_error(enumerator, 2) == [[0, 1], [0, 2], [0, 3]]


def _drain_until_error(enumerator, k):
    rows = []
    with pytest.raises(RuntimeError, match="subset stream of graph 0 ended after 3 of 9 rows"):
        while (n := enumerator.next_rows()) > 0:
            out = torch.empty(n, k, dtype=torch.int64)
            rows += out[:enumerator.fill(out, torch.empty(n, dtype=torch.int64))].tolist()
    return rows


# ------------------------------------------------------------------------- bounded work, dense graphs
# Counting and uniform sampling bound their work per graph by max_visits steps (deterministic),
# so a small max_visits shows that an answer takes no enumeration, without timing anything.
PRUNED = ["edgeless", "isolated", "disconnected"]
C70_35 = math.comb(70, 35)  # 112186277816662845432 > 2^63 - 1


def one_graph(G):
    return GraphBatch.from_networkx([G])


def complete_minus(n, removed):
    G = nx.complete_graph(n)
    G.remove_edges_from(removed)
    return G


def brute_count(G, k, prune):
    return sum(keep_subset(G, c, prune) for c in itertools.combinations(range(G.number_of_nodes()), k))


@pytest.mark.parametrize("max_visits", [None, 1000])
@pytest.mark.parametrize("prune", PRUNED)
def test_issue_sampling_complete_graph_answers_at_once(prune, max_visits):
    """sample_k_subsets(K_60, 8, 2, prune) gave no result in 20 s (~10^9 subsets visited)."""
    rows = sample_k_subsets(one_graph(nx.complete_graph(60)), 8, 2, prune=prune, max_visits=max_visits,
                            generator=torch.Generator().manual_seed(0))
    assert rows.shape == (1, 2, 8)
    for row in rows[0].tolist():
        assert row == sorted(set(row)) and 0 <= row[0] and row[-1] < 60
    again = sample_k_subsets(one_graph(nx.complete_graph(60)), 8, 2, prune=prune, max_visits=max_visits,
                             generator=torch.Generator().manual_seed(0))
    assert torch.equal(rows, again)


@pytest.mark.parametrize("max_visits", [None, 1000])
@pytest.mark.parametrize("prune", PRUNED)
def test_issue_counting_complete_graph_reaches_the_overflow_error(prune, max_visits):
    """count_k_subsets(K_70, 35, prune) ran forever; the documented OverflowError is now raised."""
    with pytest.raises(OverflowError, match="more than a 64-bit count holds"):
        count_k_subsets(one_graph(nx.complete_graph(70)), 35, prune, max_visits=max_visits)
    if prune != "edgeless":  # counted exactly: the message gives the number
        with pytest.raises(OverflowError, match=f"graph 0 has {C70_35} '{prune}' 35-subsets"):
            count_k_subsets(one_graph(nx.complete_graph(70)), 35, prune, max_visits=max_visits)
    rows = sample_k_subsets(one_graph(nx.complete_graph(70)), 35, 3, prune=prune, max_visits=max_visits,
                            generator=torch.Generator().manual_seed(1))  # was an OverflowError for "edgeless"
    assert rows.shape == (1, 3, 35) and all(len(set(r)) == 35 for r in rows[0].tolist())


@pytest.mark.parametrize("prune", PRUNED)
def test_complete_graphs_keep_every_subset_without_enumerating(prune):
    for n, k in ((30, 15), (60, 8), (62, 31)):
        assert count_k_subsets(one_graph(nx.complete_graph(n)), k, prune, max_visits=1000).item() == math.comb(n, k)


@pytest.mark.parametrize("n", [12, 60])
def test_complete_graph_minus_a_star(n):
    """K_n minus the edges v-a, v-b, v-c: a subset is disconnected (or has an isolated vertex)
    iff it is v with >= 2 of a, b, c, or one non-edge alone (k = 2)."""
    G = complete_minus(n, [(0, 1), (0, 2), (0, 3)])
    for k in range(2, 9):
        dropped = 3 if k == 2 else math.comb(3, k - 1)
        expected = {"edgeless": math.comb(n, k) - (3 if k == 2 else 0), "isolated": math.comb(n, k) - dropped,
                    "disconnected": math.comb(n, k) - dropped}
        for prune in PRUNED:
            if n <= 12:
                assert brute_count(G, k, prune) == expected[prune]
            assert count_k_subsets(one_graph(G), k, prune, max_visits=10_000).item() == expected[prune], (k, prune)


@pytest.mark.parametrize("prune", PRUNED)
def test_dense_random_graphs_are_counted_through_their_complement(prune):
    G = nx.gnp_random_graph(70, 0.9, seed=1)
    with pytest.raises(OverflowError, match="more than a 64-bit count holds"):
        count_k_subsets(one_graph(G), 35, prune, max_visits=100_000)
    rows = sample_k_subsets(one_graph(G), 35, 4, prune=prune, max_visits=100_000,
                            generator=torch.Generator().manual_seed(2))
    assert all(keep_subset(G, r, prune) for r in rows[0].tolist())
    # G(24, 0.9), k = 8: the complement count equals the enumerated one (735471 subsets)
    small = one_graph(nx.gnp_random_graph(24, 0.9, seed=3))
    enumerated = count_k_subsets(small, 8, prune, max_visits=2**40)
    assert count_k_subsets(small, 8, prune, max_visits=64 * 50).item() == enumerated.item()


def test_unions_of_cliques_have_closed_forms():
    two = one_graph(nx.disjoint_union(nx.complete_graph(35), nx.complete_graph(35)))
    assert count_k_subsets(two, 35, "disconnected", max_visits=1000).item() == 2
    # "isolated": all but the 35-subsets with exactly one vertex in a clique: 2 * 35 * C(35, 34)
    with pytest.raises(OverflowError, match=f"graph 0 has {C70_35 - 2450} 'isolated' 35-subsets"):
        count_k_subsets(two, 35, "isolated", max_visits=1000)
    assert count_k_subsets(two, 8, "disconnected", max_visits=1000).item() == 2 * math.comb(35, 8)
    rows = sample_k_subsets(two, 35, 40, prune="disconnected", max_visits=1000,
                            generator=torch.Generator().manual_seed(3))[0]
    cliques = {tuple(range(35)), tuple(range(35, 70))}
    assert {tuple(r) for r in rows.tolist()} == cliques  # each row is a whole clique; 40 draws see both
    many = one_graph(nx.disjoint_union_all([nx.complete_graph(3)] * 20))  # 60 vertices
    triples = [nx.complete_graph(3)] * 5
    small = nx.disjoint_union_all(triples)
    for prune in PRUNED:
        for k in (2, 5, 8):
            assert count_k_subsets(one_graph(small), k, prune, max_visits=64).item() == brute_count(small, k, prune)
    # 20 triangles, k = 35: only with every triangle holding 0, 2 or 3 vertices (none isolated)
    expected = sum(math.comb(20, a) * math.comb(20 - a, b) * 3**a for a in range(21) for b in range(21)
                   if 2 * a + 3 * b == 35)
    assert count_k_subsets(many, 35, "isolated", max_visits=1000).item() == expected
    assert count_k_subsets(many, 35, "disconnected", max_visits=1000).item() == 0
    assert (sample_k_subsets(many, 35, 2, prune="disconnected", max_visits=1000) == -1).all()


@st.composite
def structured_graphs(draw, max_nodes=9):
    """Graphs that reach the structural counts: dense (complements of sparse graphs), unions of
    cliques, and cliques beside sparse or dense random components."""
    kind = draw(st.sampled_from(["dense", "cliques", "mixed", "random"]))
    seed = draw(st.integers(0, 2**16))
    n = draw(st.integers(1, max_nodes))
    if kind == "dense":
        return nx.complement(nx.gnp_random_graph(n, draw(st.floats(0, 0.4)), seed=seed))
    if kind == "random":
        return nx.gnp_random_graph(n, draw(st.floats(0, 1)), seed=seed)
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    parts = [nx.complete_graph(s) for s in sizes]
    if kind == "mixed":
        parts.append(nx.gnp_random_graph(draw(st.integers(1, 6)), draw(st.floats(0, 1)), seed=seed))
    return nx.disjoint_union_all(parts)


@settings(max_examples=150, deadline=None)
@given(structured_graphs(), st.integers(1, 6), st.sampled_from(PRUNED), st.booleans())
def test_structural_counts_match_brute_force(G, k, prune, complement):
    """Components (clique closed forms), the complement histograms and the per-component
    enumeration, each against itertools + networkx."""
    n = G.number_of_nodes()
    if k > n:
        return
    batch = one_graph(G)
    g = subsets_module._graph_of(batch, 0)
    labels = subsets_module._component_labels(batch)
    budget = subsets_module._Budget(10**8)
    if not complement:
        budget.complement = 0  # the components' enumeration instead
    expected = brute_count(G, k, prune)
    assert subsets_module._count_graph(g, labels, k, Prune(prune), 10**8) == expected
    structure = subsets_module._Structure(g, labels)
    assert subsets_module._structural_count(g, structure, k, Prune(prune), budget) == expected
    # the complement formulas hold for any graph, connected or not
    pieces = subsets_module._piece_counts(g, range(k, k + 1), Prune(prune), subsets_module._Budget(10**8))
    assert pieces[k] == (math.comb(n, k) - expected if prune == "edgeless" else expected)
    try:  # the public path with almost no budget: the structure alone, or a clear error
        assert count_k_subsets(batch, k, prune, max_visits=64).tolist() == [expected]
    except ValueError as error:
        assert "needs more than max_visits = 64 search steps" in str(error)


@settings(max_examples=60, deadline=None)
@given(structured_graphs(max_nodes=8), st.integers(1, 5), st.sampled_from(PRUNED), st.integers(0, 2**32 - 1))
def test_sampling_by_every_path_keeps_subsets_and_is_reproducible(G, k, prune, seed):
    n = G.number_of_nodes()
    batch = one_graph(G)
    kept = {c for c in itertools.combinations(range(n), k) if keep_subset(G, c, prune)}
    for max_visits in (None, 64, 640):  # the first search; rejection, counts, enumeration
        try:
            rows = sample_k_subsets(batch, k, 6, prune=prune, max_visits=max_visits,
                                    generator=torch.Generator().manual_seed(seed))
        except ValueError as error:  # a small max_visits may not suffice: the message says so
            assert max_visits is not None and "max_visits" in str(error)
            continue
        again = sample_k_subsets(batch, k, 6, prune=prune, max_visits=max_visits,
                                 generator=torch.Generator().manual_seed(seed))
        assert torch.equal(rows, again)
        if not kept:
            assert (rows == -1).all()
        else:
            assert all(tuple(r) in kept for r in rows[0].tolist())


def _uniformity(rows, kept):
    index = {c: i for i, c in enumerate(sorted(kept))}
    counts = np.zeros(len(index))
    for row in rows.tolist():
        counts[index[tuple(row)]] += 1
    assert counts.min() > 0
    return chisquare(counts).pvalue


@pytest.mark.parametrize("path", ["rejection", "rejection-known", "enumeration", "components"])
def test_every_sampling_path_is_uniform(path):
    M = subsets_module
    if path == "components":  # two cliques and a 5-cycle: a component in proportion to its subsets
        G = nx.disjoint_union_all([nx.complete_graph(4), nx.complete_graph(3), nx.cycle_graph(5)])
        prune, k = Prune.DISCONNECTED, 3
    elif path == "enumeration":  # few kept subsets: counted, then resolved by index
        G, prune, k = nx.path_graph(12), Prune.DISCONNECTED, 4
    else:
        G, prune, k = complete_minus(8, [(0, 1), (0, 2), (3, 4), (5, 6)]), Prune.ISOLATED, 3
    kept = {c for c in itertools.combinations(range(G.number_of_nodes()), k) if keep_subset(G, c, prune.value)}
    batch = one_graph(G)
    g = M._graph_of(batch, 0)
    num = 300 * len(kept)
    generator = torch.Generator().manual_seed(7)
    if path == "rejection":
        rows, exceeded = M._rejection(g, k, prune, num, 10**9, generator, M._Budget(10**9))
        assert not exceeded
    elif path == "components":
        structure = M._Structure(g, M._component_labels(batch))
        big = [c for c in range(len(structure.sizes)) if structure.sizes[c] >= k]
        counts = [sum(set(c) <= set(structure.vertices(b).tolist()) for c in kept) for b in big]
        rows = M._sample_components(g, structure, big, counts, k, num, prune, generator, M._Budget(10**9), "graph")
    else:  # too small a budget to enumerate this many kept subsets: rejection, in its free draws
        steps = 10**9 if path == "enumeration" else len(kept) - 1
        budget = M._Budget(steps)
        rows = M._sample_piece(g, k, len(kept), num, prune, generator, budget, "graph")
        assert (budget.left < steps) == (path == "enumeration")  # the enumeration spent steps
    assert _uniformity(rows, kept) > 1e-3


def test_work_bound_errors_name_the_graph_and_the_subsets():
    batch = GraphBatch.from_networkx([nx.complete_graph(5), nx.path_graph(200)])
    with pytest.raises(ValueError, match=r"counting the 'isolated' 8-subsets of graph 1 needs more than "
                                         r"max_visits = 5000 search steps.* C\(200, 8\) = 55098996177225 "):
        count_k_subsets(batch, 8, "isolated", max_visits=5000)
    with pytest.raises(ValueError, match=r"sampling 2 uniform 'isolated' 8-subsets of graph 1 needs more than "
                                         r"max_visits = 5000 steps.*C\(200, 8\) = 55098996177225"):
        sample_k_subsets(batch, 8, 2, prune="isolated", max_visits=5000, generator=torch.Generator().manual_seed(0))
    # a known count, too few kept for rejection and too many steps for the enumeration
    path = subsets_module._graph_of(batch, 1)
    with pytest.raises(ValueError, match=r"needs about \d+ random draws \(it keeps 193 of its C\(200, 8\) = "
                                         r"55098996177225 8-subsets\) or a search through its 193 kept subsets, more "
                                         r"than max_visits = 100"):
        subsets_module._sample_piece(path, 8, 193, 2, Prune.DISCONNECTED, torch.Generator().manual_seed(0),
                                     subsets_module._Budget(100), "graph 1")
    # the same calls with a larger max_visits finish (the bound is the only limit)
    assert count_k_subsets(batch, 8, "disconnected", max_visits=5000).tolist() == [0, 193]


def test_max_visits_is_checked():
    batch = small_batch()
    for call in (count_k_subsets, lambda *a, **kw: sample_k_subsets(a[0], a[1], 2, prune=a[2], **kw)):
        with pytest.raises(ValueError, match="max_visits must be >= 1"):
            call(batch, 3, "isolated", max_visits=0)
        with pytest.raises(TypeError, match="max_visits must be an int"):
            call(batch, 3, "isolated", max_visits=1.5)
    assert DEFAULT_MAX_VISITS == 2**25


def test_bounded_counting_is_thread_invariant_and_stops_where_the_graph_says():
    """A graph's bounded count stops iff its complete search takes more steps than the limit."""
    graphs = [nx.gnp_random_graph(30, 0.3, seed=s) for s in range(6)] + [nx.path_graph(40)]
    batch = GraphBatch.from_networkx(graphs)

    def bounded(prune, limit):
        return tuple(torch.from_numpy(a.astype(np.int64)) for a in _backend.call(
            "subsets_count_bounded", *subsets_module._arrays(batch), 5, prune.code, limit, 2**63 - 1))

    for prune in (Prune.EDGELESS, Prune.ISOLATED, Prune.DISCONNECTED):
        _, full_counts, full_steps, full_status = bounded(prune, 2**62)
        assert (full_status == 0).all()
        limit = int(full_steps.median())
        tasks, counts, steps, status = assert_thread_invariant(lambda: bounded(prune, limit))
        assert torch.equal(status == 0, full_steps <= limit) and set(status.tolist()) == {0, 2}
        for b, G in enumerate(graphs):
            if status[b] == 0:
                lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
                expected = len(k_subsets(one_graph(G), 5, prune)[0])  # the enumeration (vs brute force above)
                assert int(tasks[lo:hi].sum()) == int(counts[b]) == int(full_counts[b]) == expected
                assert steps[b] == full_steps[b]
            else:
                assert steps[b] > limit


def test_dense_sampling_and_counting_are_thread_invariant():
    G = complete_minus(40, [(i, i + 1) for i in range(0, 20, 2)])
    batch = GraphBatch.from_networkx([G, nx.gnp_random_graph(40, 0.9, seed=4), nx.path_graph(9)])
    for prune in PRUNED:
        assert_thread_invariant(lambda: sample_k_subsets(batch, 12, 30, prune=prune, max_visits=6400,
                                                         generator=torch.Generator().manual_seed(5)))
        assert_thread_invariant(lambda: count_k_subsets(batch, 12, prune, max_visits=6400))


@pytest.mark.parametrize("call", [
    lambda: sample_k_subsets(one_graph(nx.complete_graph(40)), 12, 50, prune="isolated", max_visits=64),
    lambda: count_k_subsets(one_graph(nx.gnp_random_graph(60, 0.5, seed=1)), 12, "disconnected"),
], ids=["rejection", "complement"])
def test_bounded_kernels_poll_for_interrupts(call):
    try:
        _testing.set_interrupt_countdown(2)
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        _testing.set_interrupt_countdown(0)


def test_cli_count_of_a_dense_graph_and_its_work_bound(tmp_path, capsys):
    from rpfast.cli import main

    dense = tmp_path / "dense.txt"
    dense.write_text("".join(f"{u} {v}\n" for u, v in complete_minus(70, [(0, 1)]).edges()))
    assert main(["subsets", str(dense), "--k", "12", "--prune", "disconnected", "--count", "--max-visits",
                 "1000", "--no-progress"]) == 0
    assert capsys.readouterr().out.split() == [str(math.comb(70, 12))]
    path = tmp_path / "path.txt"
    path.write_text("".join(f"{i} {i + 1}\n" for i in range(199)))
    with pytest.raises(SystemExit) as exit_info:
        main(["subsets", str(path), "--k", "8", "--prune", "isolated", "--count", "--max-visits", "1000",
              "--no-progress"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "graph 0 needs more than max_visits = 1000 search steps" in err
    assert "pass a larger --max-visits" in err  # the option's spelling, not the function's
