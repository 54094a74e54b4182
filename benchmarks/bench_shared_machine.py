"""Speed on a shared machine (issue 12): the kernels and an RP-GIN step while another process
keeps one core busy (a DataLoader worker, a second job). Each case runs with and without the
neighbour; the report compares rpfast with its baseline under the same load. The training
cases run at torch's default thread count (both cores), as a user's script would."""
import multiprocessing
import time

import pytest
import torch

from benchmarks.graphs import csl_full_batch
from rpfast.ops import k_subsets, permute_adjacency, random_permutations


def _spin(stop):
    while not stop.is_set():
        sum(range(10_000))


@pytest.fixture(params=["idle", "busy neighbour"])
def load(request):
    if request.param == "idle":
        yield request.param
        return
    stop = multiprocessing.get_context("fork").Event()
    proc = multiprocessing.get_context("fork").Process(target=_spin, args=(stop,), daemon=True)
    proc.start()
    time.sleep(0.2)
    yield request.param
    stop.set()
    proc.join(5)


@pytest.mark.parametrize("impl", ["rpfast", "rustworkx"])
def test_connected_subsets_shared(benchmark, load, impl):
    from bench_subsets import dataset
    from benchmarks.baselines import subset_pipelines as base

    batch, edge_lists = dataset("CSL")
    if impl == "rpfast":
        run = lambda: k_subsets(batch, 4, "disconnected")  # noqa: E731
    else:
        pytest.importorskip("rustworkx")
        graphs = base.rustworkx_graphs(edge_lists)
        run = lambda: base.rustworkx_connected(graphs, 4)  # noqa: E731
    benchmark.group = f"connected k-subsets: CSL, k=4 ({load})"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(run, rounds=5, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "torch"])
def test_permute_shared(benchmark, load, impl):
    graph = csl_full_batch()
    adj = graph.dense_adj()
    perms = random_permutations(graph.num_nodes, 16, generator=torch.Generator().manual_seed(0))
    if impl == "rpfast":
        run = lambda: permute_adjacency(adj, perms)  # noqa: E731
    else:
        b = torch.arange(adj.shape[0]).view(-1, 1, 1, 1)
        run = lambda: adj[b, perms.unsqueeze(-1), perms.unsqueeze(-2)]  # noqa: E731
    benchmark.group = f"permute_adjacency: CSL x 16 relabelings ({load})"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(run, rounds=20, warmup_rounds=2, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "pyg+torch"])
def test_rpgin_epoch_shared(benchmark, load, impl):
    from bench_rpgin_epoch import training_epoch

    epoch = training_epoch(impl)
    benchmark.group = f"RP-GIN training epoch: CSL 120 graphs, batch 16, Adam ({load})"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(epoch, rounds=8, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "paper code"])
def test_csl_paper_protocol_shared(benchmark, load, impl):
    pytest.importorskip("scipy")
    from bench_csl_protocol import _paper_epoch, _rpfast_epoch
    from rpfast.datasets import csl_dataset

    graphs, labels = csl_dataset()
    epoch = (_rpfast_epoch if impl == "rpfast" else _paper_epoch)(graphs, labels)
    benchmark.group = f"RP-GIN epoch at the paper's CSL protocol ({load})"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(epoch, rounds=20, warmup_rounds=2, iterations=1)
