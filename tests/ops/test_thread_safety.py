"""Thread safety: the same op called from several Python threads at once gives exactly the
results of sequential calls (kernels release the GIL, so the calls really overlap)."""
from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import pytest
import torch

from tests.helpers.assertions import bitwise_equal
from rpfast.data import GraphBatch
from rpfast.ops import (
    bfs_order,
    count_k_subsets,
    dfs_order,
    gin_aggregate,
    k_subsets,
    permute_adjacency,
    random_permutations,
    sample_k_subsets,
    segment_sum,
    wl_order,
)

THREADS = 4
CALLS = 20


def _graphs() -> GraphBatch:
    gen = torch.Generator().manual_seed(0)
    graphs = [nx.gnm_random_graph(30 + i, 60 + 3 * i, seed=i) for i in range(6)]
    graphs += [nx.cycle_graph(41), nx.path_graph(25), nx.star_graph(12), nx.empty_graph(5)]
    batch = GraphBatch.from_networkx(graphs)
    return GraphBatch(batch.edge_index, x=torch.randn(batch.total_nodes, 8, generator=gen), ptr=batch.ptr)


GRAPH = _graphs()


def _permute_fwd_bwd(i):
    gen = torch.Generator().manual_seed(100 + i)
    adj = torch.randn(GRAPH.num_graphs, GRAPH.n_max, GRAPH.n_max, 2, generator=gen, dtype=torch.float64)
    adj.requires_grad_()
    perms = random_permutations(GRAPH.num_nodes, 3, generator=gen)
    out = permute_adjacency(adj, perms)
    weight = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (out * weight).sum().backward()
    return out.detach(), adj.grad


def _gin_aggregate(i):
    gen = torch.Generator().manual_seed(200 + i)
    x = torch.randn(3, GRAPH.total_nodes, 16, generator=gen, requires_grad=True)
    eps = torch.tensor(0.1 * i, requires_grad=True)
    out = gin_aggregate(x, GRAPH, eps)
    out.square().sum().backward()
    return out.detach(), x.grad, eps.grad


def _k_subsets(i):
    prune = ["none", "edgeless", "isolated", "disconnected"][i % 4]
    sub = GRAPH.select([i % 6, 7])
    return k_subsets(sub, 3 + i % 2, prune), count_k_subsets(sub, 3, prune)


def _sample_k_subsets(i):
    method = ["uniform", "bfs", "dfs"][i % 3]
    return sample_k_subsets(GRAPH, 4, 16, method, prune="disconnected" if method == "uniform" else "none",
                            generator=torch.Generator().manual_seed(300 + i))


def _dfs_order(i):
    gen = torch.Generator().manual_seed(400 + i)
    return (dfs_order(GRAPH, "random", num_samples=4, generator=gen),
            bfs_order(GRAPH, "all", k=5 + i % 3))


def _wl_order(i):
    x = None if i % 2 else (torch.arange(GRAPH.total_nodes) % (2 + i % 3)).float().unsqueeze(1)
    result = wl_order(GRAPH, x=x)
    return result.order, result.colours, result.log_num_orders, result.num_orders


def _random_permutations(i):
    gen = torch.Generator().manual_seed(500 + i)  # each call owns its generator
    return random_permutations(GRAPH.num_nodes, 8, k=None if i % 2 else 6, generator=gen)


def _segment_sum(i):
    x = torch.randn(2, GRAPH.total_nodes, 5, generator=torch.Generator().manual_seed(600 + i), requires_grad=True)
    out = segment_sum(x, GRAPH.ptr)
    out.square().sum().backward()
    return out.detach(), x.grad


OPS = {
    "permute_adjacency fwd+bwd": _permute_fwd_bwd,
    "gin_aggregate fwd+bwd": _gin_aggregate,
    "k_subsets": _k_subsets,
    "sample_k_subsets": _sample_k_subsets,
    "dfs_order/bfs_order": _dfs_order,
    "wl_order": _wl_order,
    "random_permutations": _random_permutations,
    "segment_sum fwd+bwd": _segment_sum,
}


@pytest.mark.parametrize("name", list(OPS))
def test_concurrent_calls_match_sequential(name):
    fn = OPS[name]
    calls = list(range(THREADS * CALLS))
    sequential = [fn(i) for i in calls]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        concurrent = list(pool.map(fn, calls))
    mismatched = [i for i in calls if not bitwise_equal(sequential[i], concurrent[i])]
    assert not mismatched, f"{name}: calls {mismatched[:10]} differ when run from {THREADS} threads at once"


def test_all_ops_at_once():
    """Different ops interleaved across threads: still the sequential results."""
    jobs = [(name, i) for i in range(6) for name in OPS]
    sequential = [OPS[name](i) for name, i in jobs]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        concurrent = list(pool.map(lambda job: OPS[job[0]](job[1]), jobs))
    bad = [job for job, a, b in zip(jobs, sequential, concurrent) if not bitwise_equal(a, b)]
    assert not bad, f"results differ under concurrency: {bad[:10]}"


def test_cold_graph_caches_from_many_threads():
    """A fresh GraphBatch whose CSR/dense caches are first built by concurrent calls."""
    def views(graph):
        rowptr, col = graph.undirected_csr()
        return (graph.rowptr, graph.col, graph.t_rowptr, graph.t_col, rowptr, col, graph.dense_adj(),
                graph.dense_x(), gin_aggregate(graph.x, graph), wl_order(graph).colours)

    expected = views(GraphBatch(GRAPH.edge_index.clone(), x=GRAPH.x.clone(), ptr=GRAPH.ptr.clone()))
    for _ in range(5):
        fresh = GraphBatch(GRAPH.edge_index.clone(), x=GRAPH.x.clone(), ptr=GRAPH.ptr.clone())
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            results = list(pool.map(lambda _: views(fresh), range(THREADS * 2)))
        assert all(bitwise_equal(r, expected) for r in results)
