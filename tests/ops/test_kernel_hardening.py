"""Regression tests for the kernel defects of the hardening audit (issue 8): crashes in
parallel regions, unbounded counting and memory, Ctrl-C, WL complexity, NaN, determinism."""
import itertools
import math
import signal
import subprocess
import sys
import textwrap
import time

import networkx as nx
import pytest
import torch

from tests.helpers.assertions import assert_thread_invariant
from rpfast import _testing
from rpfast.data import GraphBatch
from rpfast.nn import RPGIN
from rpfast.ops import (
    batch_norm_relu,
    count_k_subsets,
    dfs_order,
    get_memory_budget,
    iter_k_subsets,
    k_subsets,
    random_permutations,
    sample_k_subsets,
    set_memory_budget,
    wl_order,
)
from rpfast._validation import available_memory


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def complete_graph(n: int) -> GraphBatch:
    ei = torch.tensor(list(itertools.permutations(range(n), 2))).t()
    return GraphBatch(ei, num_nodes=n)


def path_graph(n: int) -> GraphBatch:
    ei = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    return GraphBatch(torch.cat([ei, ei.flip(0)], dim=1), num_nodes=n)


def star_graph(leaves: int) -> GraphBatch:
    ei = torch.stack([torch.zeros(leaves, dtype=torch.int64), torch.arange(1, leaves + 1)])
    return GraphBatch(torch.cat([ei, ei.flip(0)], dim=1), num_nodes=leaves + 1)


@pytest.fixture
def budget():
    """Set a memory budget for one test and restore the default afterwards."""
    yield set_memory_budget
    set_memory_budget(None)


