"""k-subset enumeration against itertools / torch.combinations pipelines and rustworkx.

Datasets: every Tox21 molecule (RDKit heavy-atom graphs of ``rpfast.datasets.load_tox21()``),
a random sparse graph (n = 200, mean degree 4) and the 150 CSL graphs (n = 41). Each
benchmark enumerates the subsets (materialised, not just counted) and checks that every
implementation found the same number.
"""
import pytest
import torch

from benchmarks.baselines import subset_pipelines as base
from benchmarks.graphs import csl_full_batch
from rpfast.data import GraphBatch
from rpfast.datasets import batch_from_smiles, load_tox21
from rpfast.ops import count_k_subsets, k_subsets

_DATA = {}


def dataset(name):
    if name not in _DATA:
        if name == "Tox21":
            batch, _ = batch_from_smiles(load_tox21().smiles, skip_invalid=True)
        elif name == "random n=200 deg=4":
            gen = torch.Generator().manual_seed(0)
            edges = torch.randint(0, 200, (2, 400), generator=gen)
            batch = GraphBatch(torch.cat([edges, edges.flip(0)], dim=1), num_nodes=200)
        else:
            batch = csl_full_batch()
        rowptr, col = batch.undirected_csr()
        ptr = batch.ptr.tolist()
        edge_lists = []
        for b in range(batch.num_graphs):
            rows = torch.arange(ptr[b], ptr[b + 1])
            degree = rowptr[ptr[b] + 1:ptr[b + 1] + 1] - rowptr[ptr[b]:ptr[b + 1]]
            src = torch.repeat_interleave(rows - ptr[b], degree)
            edge_lists.append((torch.stack([src, col[rowptr[ptr[b]]:rowptr[ptr[b + 1]]]]), ptr[b + 1] - ptr[b]))
        _DATA[name] = (batch, edge_lists)
    return _DATA[name]


CONNECTED = [("Tox21", k) for k in (3, 4, 5, 6)] + [("random n=200 deg=4", k) for k in (3, 4, 5)] + \
            [("CSL", k) for k in (3, 4, 5, 6)]


@pytest.mark.parametrize("impl", ["rpfast", "rustworkx"])
@pytest.mark.parametrize("name, k", CONNECTED, ids=[f"{n}-k{k}" for n, k in CONNECTED])
def test_connected_subsets(benchmark, name, k, impl):
    batch, edge_lists = dataset(name)
    expected = int(count_k_subsets(batch, k, "disconnected").sum())
    if impl == "rpfast":
        run = lambda: k_subsets(batch, k, "disconnected")  # noqa: E731
        found = lambda result: len(result[0])  # noqa: E731
    else:
        pytest.importorskip("rustworkx")
        graphs = base.rustworkx_graphs(edge_lists)
        run = lambda: base.rustworkx_connected(graphs, k)  # noqa: E731
        found = lambda result: sum(len(r) for r in result)  # noqa: E731
    benchmark.group = f"connected k-subsets: {name}, k={k}"
    benchmark.extra_info.update(impl=impl, items=expected)
    result = benchmark.pedantic(run, rounds=3, warmup_rounds=1, iterations=1)
    assert found(result) == expected


# itertools needs all C(n, k) combinations in Python: only the sizes it can finish.
EDGELESS = [("Tox21", 3), ("random n=200 deg=4", 3), ("CSL", 3), ("CSL", 4)]


@pytest.mark.parametrize("impl", ["rpfast", "itertools+numpy", "torch.combinations"])
@pytest.mark.parametrize("name, k", EDGELESS, ids=[f"{n}-k{k}" for n, k in EDGELESS])
def test_subsets_with_an_edge(benchmark, name, k, impl):
    batch, edge_lists = dataset(name)
    expected = int(count_k_subsets(batch, k, "edgeless").sum())
    if impl == "rpfast":
        run = lambda: k_subsets(batch, k, "edgeless")  # noqa: E731
        found = lambda result: len(result[0])  # noqa: E731
    else:
        mats = base.adjacency_matrices(edge_lists)
        pipeline = base.itertools_edgeless if impl == "itertools+numpy" else base.torch_combinations_edgeless
        run = lambda: pipeline(mats, k)  # noqa: E731
        found = lambda result: sum(len(r) for r in result)  # noqa: E731
    benchmark.group = f"k-subsets with an edge: {name}, k={k}"
    benchmark.extra_info.update(impl=impl, items=expected)
    result = benchmark.pedantic(run, rounds=1 if impl != "rpfast" else 3, warmup_rounds=0, iterations=1)
    assert found(result) == expected
