"""DFS/BFS orientations against per-graph, per-start SciPy (csgraph) and networkx loops.

Cases: every start vertex of every Tox21 molecule (about 145k searches), and one random
start for each of 1024 molecules, each molecule with its own random tiebreak ranking.
rpfast answers the random-start case in one batched call. For all starts the output is
[B, n_max, n_max], so on molecules of 1 to 132 atoms rpfast runs 32 size-sorted batches
(``GraphBatch.select``; built outside the timing) to keep the padding small.
"""
import networkx as nx
import numpy as np
import pytest
import torch

from benchmarks.baselines import traversal_loops as loops
from tests.helpers.reference import ranked_digraph
from rpfast.datasets import batch_from_smiles, load_tox21
from rpfast.ops import bfs_order, dfs_order

_CACHE = {}


def tox21():
    if "batch" not in _CACHE:
        batch, _ = batch_from_smiles(load_tox21().smiles, skip_invalid=True)
        rowptr, col = (t.numpy() for t in batch.undirected_csr())
        ptr = batch.ptr.numpy()
        mats = loops.per_graph_csr(rowptr, col, ptr)
        graphs = [nx.from_scipy_sparse_array(A) for A in mats]
        _CACHE.update(batch=batch, mats=mats, graphs=graphs)
    return _CACHE["batch"], _CACHE["mats"], _CACHE["graphs"]


def first_molecules(count):
    from rpfast.data import GraphBatch

    batch, mats, graphs = tox21()
    ptr = batch.ptr[: count + 1]
    edges = batch.edge_index[:, batch.batch[batch.edge_index[0]] < count]
    return GraphBatch(edges, ptr=ptr), mats[:count], graphs[:count]


CASES = ["all starts, every Tox21 molecule", "random start, 1024 molecules"]


@pytest.mark.parametrize("impl", ["rpfast", "scipy loop", "networkx loop"])
@pytest.mark.parametrize("search", ["dfs", "bfs"])
@pytest.mark.parametrize("case", CASES)
def test_orders(benchmark, case, search, impl):
    if case == CASES[0]:
        batch, mats, graphs = tox21()
        starts_tensor = "all"
        starts = [np.arange(A.shape[0]) for A in mats]
    else:
        batch, mats, graphs = first_molecules(1024)
        starts_tensor = torch.randint(0, 2**62, (batch.num_graphs, 1), generator=torch.Generator().manual_seed(0))
        starts_tensor = starts_tensor % batch.num_nodes.unsqueeze(1)
        starts = [starts_tensor[b].numpy() for b in range(batch.num_graphs)]
    # One random tiebreak ranking per molecule, shared by its samples.
    gen = torch.Generator().manual_seed(1)
    ranks = [torch.randperm(A.shape[0], generator=gen).numpy() for A in mats]
    P = batch.n_max if starts_tensor == "all" else 1
    tiebreak = torch.zeros((batch.num_graphs, P, batch.n_max), dtype=torch.int64)
    for b, rank in enumerate(ranks):
        tiebreak[b, :, :] = torch.from_numpy(np.concatenate([rank, np.arange(len(rank), batch.n_max)]))
    searches = sum(len(s) for s in starts)
    if impl == "rpfast":
        fn = dfs_order if search == "dfs" else bfs_order
        if starts_tensor == "all":
            buckets = []
            for chunk in torch.argsort(batch.num_nodes, stable=True).chunk(32):
                part = batch.select(chunk)
                buckets.append((part, tiebreak[chunk][:, :part.n_max, :part.n_max].contiguous()))
            run = lambda: [fn(part, "all", ties) for part, ties in buckets]  # noqa: E731
        else:
            run = lambda: fn(batch, starts_tensor, tiebreak)  # noqa: E731
    elif impl == "scipy loop":
        run = lambda: loops.scipy_orders(mats, starts, ranks, search == "dfs")  # noqa: E731
    else:
        if case == CASES[0]:
            pytest.skip("networkx needs minutes for 145k searches; timed on the 1024-molecule case")
        ranked = [ranked_digraph(G, rank) for G, rank in zip(graphs, ranks)]  # neighbours in rank order
        run = lambda: loops.networkx_orders(ranked, starts, search == "dfs")  # noqa: E731
    benchmark.group = f"{search.upper()} orders: {case}"
    benchmark.extra_info.update(impl=impl, items=searches)
    benchmark.pedantic(run, rounds=3 if impl == "rpfast" else 1, warmup_rounds=1 if impl == "rpfast" else 0,
                       iterations=1)


def test_scipy_baseline_agrees_on_connected_molecules():
    batch, mats, _ = first_molecules(64)
    gen = torch.Generator().manual_seed(1)
    for search, fn in (("dfs", dfs_order), ("bfs", bfs_order)):
        ranks = [torch.randperm(A.shape[0], generator=gen).numpy() for A in mats]
        tiebreak = torch.zeros((batch.num_graphs, 1, batch.n_max), dtype=torch.int64)
        for b, rank in enumerate(ranks):
            tiebreak[b, 0, :] = torch.from_numpy(np.concatenate([rank, np.arange(len(rank), batch.n_max)]))
        ours = fn(batch, torch.zeros(batch.num_graphs, 1, dtype=torch.int64), tiebreak)
        theirs = loops.scipy_orders(mats, [[0]] * len(mats), ranks, search == "dfs")
        for b, order in enumerate(theirs):
            if len(order) == mats[b].shape[0]:  # connected: no restart, SciPy's order is the full order
                assert ours[b, 0, :len(order)].tolist() == order.tolist()