# ------------------------------------------------------------------ 1. no abort, O(k) memory
def test_random_permutations_of_a_huge_graph_do_not_abort():
    result = run_python("""
        import resource, torch
        from rpfast.ops import random_permutations
        random_permutations([5], 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = random_permutations([2**40], 3, k=1)
        assert out.shape == (1, 3, 1) and 0 <= int(out.min()) and int(out.max()) < 2**40
        out = random_permutations(torch.tensor([10**8, 5]), 2, k=2)
        assert out.shape == (2, 2, 2)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) < 200_000  # KiB: far below the 800 MB an O(n) pool would need


def test_sparse_and_dense_fisher_yates_draw_the_same_rows():
    """Rows are identical whichever scratch (O(n) pool or O(k) table) the kernel picks."""
    gen = torch.Generator().manual_seed(3)
    sizes = torch.tensor([5000, 3, 0, 7000])
    short = random_permutations(sizes, 4, k=5, generator=gen)  # sparse path (n >> k)
    gen.manual_seed(3)
    full = random_permutations(sizes, 4, generator=gen)  # dense path, same seed
    assert torch.equal(short, full[:, :, :5])


def test_sample_k_subsets_on_a_huge_graph_fails_cleanly(budget):
    budget(2**30)
    with pytest.raises(ValueError, match="memory budget"):
        sample_k_subsets(torch.zeros(2, 0, dtype=torch.int64), 2, 3, num_nodes=2**40)


# ------------------------------------------------------------------ 4. counting stops early
def test_counting_stops_at_the_memory_budget(budget):
    budget(64 * 2**20)
    with pytest.raises(ValueError, match=r"more than \d+ 'disconnected' 8-subsets would need .* budget"):
        k_subsets(complete_graph(60), 8, prune="disconnected")


def test_count_overflow_is_raised_instead_of_spinning():
    with pytest.raises(OverflowError, match="64-bit"):
        count_k_subsets(path_graph(200), 40, prune="edgeless")


def test_closed_form_skips_match_enumeration():
    """Subtree skipping (kAll, kEdgeless with an edge) gives the enumerated counts."""
    g = nx.gnp_random_graph(14, 0.25, seed=1)
    batch = GraphBatch.from_networkx(g)
    for prune in ("none", "edgeless", "isolated", "disconnected"):
        for k in (1, 3, 5):
            rows, _ = k_subsets(batch, k, prune=prune)
            assert int(count_k_subsets(batch, k, prune=prune)[0]) == len(rows)


# ------------------------------------------------------------------ 5. Ctrl-C
def _rooted_eval():
    """RootedRP's eval average over every root pair of a 40-cycle: rooted_pool polls every round
    of every tile, from the worker threads (the module it runs from: rpfast._C_avx512 where the
    CPU has AVX-512)."""
    from rpfast.nn import RootedRP
    torch.manual_seed(0)
    model = RootedRP(1, 8, 4, 2, roots=2, learn_rounds=False).eval()
    graph = GraphBatch.from_networkx(nx.cycle_graph(40))
    with torch.no_grad():
        return model(torch.ones(40, 1), graph)


@pytest.fixture
def interrupt_after():
    yield _testing.set_interrupt_countdown
    _testing.set_interrupt_countdown(0)


@pytest.mark.parametrize("call", [
    lambda: k_subsets(complete_graph(12), 4, prune="disconnected"),
    lambda: k_subsets(complete_graph(12), 4, prune="isolated"),
    lambda: count_k_subsets(complete_graph(12), 5, prune="disconnected"),
    lambda: list(iter_k_subsets(star_graph(60), 3, prune="disconnected", chunk_size=10)),
    lambda: sample_k_subsets(complete_graph(12), 4, 50, prune="disconnected"),
    lambda: sample_k_subsets(complete_graph(12), 4, 5000, method="bfs"),
    lambda: wl_order(path_graph(5000)),
    lambda: dfs_order(path_graph(300), start="all"),
    lambda: random_permutations(torch.full((300,), 300), 4),
    pytest.param(lambda: _rooted_eval(), marks=pytest.mark.kernels),  # the composed path runs no kernel to poll
], ids=["enumerate-esu", "enumerate-lex", "count", "stream", "sample-uniform", "sample-grown", "wl", "dfs",
        "permutations", "rooted-rounds"])
def test_long_kernels_poll_for_interrupts(call, interrupt_after):
    interrupt_after(2)
    with pytest.raises(KeyboardInterrupt):
        call()
    interrupt_after(0)
    call()  # the flag is cleared: the next call runs normally


def test_ctrl_c_stops_a_long_count_within_a_second():
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import signal, networkx as nx
        # A test runner started in the background (`cmd &` in a script) hands its children
        # SIGINT ignored, and Python keeps an inherited SIG_IGN: restore the usual handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from rpfast.data import GraphBatch
        from rpfast.ops import count_k_subsets
        # No closed form applies to a random graph (K_48 has one now): the search runs for hours.
        graph = GraphBatch.from_networkx(nx.gnp_random_graph(48, 0.5, seed=0))
        print("ready", flush=True)
        count_k_subsets(graph, 14, prune="disconnected", max_visits=2**62)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert waited < 10  # generous: the kernel polls every few thousand search steps


# ------------------------------------------------------------------ 6. bounded streaming and sampling
def test_connected_streaming_is_bounded_by_the_chunk():
    result = run_python("""
        import resource, torch
        from rpfast.data import GraphBatch
        from rpfast.ops import iter_k_subsets
        ei = torch.stack([torch.zeros(400, dtype=torch.int64), torch.arange(1, 401)])
        star = GraphBatch(torch.cat([ei, ei.flip(0)], dim=1), num_nodes=401)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows = sum(len(c.subsets) for c in iter_k_subsets(star, 4, prune="disconnected", chunk_size=1000))
        print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """, timeout=300)
    assert result.returncode == 0, result.stderr
    rows, grown_kib = map(int, result.stdout.split())
    assert rows == math.comb(400, 3)
    assert grown_kib < 100_000  # the old code held the 10.6M-row task (~1 GB)


@pytest.mark.parametrize("prune", ["edgeless", "isolated", "disconnected"])
def test_streaming_small_chunks_equals_enumeration(prune):
    g = nx.gnp_random_graph(13, 0.35, seed=7)
    batch = GraphBatch.from_networkx([g, nx.cycle_graph(6), nx.empty_graph(3)])
    expected, _ = k_subsets(batch, 4, prune=prune)
    for chunk_size in (1, 7, 64):
        chunks = list(iter_k_subsets(batch, 4, prune=prune, chunk_size=chunk_size))
        assert all(len(c.subsets) <= chunk_size for c in chunks)
        assert torch.equal(torch.cat([c.subsets for c in chunks]), expected)


def test_uniform_pruned_sampling_stays_within_the_budget(budget):
    budget(64 * 2**20)
    result = run_python("""
        import resource, torch
        from rpfast.data import GraphBatch
        from rpfast.ops import sample_k_subsets, set_memory_budget
        set_memory_budget(64 * 2**20)
        ei = torch.stack([torch.zeros(400, dtype=torch.int64), torch.arange(1, 401)])
        star = GraphBatch(torch.cat([ei, ei.flip(0)], dim=1), num_nodes=401)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows = sample_k_subsets(star, 4, 200, prune="disconnected", generator=torch.Generator().manual_seed(0))
        assert bool((rows[0, :, 0] == 0).all())  # every connected 4-subset of a star holds the centre
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """, timeout=300)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) < 64 * 1024


def test_uniform_pruned_sampling_is_uniform():
    g = GraphBatch.from_networkx(nx.cycle_graph(7))
    rows = sample_k_subsets(g, 3, 7000, prune="disconnected", generator=torch.Generator().manual_seed(1))[0]
    counts = torch.unique(rows, dim=0, return_counts=True)[1]
    assert len(counts) == 7  # the 7 paths of 3 consecutive vertices
    assert int(counts.min()) > 850 and int(counts.max()) < 1150  # 1000 expected each, sd ~30


# ------------------------------------------------------------------ 7. WL complexity
def test_wl_order_on_long_paths_is_fast_and_symmetric():
    n = 100_000
    result = wl_order(path_graph(n))
    colours = result.colours
    assert torch.equal(colours, colours.flip(0))  # v and n-1-v are equivalent
    assert int(colours.max()) + 1 == n // 2  # and nothing else is
    assert result.num_orders == [2 ** (n // 2)]


def test_wl_colours_are_canonical_across_relabelings():
    g = nx.gnp_random_graph(30, 0.15, seed=4)
    perm = torch.randperm(30, generator=torch.Generator().manual_seed(0)).tolist()
    h = nx.relabel_nodes(g, {v: perm[v] for v in g.nodes})
    cg = wl_order(GraphBatch.from_networkx(g)).colours
    ch = wl_order(GraphBatch.from_networkx(h)).colours
    assert all(int(cg[v]) == int(ch[perm[v]]) for v in range(30))


# ------------------------------------------------------------------ 8. budget from the machine
def test_default_budget_fits_the_machine(budget):
    budget(None)
    assert get_memory_budget() <= max(available_memory(), 64 * 2**20)
    with pytest.raises(ValueError, match=r"dense_adj\(\) .* memory budget"):
        GraphBatch(torch.zeros(2, 0, dtype=torch.int64), batch=torch.zeros(2_000_000, dtype=torch.int64)).dense_adj()


# ------------------------------------------------------------------ 10. NaN propagates
def test_batch_norm_relu_propagates_nan_like_torch():
    x = torch.randn(6, 3)
    x[2, 1] = float("nan")
    x[4, 0] = float("inf")
    w, b = torch.ones(3), torch.zeros(3)
    for training in (True, False):
        rm, rv = torch.zeros(3), torch.ones(3)
        ours = batch_norm_relu(x, w, b, rm.clone(), rv.clone(), training)
        ref = torch.relu(torch.nn.functional.batch_norm(x, rm.clone(), rv.clone(), w, b, training))
        assert torch.equal(ours.isnan(), ref.isnan())
        torch.testing.assert_close(ours, ref, equal_nan=True)


# ------------------------------------------------------------------ 12. reproducible RP-GIN gradients
@pytest.mark.kernels
def test_rpgin_gradients_are_bitwise_identical_across_threads():
    from rpfast.datasets import csl_batch, csl_dataset

    graphs, labels = csl_dataset(seed=0)
    batch = csl_batch(graphs, list(range(60)))

    def gradients():
        torch.manual_seed(0)
        model = RPGIN(1, 16, 5, 10, id_dim=10, generator=torch.Generator().manual_seed(0))
        loss = torch.nn.functional.cross_entropy(model(batch.x, batch), labels[:60])
        loss.backward()
        return [p.grad for p in model.parameters()]

    assert_thread_invariant(gradients, threads=(1, 2, 1, 2))


# ------------------------------------------------------------------ found by the fuzz suite
def test_sparse_tensors_are_refused_with_a_type_error():
    g = GraphBatch(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(TypeError, match="to_dense"):
        random_permutations(torch.tensor([3]).to_sparse())
    with pytest.raises(TypeError, match="to_dense"):
        dfs_order(g, start=torch.zeros(1, 1, dtype=torch.long).to_sparse())
    with pytest.raises(TypeError, match="to_dense"):
        wl_order(g, x=torch.ones(2, 1).to_sparse())


def test_gin_models_on_an_empty_batch():
    from rpfast.nn import GIN

    empty = GraphBatch.from_edge_lists([])
    assert GIN(1, 4, 2, 3).eval()(torch.zeros(0, 1), empty).shape == (0, 3)
    assert RPGIN(0, 4, 2, 3, id_dim=2).eval()(None, empty).shape == (0, 3)


def test_flags_and_sizes_are_checked():
    from rpfast.nn import GIN

    with pytest.raises(ValueError, match="dropout"):
        GIN(1, 1, 1, 1, dropout=torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="memory budget"):
        GIN(2**62, 1, 1, 1)


def test_grown_single_vertices_respect_pruning():
    g = GraphBatch.from_edge_lists([(torch.tensor([[0, 1], [1, 0]]), 3)])
    for prune in ("edgeless", "isolated"):
        assert bool((sample_k_subsets(g, 1, 4, "bfs", prune=prune) == -1).all())
    assert bool((sample_k_subsets(g, 1, 4, "dfs", prune="disconnected") >= 0).all())
