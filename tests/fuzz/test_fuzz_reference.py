"""Valid random inputs against simple, obviously-correct references.

torch indexing for the permutation gathers (tests/helpers/reference.py), dense matrix products for
the GIN aggregation and layers, ``relu(F.batch_norm(...))`` for the fused BatchNorm,
itertools + networkx for the subsets, networkx traversals for the DFS/BFS orders, a plain
Python colour refinement for 1-WL, PyTorch Geometric for GraphBatch's views and GINConv.
Inputs include empty graphs, single and isolated vertices, self-loops, multi-edges, padded
batches of mixed sizes and non-contiguous tensors. Every call is counted per op.
"""
import copy
import itertools
import math

import networkx as nx
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzzing
from tests.helpers.assertions import assert_backward_matches
from tests.fuzz.fuzzing import fuzz_settings
from tests.helpers.reference import (k_subsets_reference, keep_subset, nx_graph, permute_adjacency_reference,
                       permute_nodes_reference, traversal_order_reference)
from rpfast import ops
from rpfast.data import GraphBatch
from rpfast.nn import GIN, RPGIN, GINConv, PiSGD, RelationalPooling
from rpfast.nn.gin import batch_norm_arguments
from tests.helpers.strategies import batch_sizes, graph_lists, permuted_batches

PRUNES = ["none", "edgeless", "isolated", "disconnected"]


