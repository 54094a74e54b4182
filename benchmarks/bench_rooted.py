"""The eval pass of RootedRP's fixed hash, the rooted part of `rpfast pairs`' default model, on
one block of root sets as its eval average runs it: every round, cosine and the pooling in one
`rooted_pool` call (what RootedRP runs where its rounds need no gradient) against the same
rounds one at a time, each a product with the neighbour weight, the `rooted_round` kernel and
a cosine (RootedRP's path before, and still the path of rounds that learn), and against the
op's torch-composed form (what runs on a GPU without rpfast's CUDA build). All three compute
the same pooled states (float64 to 1e-10, checked before timing); rounds alternate, one thread.

Shapes: 32 relabelings of a pair's graph in one batch (an eval chunk of the command), 64 root
sets per block, 16 rounds, widths 4 and 8 (the hash's width before and now): a sparse CFI
graph (64 vertices, degree 3, two roots) and a dense strongly regular one (49 vertices,
degree 18, two roots).
"""
import pytest
import torch

from benchmarks.paired import paired
from rpfast.datasets.pair_families import family_pairs
from rpfast.experiments.pairs.replicas import batch_of, relabeled
from rpfast.nn.rp.rooted import RootedRP
from rpfast.ops.gin import graph_csr
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


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("baseline", ["round by round", "torch-composed"])
def test_rooted_pool_against_its_rounds_one_at_a_time(benchmark, case, width, baseline):
    torch.set_num_threads(1)
    model, graph, roots = _block(case, width)
    pool = model.pooled(graph.x, graph)
    other = _per_round if baseline == "round by round" else _composed

    def agree(ours, theirs):
        exact = _block(case, width, torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(exact[0].pooled(exact[1].x, exact[1])(exact[2]), other(*exact),
                                       rtol=1e-10, atol=1e-10)

    with torch.no_grad():
        benchmark.group = f"RootedRP eval block: {case}, 32 graphs x 64 root pairs x 16 rounds, width {width}"
        paired(benchmark, lambda: pool(roots), lambda: other(model, graph, roots), baseline, rounds=7, agree=agree)
