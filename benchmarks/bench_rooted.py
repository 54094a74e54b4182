"""The eval pass of RootedRP's fixed hash, the rooted part of `rpfast pairs`' default model, on
one block of root sets as its eval average runs it: every round, cosine and the pooling in one
`rooted_pool` call (what RootedRP runs where its rounds need no gradient) against the same
rounds one at a time, each a product with the neighbour weight, the `rooted_round` kernel and
a cosine (RootedRP's path before, and still the path of rounds that learn), against the
op's torch-composed form (what runs on a GPU without rpfast's CUDA build), and, where the CPU
runs AVX-512, against the same kernel from the AVX2 build (rpfast._C_avx2, what runs without
rpfast._C_avx512). All compute the same pooled states (float64 to 1e-8, checked before
timing); rounds alternate, one thread.

Shapes: 32 relabelings of a pair's graph in one batch (an eval chunk of the command), 64 root
sets per block, 16 rounds, widths 4 and 8 (the hash's width before and now): a sparse CFI
graph (64 vertices, degree 3, two roots) and a dense strongly regular one (49 vertices,
degree 18, two roots).
"""
import pytest
import torch

from benchmarks.paired import paired
from rpfast import _backend, _testing
from rpfast.datasets.pair_families import family_pairs
from rpfast.experiments.pairs.replicas import batch_of, relabeled
from rpfast.nn.rp.rooted import RootedRP
from rpfast.ops.gin import graph_csr
from rpfast.ops import rooted_pool
from rpfast.ops.rooted import rooted_pool_op

CASES = {"cfi": ("cfi", 10), "srg": ("srg", 5)}  # family, index: 64 vertices of degree 3; 49 of degree 18


def _block(case: str, width: int, dtype=torch.float32):
    family, index = CASES[case]
    pair = family_pairs(family)[index]
    graph = batch_of(relabeled(pair.g, pair.n, 32, torch.Generator().manual_seed(0)), pair.n)
    torch.manual_seed(0)
    model = RootedRP(1, width, 16, 2, learn_rounds=False, roots=2).to(dtype).eval()
    graph.x = graph.x.to(dtype)
    roots = next(iter(model.all_roots(graph)))[0]  # [64, B, 2]: the first block of root pairs
    return model, graph, roots


def _per_round(model: RootedRP, graph, roots):
    """The rounds one at a time (rooted_round per round, torch's products and cosines)."""
    start = model.embed(graph.x).t().contiguous().unsqueeze(-1)
    scale = model._neighbour_scale(graph, graph.x.dtype)
    marked = (graph.local_index.view(-1, 1, 1) == roots.transpose(0, 1)[graph.batch]).any(dim=-1)
    return model._rounds(start, scale, graph, marked)


def _composed(model: RootedRP, graph, roots):
    """rooted_pool's torch-composed form (rpfast/ops/rooted.py)."""
    tensors = [t.unsqueeze(0) for t in model.hash_tensors()]
    one_hash = torch.zeros(graph.num_graphs, dtype=torch.int64)
    return rooted_pool_op.composed(model.embed(graph.x), *tensors, model._neighbour_scale(graph, graph.x.dtype),
                                   roots, one_hash, graph.ptr, *graph_csr(graph))


def _avx2_build(model: RootedRP, graph, roots):
    """rooted_pool with its kernel from the module of every kernel (the AVX2 build), not from
    rpfast._C_avx512."""
    with _testing.without_avx512():
        return model.pooled(graph.x, graph)(roots)


BASELINES = {"round by round": _per_round, "torch-composed": _composed, "AVX2 build": _avx2_build}


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("baseline", sorted(BASELINES))
def test_rooted_pool_against_its_rounds_one_at_a_time(benchmark, case, width, baseline):
    if baseline == "AVX2 build" and "rooted_pool" not in _backend.AVX512_KERNELS:
        pytest.skip("needs rpfast._C_avx512 and a CPU with AVX-512")
    torch.set_num_threads(1)
    model, graph, roots = _block(case, width)
    pool = model.pooled(graph.x, graph)
    other = BASELINES[baseline]

    def agree(ours, theirs):
        exact = _block(case, width, torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(exact[0].pooled(exact[1].x, exact[1])(exact[2]), other(*exact),
                                       rtol=1e-8, atol=1e-8)  # 16 rounds amplify float64 rounding

    with torch.no_grad():
        benchmark.group = f"RootedRP eval block: {case}, 32 graphs x 64 root pairs x 16 rounds, width {width}"
        paired(benchmark, lambda: pool(roots), lambda: other(model, graph, roots), baseline, rounds=7, agree=agree)


def _ten_seeds(case: str, dtype):
    """A training forward's inputs for ten seeds of one pair: each seed's 64 graphs, hash and
    root pairs, and the same in one union batch with each graph's hash (``graph_hash``)."""
    family, index = CASES[case]
    pair = family_pairs(family)[index]
    generator = torch.Generator().manual_seed(0)
    per_seed = [batch_of(relabeled(pair.g, pair.n, 64, generator), pair.n) for _ in range(10)]
    for graph in per_seed:
        graph.x = graph.x.to(dtype)
    union = batch_of([e for graph in per_seed for e in _edges(graph, pair.n)], pair.n)
    union.x = union.x.to(dtype)
    hashes = []
    for seed in range(10):
        torch.manual_seed(seed)
        hashes.append(RootedRP(1, 8, 16, 2, learn_rounds=False, roots=2, train_roots=1).to(dtype).train())
    roots = [h.draw_roots(g.host_ptr.diff(), g.n_max, generator) for h, g in zip(hashes, per_seed)]
    graph_hash = torch.arange(10).repeat_interleave(64)
    stacked = [torch.stack(t) for t in zip(*(h.hash_tensors() for h in hashes))]
    starts = torch.cat([h.embed(g.x) for h, g in zip(hashes, per_seed)])
    scale = hashes[0]._neighbour_scale(union, dtype)

    def ours():
        return rooted_pool(starts, *stacked, scale, torch.cat(roots, dim=1), graph_hash, union)

    def theirs():
        return torch.cat([_per_round(h, g, r) for h, g, r in zip(hashes, per_seed, roots)], dim=1)
    return ours, theirs


@pytest.mark.parametrize("case", sorted(CASES))
def test_rooted_pool_in_a_training_step_of_ten_seeds(benchmark, case):
    """A training forward of a stack of ten seeds (64 graphs each, one root pair per graph, each
    seed its own hash, width 8): one rooted_pool call over all 640 graphs, each graph through its
    seed's hash, against each seed's rounds one at a time on its own 64 graphs (what a stack
    without a per-graph hash runs: ten passes of 16 rounds)."""
    torch.set_num_threads(1)

    def agree(ours, theirs):
        exact = _ten_seeds(case, torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(exact[0](), exact[1](), rtol=1e-8, atol=1e-8)

    with torch.no_grad():
        benchmark.group = f"RootedRP training forward: {case}, 10 seeds x 64 graphs, one root pair each, width 8"
        paired(benchmark, *_ten_seeds(case, torch.float32), "each seed round by round", rounds=9, agree=agree)


def _edges(graph, n: int):
    """The edge lists of a batch's graphs of ``n`` vertices (to rebuild them in one union batch)."""
    return [graph.edge_index[:, (graph.edge_index[0] >= b * n) & (graph.edge_index[0] < (b + 1) * n)] - b * n
            for b in range(graph.num_graphs)]