def count(*names):
    for name in names:
        fuzzing.count(name, "reference")


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values in non-contiguous storage (every other element of a bigger buffer)."""
    if t.dim() == 0:
        return t
    big = torch.zeros(*t.shape, 2, dtype=t.dtype)
    big[..., 0] = t
    return big[..., 0]


def maybe_noncontiguous(t, flag):
    return noncontiguous(t) if flag else t


def grads(out, ref, g, inputs, ref_inputs):
    """Gradients of sum(out * g) and sum(ref * g); an input the graph does not reach gets zeros."""
    a = torch.autograd.grad((out * g).sum(), inputs, allow_unused=True) if out.requires_grad else [None] * len(inputs)
    b = torch.autograd.grad((ref * g).sum(), ref_inputs, allow_unused=True) if ref.requires_grad else \
        [None] * len(ref_inputs)
    zero = [torch.zeros_like(t) for t in inputs]
    return ([z if v is None else v for v, z in zip(a, zero)], [z if v is None else v for v, z in zip(b, zero)])


def randn(shape, dtype=torch.float64, seed=0):
    """Reproducible normal samples (the fuzz inputs must not depend on torch's global RNG)."""
    return torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ------------------------------------------------------------------------ graphs


def incoming_matrix(batch: GraphBatch, dtype) -> torch.Tensor:
    """M[i, j] = number of edges j -> i (dense, multi-edges counted)."""
    N = batch.total_nodes
    M = torch.zeros(N, N, dtype=dtype)
    for j, i in batch.edge_index.t().tolist():
        M[i, j] += 1
    return M


# ------------------------------------------------------------------------ permutations
@fuzz_settings(500)
@given(permuted_batches(channels=True), st.booleans(), st.booleans(), st.booleans(), st.sampled_from([torch.float32, torch.float64]))
def test_permute_adjacency(case, squeeze, noncontig, pass_sizes, dtype):
    adj, perms, sizes = case
    count("permute_adjacency")
    adj = adj.to(dtype)
    if squeeze:
        adj = adj[..., 0]
    a1 = maybe_noncontiguous(adj, noncontig).requires_grad_()
    a2 = adj.detach().clone().requires_grad_()
    out = ops.permute_adjacency(a1, maybe_noncontiguous(perms, noncontig), sizes if pass_sizes else None)
    ref = permute_adjacency_reference(a2 if not squeeze else a2.unsqueeze(-1), perms)
    ref = ref[..., 0] if squeeze else ref
    assert out.shape == ref.shape
    assert torch.equal(out, ref)
    assert_backward_matches(out, ref, randn(out.shape, dtype, seed=1), [(a1, a2)])


@fuzz_settings(400)
@given(permuted_batches(channels=False), st.booleans(), st.booleans(), st.sampled_from([torch.float32, torch.float64]))
def test_permute_nodes(case, squeeze, noncontig, dtype):
    x, perms, sizes = case
    count("permute_nodes")
    x = x.to(dtype)
    if squeeze:
        x = x[..., 0]
    x1 = maybe_noncontiguous(x, noncontig).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    out = ops.permute_nodes(x1, maybe_noncontiguous(perms, noncontig), sizes)
    ref = permute_nodes_reference(x2 if not squeeze else x2.unsqueeze(-1), perms)
    ref = ref[..., 0] if squeeze else ref
    assert torch.equal(out, ref)
    assert_backward_matches(out, ref, randn(out.shape, dtype, seed=1), [(x1, x2)])


@fuzz_settings(400)
@given(batch_sizes(max_graphs=5, max_nodes=12), st.integers(1, 4), st.one_of(st.none(), st.integers(0, 14)),
       st.integers(0, 2**32 - 1))
def test_random_permutations(sizes_nmax, samples, k, seed):
    sizes, _ = sizes_nmax
    count("random_permutations")
    out = ops.random_permutations(sizes, samples, k=k, generator=torch.Generator().manual_seed(seed))
    K = (int(sizes.max()) if len(sizes) else 0) if k is None else k
    assert out.shape == (len(sizes), samples, K) and out.dtype == torch.int64
    for b, n in enumerate(sizes.tolist()):
        for row in out[b].tolist():
            take = min(n, K)
            assert sorted(row[:take]) == sorted(set(row[:take])) and all(0 <= v < n for v in row[:take])
            assert row[take:] == [-1] * (K - take)
    again = ops.random_permutations(sizes, samples, k=k, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(out, again)


# ------------------------------------------------------------------------ GIN kernels
@fuzz_settings(300)
@given(graph_lists(max_nodes=9), st.integers(0, 3), st.integers(1, 5), st.floats(-2, 2), st.sampled_from(
    ["float", "tensor", "grad"]), st.booleans(), st.sampled_from([torch.float32, torch.float64]))
def test_gin_aggregate(graphs, R, F_, eps, eps_kind, noncontig, dtype):
    count("gin_aggregate")
    batch = GraphBatch.from_edge_lists(graphs)
    N = batch.total_nodes
    shape = (R, N, F_) if R else (N, F_)
    x = randn(shape, dtype)
    x1 = maybe_noncontiguous(x, noncontig).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    e1 = eps if eps_kind == "float" else torch.tensor(eps, dtype=dtype, requires_grad=eps_kind == "grad")
    e2 = torch.tensor(eps, dtype=dtype, requires_grad=eps_kind == "grad")
    out = ops.gin_aggregate(x1, batch, e1)
    ref = (1 + e2) * x2 + incoming_matrix(batch, dtype) @ x2
    tol = {} if dtype == torch.float64 else {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(out, ref, **tol)
    assert_backward_matches(out, ref, randn(shape, dtype, seed=1),
                            [(x1, x2)] + ([(e1, e2)] if eps_kind == "grad" else []), **tol)


def bn_reference(h, bn, training):
    """relu(BatchNorm1d(h)) through torch's own module (handles momentum=None too)."""
    return torch.relu(bn.train(training)(h))


@fuzz_settings(200)
@given(graph_lists(max_nodes=6, min_graphs=1), st.integers(1, 2), st.integers(1, 4), st.integers(1, 3),
       st.booleans(), st.floats(-0.5, 0.5), st.sampled_from([0.1, 0.5, None]), st.integers(0, 2**16))
def test_gin_mlp(graphs, R, H, L, training, eps, momentum, seed):
    batch = GraphBatch.from_edge_lists(graphs)
    N = batch.total_nodes
    if training and R * N < 2:
        return
    count("gin_mlp")
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(R, N, H, dtype=torch.float64, generator=gen)
    weights = [torch.randn(H, H, dtype=torch.float64, generator=gen) for _ in range(L - 1)]
    norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(H, momentum=momentum).double() for _ in range(L))
    for bn in norms:
        bn.weight.data.uniform_(0.5, 1.5, generator=gen)
        bn.bias.data.uniform_(-0.5, 0.5, generator=gen)
        bn.running_mean.uniform_(-1, 1, generator=gen)
        bn.running_var.uniform_(0.5, 2, generator=gen)
    ref_norms = copy.deepcopy(norms)
    z1, z2 = z.clone().requires_grad_(), z.clone().requires_grad_()
    w1 = [w.clone().requires_grad_() for w in weights]
    w2 = [w.clone().requires_grad_() for w in weights]
    e1 = torch.tensor([eps], dtype=torch.float64, requires_grad=True)
    e2 = torch.tensor([eps], dtype=torch.float64, requires_grad=True)
    out = ops.gin_mlp(z1, batch, e1, w1, training=training, **batch_norm_arguments(norms, training))
    a = (1 + e2) * z2 + incoming_matrix(batch, torch.float64) @ z2
    h = bn_reference(a.reshape(R * N, H), ref_norms[0], training)
    for stage in range(1, L):
        h = bn_reference(h @ w2[stage - 1].t(), ref_norms[stage], training)
    ref = h.reshape(R, N, H)
    torch.testing.assert_close(out, ref)
    for bn, rbn in zip(norms, ref_norms):
        torch.testing.assert_close(bn.running_mean, rbn.running_mean)
        torch.testing.assert_close(bn.running_var, rbn.running_var)
        assert int(bn.num_batches_tracked) == int(rbn.num_batches_tracked)
    g = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    assert_backward_matches(out, ref, g, [(z1, z2), (e1, e2), *zip(w1, w2),
                                          *((bn.weight, rbn.weight) for bn, rbn in zip(norms, ref_norms)),
                                          *((bn.bias, rbn.bias) for bn, rbn in zip(norms, ref_norms))])


@fuzz_settings(400)
@given(st.lists(st.integers(0, 5), min_size=0, max_size=2), st.integers(1, 5), st.booleans(),
       st.sampled_from([0.1, 0.0, 1.0]), st.sampled_from([1e-5, 1e-3]), st.integers(0, 3), st.booleans(),
       st.integers(0, 2**16))
def test_batch_norm_relu(lead, H, training, momentum, eps, specials, noncontig, seed):
    """Including NaN/Inf entries: relu(batch_norm(x)) propagates NaN, so must the fused op."""
    rows = math.prod(lead)
    if training and rows < 2:
        return
    count("batch_norm_relu")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, H, dtype=torch.float64, generator=gen)
    flat = x.view(-1)
    for _ in range(specials if flat.numel() else 0):
        i = int(torch.randint(0, flat.numel(), (1,), generator=gen))
        flat[i] = [float("nan"), float("inf"), -float("inf")][i % 3]
    w = torch.rand(H, dtype=torch.float64, generator=gen) + 0.5
    b = torch.randn(H, dtype=torch.float64, generator=gen)
    rm1, rv1 = torch.randn(H, dtype=torch.float64, generator=gen), torch.rand(H, dtype=torch.float64, generator=gen) + 0.5
    rm2, rv2 = rm1.clone(), rv1.clone()
    x1 = maybe_noncontiguous(x, noncontig).requires_grad_()
    x2 = x.clone().requires_grad_()
    w1, b1, w2, b2 = (t.clone().requires_grad_() for t in (w, b, w, b))
    out = ops.batch_norm_relu(x1, w1, b1, rm1, rv1, training, momentum, eps)
    ref = torch.relu(F.batch_norm(x2.reshape(-1, H), rm2, rv2, w2, b2, training, momentum, eps)).reshape(x.shape)
    torch.testing.assert_close(out, ref, equal_nan=True)
    torch.testing.assert_close(rm1, rm2, equal_nan=True)
    torch.testing.assert_close(rv1, rv2, equal_nan=True)
    if specials == 0:
        g = torch.randn(x.shape, dtype=torch.float64, generator=gen)
        ours, theirs = grads(out, ref, g, [x1, w1, b1], [x2, w2, b2])
        for a, r in zip(ours, theirs):
            torch.testing.assert_close(a, r)


@fuzz_settings(300)
@given(st.lists(st.integers(0, 6), max_size=6), st.integers(0, 3), st.integers(0, 4), st.booleans())
def test_segment_sum(sizes, R, F_, noncontig):
    count("segment_sum")
    ptr = torch.tensor([0] + sizes, dtype=torch.int64).cumsum(0)
    N = int(ptr[-1])
    shape = (R, N, F_) if R else (N, F_)
    x = randn(shape)
    x1 = maybe_noncontiguous(x, noncontig).requires_grad_()
    x2 = x.clone().requires_grad_()
    out = ops.segment_sum(x1, ptr)
    if not sizes:
        assert out.shape == (*shape[:-2], 0, F_)
        return
    ref = torch.stack([x2[..., ptr[b]:ptr[b + 1], :].sum(-2) for b in range(len(sizes))], dim=-2) if sizes else \
        x2.new_zeros(*shape[:-2], 0, F_)
    torch.testing.assert_close(out, ref)
    g = randn(out.shape, seed=1)
    ours, theirs = grads(out, ref, g, [x1], [x2])
    torch.testing.assert_close(ours[0], theirs[0])


@fuzz_settings(300)
@given(graph_lists(max_nodes=9), st.integers(1, 20), st.booleans(), st.booleans(),
       st.sampled_from([torch.float32, torch.float64]))
def test_max_pools(graphs, F_, ties, noncontig, dtype):
    """neighbour_max / graph_max against scatter_reduce("amax"), values and gradients (ties too)."""
    count("neighbour_max")
    count("graph_max")
    batch = GraphBatch.from_edge_lists(graphs)
    N = batch.total_nodes
    x = randn((N, F_), dtype)
    if ties:  # tied maxima; never exactly 0, where torch's amax backward with include_self=False
        x = x.round() + 0.5  # also counts the discarded initial zero as a tie (graph_max does not)
    source, target = batch.edge_index
    for op, reference in (
            (ops.neighbour_max, lambda v: v.scatter_reduce(0, target.unsqueeze(1).expand(-1, F_), v[source], "amax",
                                                           include_self=True)),
            (ops.graph_max, lambda v: v.new_zeros(batch.num_graphs, F_).scatter_reduce(
                0, batch.batch.unsqueeze(1).expand(-1, F_), v, "amax", include_self=False))):
        x1 = maybe_noncontiguous(x, noncontig).requires_grad_()
        x2 = x.clone().requires_grad_()
        out, ref = op(x1, batch), reference(x2)
        assert torch.equal(out, ref)
        tol = {} if dtype == torch.float64 else {"atol": 1e-5, "rtol": 1e-5}
        ours, theirs = grads(out, ref, randn(out.shape, dtype, seed=1), [x1], [x2])
        torch.testing.assert_close(ours[0], theirs[0], **tol)


# ------------------------------------------------------------------------ subsets
@fuzz_settings(300)
@given(graph_lists(), st.integers(1, 5), st.sampled_from(PRUNES), st.integers(1, 7), st.booleans())
def test_k_subsets_count_and_stream(graphs, k, prune, chunk, as_edge_index):
    count("k_subsets", "count_k_subsets", "iter_k_subsets")
    expected, expected_ptr = k_subsets_reference(graphs, k, prune)
    if as_edge_index and len(graphs) == 1:  # one graph given as a bare edge_index
        graph, extra = graphs[0][0], {"num_nodes": graphs[0][1]}
    else:
        graph, extra = GraphBatch.from_edge_lists(graphs), {}
    subsets, ptr = ops.k_subsets(graph, k, prune, **extra)
    assert torch.equal(ptr, expected_ptr) and torch.equal(subsets, expected)
    assert ops.count_k_subsets(graph, k, prune, **extra).tolist() == expected_ptr.diff().tolist()
    stream = ops.iter_k_subsets(graph, k, prune, chunk_size=chunk, **extra)
    assert stream.total == len(expected) and stream.counts.tolist() == expected_ptr.diff().tolist()
    chunks = list(stream)
    assert all(0 < len(c.subsets) <= chunk for c in chunks)
    streamed = torch.cat([c.subsets for c in chunks]) if chunks else torch.zeros(0, k, dtype=torch.int64)
    assert torch.equal(streamed, expected)
    graph_ids = torch.cat([c.graph for c in chunks]) if chunks else torch.zeros(0, dtype=torch.int64)
    assert torch.equal(graph_ids, torch.repeat_interleave(torch.arange(len(graphs)), expected_ptr.diff()))


@fuzz_settings(250)
@given(graph_lists(), st.integers(1, 4), st.sampled_from(PRUNES), st.sampled_from(["uniform", "bfs", "dfs"]),
       st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_sample_k_subsets(graphs, k, prune, method, samples, seed):
    count("sample_k_subsets")
    batch = GraphBatch.from_edge_lists(graphs)
    out = ops.sample_k_subsets(batch, k, samples, method, prune=prune, generator=torch.Generator().manual_seed(seed))
    assert out.shape == (len(graphs), samples, k)
    again = ops.sample_k_subsets(batch, k, samples, method, prune=prune, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(out, again)
    for b, (ei, n) in enumerate(graphs):
        G = nx_graph(ei, n)
        if method == "uniform":
            admissible = [c for c in itertools.combinations(range(n), k) if keep_subset(G, c, prune)]
        else:  # grown subsets are connected (so they satisfy every prune mode when k >= 2)
            admissible = any(len(comp) >= k for comp in nx.connected_components(G)) and (
                k >= 2 or prune in ("none", "disconnected"))
        rows = out[b].tolist()
        if not admissible:
            assert all(r == [-1] * k for r in rows), (b, rows)
            continue
        for row in rows:
            assert len(set(row)) == k and all(0 <= v < n for v in row), row
            if method == "uniform":
                assert tuple(row) in admissible, (row, prune)
            else:
                assert nx.is_connected(G.subgraph(row)) and keep_subset(G, row, prune), (row, prune)
                assert all(any(G.has_edge(row[j], row[i]) for j in range(i)) for i in range(1, k)), row


# ------------------------------------------------------------------------ orientations
@fuzz_settings(300)
@given(graph_lists(max_nodes=9, max_edges=18), st.integers(1, 3), st.booleans(), st.booleans(),
       st.one_of(st.none(), st.integers(1, 10)), st.integers(0, 2**31))
def test_dfs_bfs_order(graphs, P, depth_first, custom_ranks, k, seed):
    count("dfs_order" if depth_first else "bfs_order")
    batch = GraphBatch.from_edge_lists(graphs)
    gen = torch.Generator().manual_seed(seed)
    n_max = batch.n_max
    start = torch.stack([torch.randint(0, n, (P,), generator=gen) if n else torch.full((P,), -1)
                         for _, n in graphs]) if graphs else torch.zeros(0, P, dtype=torch.int64)
    tiebreak = None
    if custom_ranks and graphs:
        tiebreak = torch.stack([torch.stack([torch.cat([torch.randperm(n, generator=gen), torch.arange(n, n_max)])
                                             for _ in range(P)]) for _, n in graphs])
    fn = ops.dfs_order if depth_first else ops.bfs_order
    out = fn(batch, start, tiebreak, k=k)
    K = n_max if k is None else k
    assert out.shape == (len(graphs), P, K)
    for b, (ei, n) in enumerate(graphs):
        G = nx_graph(ei, n)
        for p in range(P):
            if n == 0:
                assert out[b, p].tolist() == [-1] * K
                continue
            rank = list(range(n)) if tiebreak is None else tiebreak[b, p, :n].tolist()
            expected = (traversal_order_reference(G, int(start[b, p]), rank, depth_first) + [-1] * max(K, n))[:K]
            assert out[b, p].tolist() == expected


def wl_partition(G: nx.Graph, initial):
    """Stable 1-WL partition by plain iteration: colour -> (colour, sorted neighbour colours)."""
    colours = list(initial)
    while True:
        sig = [(colours[v], tuple(sorted(colours[u] for u in G[v] if u != v))) for v in range(len(colours))]
        names = {s: i for i, s in enumerate(sorted(set(sig)))}
        new = [names[s] for s in sig]
        if len(set(new)) == len(set(colours)):
            return new
        colours = new


@fuzz_settings(300)
@given(graph_lists(max_nodes=9, max_edges=14), st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_wl_order(graphs, with_x, with_ties, seed):
    count("wl_order")
    gen = torch.Generator().manual_seed(seed)
    # Append a relabeled copy of every graph: canonical colours must match vertex for vertex.
    sigmas = [torch.randperm(n, generator=gen) for _, n in graphs]
    copies = []
    for (ei, n), s in zip(graphs, sigmas):
        copies.append((s[ei] if ei.numel() else ei, n))
    all_graphs = graphs + copies
    batch = GraphBatch.from_edge_lists(all_graphs)
    N, B, n_max = batch.total_nodes, batch.num_graphs, batch.n_max
    x = None
    if with_x:
        xs = [torch.randint(0, 2, (n, 1), generator=gen).double() for _, n in graphs]
        x_copies = []
        for xv, s in zip(xs, sigmas):
            moved = torch.empty_like(xv)
            moved[s] = xv  # vertex s[v] of the copy is vertex v of the original
            x_copies.append(moved)
        x = torch.cat(xs + x_copies) if N else torch.zeros(0, 1, dtype=torch.float64)
    ties = None
    if with_ties and B:
        ties = torch.stack([torch.cat([torch.randperm(n, generator=gen), torch.arange(n, n_max)])
                            for _, n in all_graphs]).unsqueeze(1)
    result = ops.wl_order(batch, ties, x=x)
    ptr = batch.ptr.tolist()
    for b, (ei, n) in enumerate(all_graphs):
        G = nx_graph(ei, n)
        colours = result.colours[ptr[b]:ptr[b + 1]].tolist()
        if x is None:
            initial = [0] * n
        else:
            rows = x[ptr[b]:ptr[b + 1]].tolist()
            initial = [sorted(set(map(tuple, x.tolist()))).index(tuple(r)) for r in rows]
        ref = wl_partition(G, initial)
        # same partition
        assert all((colours[u] == colours[v]) == (ref[u] == ref[v]) for u in range(n) for v in range(n))
        sizes = [ref.count(c) for c in set(ref)]
        assert result.num_orders[b] == math.prod(math.factorial(s) for s in sizes)
        assert math.isclose(float(result.log_num_orders[b]), sum(math.lgamma(s + 1) for s in sizes), abs_tol=1e-9)
        order = result.order[b, 0].tolist()
        assert sorted(order[:n]) == list(range(n)) and order[n:] == [-1] * (n_max - n)
        rank = list(range(n)) if ties is None else ties[b, 0, :n].tolist()
        keys = [(colours[v], rank[v]) for v in order[:n]]
        assert keys == sorted(keys)
    for g, ((ei, n), s) in enumerate(zip(graphs, sigmas)):  # canonical colour names
        c_orig = result.colours[ptr[g]:ptr[g + 1]]
        c_copy = result.colours[ptr[len(graphs) + g]:ptr[len(graphs) + g + 1]]
        assert torch.equal(c_copy[s], c_orig)


# ------------------------------------------------------------------------ GraphBatch
@fuzz_settings(250)
@given(graph_lists(max_graphs=4, max_nodes=6, max_edges=10), st.integers(1, 3), st.integers(0, 2),
       st.lists(st.integers(0, 3), max_size=5), st.integers(0, 2**16))
def test_graph_batch_views(graphs, F_, D, select, seed):
    from torch_geometric.data import Batch, Data
    from torch_geometric.utils import to_dense_adj, to_dense_batch

    count("GraphBatch")
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, F_, generator=gen) for _, n in graphs]
    eas = [torch.randn(ei.shape[1], D, generator=gen) for ei, _ in graphs] if D else None
    batch = GraphBatch.from_edge_lists(graphs, x=xs, edge_attr=eas)
    B = len(graphs)
    assert batch.num_graphs == B and batch.num_nodes.tolist() == [n for _, n in graphs]
    if B:
        pyg = Batch.from_data_list([Data(edge_index=ei, x=x, num_nodes=n, **({"edge_attr": ea} if D else {}))
                                    for (ei, n), x, ea in zip(graphs, xs, eas or [None] * B)])
        assert torch.equal(batch.ptr, pyg.ptr) and torch.equal(batch.batch, pyg.batch)
        assert torch.equal(batch.edge_index, pyg.edge_index)
        n_max = batch.n_max
        if batch.num_edges and n_max:
            ref_adj = to_dense_adj(pyg.edge_index, pyg.batch, max_num_nodes=n_max, batch_size=B)
            assert torch.equal(batch.dense_adj()[..., 0], ref_adj)
            if D:
                ref_attr = to_dense_adj(pyg.edge_index, pyg.batch, pyg.edge_attr, max_num_nodes=n_max, batch_size=B)
                torch.testing.assert_close(batch.dense_adj()[..., 1:], ref_attr)
        if batch.total_nodes and n_max:
            dense_x, mask = to_dense_batch(pyg.x, pyg.batch, max_num_nodes=n_max, batch_size=B)
            assert torch.equal(batch.dense_x(), dense_x) and torch.equal(batch.node_mask, mask)
        converted = GraphBatch.from_pyg(pyg)
        assert torch.equal(converted.ptr, batch.ptr) and torch.equal(converted.dense_adj(), batch.dense_adj())
    # CSR and transpose CSR: out/in-neighbours sorted, multi-edges kept
    ei = batch.edge_index
    for u in range(batch.total_nodes):
        assert batch.col[batch.rowptr[u]:batch.rowptr[u + 1]].tolist() == sorted(ei[1, ei[0] == u].tolist())
        assert batch.t_col[batch.t_rowptr[u]:batch.t_rowptr[u + 1]].tolist() == sorted(ei[0, ei[1] == u].tolist())
    rowptr, col = batch.undirected_csr()
    ptr = batch.ptr.tolist()
    for b, (e, n) in enumerate(graphs):
        G = nx_graph(e, n)
        for v in range(n):
            u = ptr[b] + v
            assert col[rowptr[u]:rowptr[u + 1]].tolist() == sorted(G[v])
    # select(), repeated indices included: the same as batching the chosen graphs
    chosen = [i for i in select if i < B]
    sub = batch.select(chosen)
    if not chosen:
        assert sub.num_graphs == 0 and sub.total_nodes == 0
        return
    expected = GraphBatch.from_edge_lists([graphs[i] for i in chosen], x=[xs[i] for i in chosen],
                                          edge_attr=[eas[i] for i in chosen] if D else None)
    assert torch.equal(sub.ptr, expected.ptr)
    assert torch.equal(sub.dense_adj(), expected.dense_adj())
    assert torch.equal(sub.dense_x(), expected.dense_x())


# ------------------------------------------------------------------------ nn modules
@fuzz_settings(200)
@given(graph_lists(max_graphs=1, max_nodes=8, min_graphs=1), st.integers(1, 4), st.integers(0, 2), st.floats(-1, 1),
       st.booleans())
def test_gin_conv_matches_pyg(graphs, F_, R, eps, train_eps):
    from torch_geometric.nn import GINConv as PyGGINConv

    count("GINConv")
    edge_index, n = graphs[0]
    mlp = torch.nn.Sequential(torch.nn.Linear(F_, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).double()
    ours = GINConv(copy.deepcopy(mlp), eps=eps, train_eps=train_eps).double()
    theirs = PyGGINConv(copy.deepcopy(mlp), eps=eps, train_eps=train_eps).double()
    theirs.nn.load_state_dict(ours.nn.state_dict())  # PyG's constructor re-initialises nn
    x = torch.randn(n, F_, dtype=torch.float64)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = ours(x1, edge_index.clone())
    ref = theirs(x2, edge_index)
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    for a, b in zip(ours.nn.parameters(), theirs.nn.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    if R:  # replicas: [R, N, F] equals R separate calls
        xr = torch.randn(R, n, F_, dtype=torch.float64)
        out_r = ours(xr, edge_index)
        torch.testing.assert_close(out_r, torch.stack([theirs(xr[r], edge_index) for r in range(R)]))


def gin_reference(model: GIN, x, graph: GraphBatch, ids):
    """GIN of Xu et al. written out with dense matrices and torch's own BatchNorm/Linear."""
    M = incoming_matrix(graph, torch.float64)
    R = ids.shape[0] if ids is not None else (x.shape[0] if x is not None and x.dim() == 3 else 1)
    h = None if x is None else (x if x.dim() == 3 else x.unsqueeze(0)).double().expand(R, -1, -1)
    pooled = []
    ptr = graph.ptr.tolist()

    def pool(t):
        return torch.stack([t[:, ptr[b]:ptr[b + 1]].sum(1) for b in range(graph.num_graphs)], dim=1) \
            if graph.num_graphs else t.new_zeros(t.shape[0], 0, t.shape[2])

    if h is not None:
        pooled.append(pool(h))
    if model.id_dim:
        onehot = F.one_hot(ids, model.id_dim).double()
        pooled.append(pool(onehot))
    for i, layer in enumerate(model.layers):
        parts = []
        if layer.first is not None:
            parts.append(h @ layer.first.weight.t())
        if layer.id_weight is not None:
            parts.append(F.one_hot(ids, layer.id_dim).double() @ layer.id_weight)
        z = sum(parts)
        eps = layer.eps if layer.eps is not None else layer.fixed_eps
        a = (1 + eps) * z + M @ z
        flat = a.reshape(-1, a.shape[-1])
        for stage, bn in enumerate(layer.norms):
            if stage:
                flat = flat @ layer.linears[stage - 1].weight.t()
            flat = torch.relu(bn(flat))
        h = flat.reshape(R, -1, flat.shape[-1])
        pooled.append(pool(h))
    return model.classifier(torch.cat(pooled, dim=-1))


@fuzz_settings(150)
@given(graph_lists(max_graphs=3, max_nodes=6, min_graphs=1), st.integers(0, 2), st.integers(1, 3),
       st.integers(1, 2), st.integers(0, 4), st.integers(1, 3), st.booleans(), st.integers(0, 2**16))
def test_gin_and_rpgin(graphs, in_dim, hidden, layers, id_dim, R, training, seed):
    if in_dim + id_dim == 0:
        id_dim = 1
    batch = GraphBatch.from_edge_lists(graphs)
    N = batch.total_nodes
    if training and (R if id_dim else 1) * N < 2:
        return
    count("GIN")
    torch.manual_seed(seed)
    model = GIN(in_dim, hidden, layers, 2, mlp_layers=2, id_dim=id_dim).double().train(training)
    for module in model.modules():  # BatchNorm outputs away from ReLU's kink at 0, where a
        if isinstance(module, torch.nn.BatchNorm1d):  # rounding difference flips the gradient
            module.bias.data.uniform_(0.2, 1.0).mul_(torch.randint(0, 2, module.bias.shape) * 2 - 1)
    ref_model = copy.deepcopy(model)
    x = torch.randn(N, in_dim, dtype=torch.float64) if in_dim else None
    ids = torch.randint(0, id_dim, (R, N)) if id_dim else None
    out = model(x, batch, ids=ids)
    ref = gin_reference(ref_model, x, batch, ids)
    if ids is None and (x is None or x.dim() == 2):
        ref = ref.squeeze(0)
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    for (name, a), b in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)
    if id_dim:  # RPGIN = GIN on the IDs drawn from the same generator state, averaged
        count("RPGIN")
        rp = RPGIN(in_dim, hidden, layers, 2, id_dim=id_dim, strategy=PiSGD(train_samples=R, eval_samples=R),
                   generator=torch.Generator().manual_seed(seed)).double().train(training)
        gin_copy = copy.deepcopy(rp.gin)
        (ids_rp, _), = rp.node_ids(batch)
        rp.generator.manual_seed(seed)
        out_rp = rp(x, batch)
        perms = ops.random_permutations(batch.num_nodes, R, generator=torch.Generator().manual_seed(seed))
        positions = perms[batch.batch, :, batch.local_index] if N else torch.zeros(N, R, dtype=torch.int64)
        assert torch.equal(ids_rp, (positions % id_dim).t())
        ref_rp = gin_reference(gin_copy, x, batch, ids_rp).mean(dim=0)
        torch.testing.assert_close(out_rp, ref_rp)


class Probe(torch.nn.Module):
    """A permutation-sensitive f: position-weighted sums of the adjacency and features."""

    def forward(self, adj, x):
        K = adj.shape[1]
        w = torch.arange(1, K + 1, dtype=adj.dtype)
        a = (adj.sum(-1) * w.view(1, K, 1) * w.view(1, 1, K)).flatten(1).sum(1)
        b = (x.sum(-1) * w.view(1, K)).sum(1)
        return torch.stack([a, b], dim=1)


@fuzz_settings(200)
@given(graph_lists(max_graphs=3, max_nodes=6, min_graphs=1), st.integers(1, 3), st.one_of(st.none(), st.integers(1, 7)),
       st.booleans(), st.integers(0, 2**16))
def test_relational_pooling(graphs, samples, k, training, seed):
    count("RelationalPooling")
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, 2, generator=gen) for _, n in graphs]
    batch = GraphBatch.from_edge_lists(graphs, x=xs)
    adj, x = batch.dense_adj(), batch.dense_x()
    strategy = PiSGD(k=k, train_samples=samples, eval_samples=samples) if k else \
        PiSGD(batch.n_max, train_samples=samples, eval_samples=samples)
    model = RelationalPooling(Probe(), strategy, generator=torch.Generator().manual_seed(seed)).train(training)
    out = model(adj, x, batch.num_nodes)
    K = batch.n_max if k is None else k
    perms = ops.random_permutations(batch.num_nodes, samples, k=K, generator=torch.Generator().manual_seed(seed))
    ref = Probe()(permute_adjacency_reference(adj, perms).flatten(0, 1), permute_nodes_reference(x, perms).flatten(0, 1))
    ref = ref.reshape(len(graphs), samples, 2).mean(dim=1)
    torch.testing.assert_close(out, ref)
    model.generator.manual_seed(seed)
    torch.testing.assert_close(model(batch), ref)
