"""RootedRP: RP over k marked vertices, exact over every k-set in eval mode; its round op."""
import itertools

import networkx as nx
import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.datasets.pair_families import cfi_pair
from rpfast.datasets.pairs import networkx_edge_index
from rpfast.nn import Concat, RootedRP
from rpfast import ops as rpfast_ops
from rpfast import _backend
from rpfast.ops import rooted_round
from rpfast.ops.gin import graph_csr
from rpfast.ops.rooted import rooted_pool_op


def _batch(*graphs, features: int = 1, dtype=torch.float64) -> GraphBatch:
    return GraphBatch.from_edge_lists([(networkx_edge_index(g), g.number_of_nodes()) for g in graphs],
                                      x=[torch.ones(g.number_of_nodes(), features, dtype=dtype) for g in graphs])


def _model(**kwargs) -> RootedRP:
    torch.manual_seed(0)
    return RootedRP(1, 8, kwargs.pop("layers", 12), 3, **kwargs).double().eval()


def _relabeled(graph: nx.Graph, seed: int) -> nx.Graph:
    order = torch.randperm(graph.number_of_nodes(), generator=torch.Generator().manual_seed(seed)).tolist()
    return nx.relabel_nodes(graph, dict(zip(graph.nodes, order)))


def test_eval_output_is_the_mean_over_every_root_of_one_marked_pass():
    graph = nx.gnp_random_graph(9, 0.4, seed=1)
    model = _model(layers=3)
    batch = _batch(graph)
    out = model(batch.x, batch)
    with torch.no_grad():
        assert torch.allclose(out[0], _by_formula(model, graph, [(root,) for root in range(9)]), atol=1e-12)


def _by_formula(model: RootedRP, graph: nx.Graph, root_sets) -> torch.Tensor:
    """The docstring's formula, one root set at a time, with a dense adjacency: the mean over
    ``root_sets`` of the read-out of the marked rounds."""
    n = graph.number_of_nodes()
    adj = torch.tensor(nx.to_numpy_array(graph, nodelist=range(n)))
    scale = (1 + RootedRP.REFERENCE_DEGREE) / (1 + adj.sum() / n)  # the neighbour sum at the reference degree
    per_set = []
    for roots in root_sets:
        marked = torch.zeros(n, 1, dtype=torch.float64)
        marked[list(roots)] = 1
        h = torch.cos(model.embed(torch.ones(n, 1, dtype=torch.float64)) + marked * model.marker)
        for layer in model.rounds:
            h = torch.cos(layer(torch.cat([h, scale * (h + adj @ h)], dim=-1)))
        per_set.append(model.read(h.mean(dim=0)))
    return torch.stack(per_set).mean(dim=0)


def test_two_roots_average_every_pair_and_a_one_vertex_graph_marks_its_vertex():
    graph = nx.gnp_random_graph(7, 0.5, seed=4)
    model = _model(layers=3, roots=2, block_sets=5)  # 21 pairs in blocks of 5
    batch = _batch(graph, nx.empty_graph(1))
    out = model(batch.x, batch)
    with torch.no_grad():
        assert torch.allclose(out[0], _by_formula(model, graph, itertools.combinations(range(7), 2)), atol=1e-12)
        assert torch.allclose(out[1], _by_formula(model, nx.empty_graph(1), [(0,)]), atol=1e-12)


def test_eval_output_is_invariant_and_blocks_of_roots_do_not_change_it():
    graph = nx.random_regular_graph(3, 12, seed=2)
    model = _model()
    batch = _batch(graph, _relabeled(graph, 5), nx.path_graph(4), nx.empty_graph(0))
    out = model(batch.x, batch)
    assert out.shape == (4, 3)
    assert torch.allclose(out[0], out[1], atol=1e-12)  # exact over the roots: no sampling spread
    assert bool((out[3] == 0).all())  # an empty graph has no root
    alone = model(*(lambda b: (b.x, b))(_batch(nx.path_graph(4))))
    assert torch.allclose(out[2], alone[0], atol=1e-12)  # roots past a smaller graph's size weigh 0
    one_root_per_block = _model(block_elements=1)
    assert torch.allclose(one_root_per_block(batch.x, batch), out, atol=1e-12)


def test_it_separates_cfi_pairs_that_rooted_refinement_separates_and_no_others():
    model = _model()
    diamond = nx.Graph([(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)])  # treewidth 2: a root's refinement sees the twist
    g, h = cfi_pair(diamond)
    out = model(*(lambda b: (b.x, b))(_batch(g, h)))
    assert (out[0] - out[1]).abs().max() > 1e-4
    g, h = cfi_pair(nx.complete_graph(4))  # treewidth 3: one marked vertex is not enough
    out = model(*(lambda b: (b.x, b))(_batch(g, h)))
    assert (out[0] - out[1]).abs().max() < 1e-9


def test_two_roots_separate_the_cfi_pair_over_k4_that_one_root_does_not():
    g, h = cfi_pair(nx.complete_graph(4))  # K4 loses its cycles with two vertices, not one
    batch = _batch(g, _relabeled(g, 1), h)
    out = _model(layers=16, roots=2)(batch.x, batch)
    assert (out[0] - out[1]).abs().max() < 1e-9 < 1e-4 < (out[0] - out[2]).abs().max()


def test_training_draws_distinct_roots_inside_each_graph():
    model = RootedRP(1, 4, 2, 2, roots=3, train_roots=50, generator=torch.Generator().manual_seed(0)).train()
    batch = _batch(nx.path_graph(5), nx.path_graph(2), nx.path_graph(9))
    [(roots, weights)] = list(model._roots(batch))
    assert roots.shape == (50, 3, 3) and torch.allclose(weights, torch.full((50, 3), 1 / 50, dtype=torch.float64))
    for graph, n in enumerate((5, 2, 9)):
        drawn = roots[:, graph].sort(dim=-1).values
        assert bool((drawn[:, :-1] < drawn[:, 1:]).all())  # distinct
        inside = drawn < n
        assert bool((inside.sum(dim=-1) == min(n, 3)).all())  # a 2-vertex graph marks both
    assert len(set(map(tuple, roots[:, 2].sort(dim=-1).values.tolist()))) > 20  # many different triples


def test_training_draws_roots_reproducibly_and_trains_every_parameter():
    graph = nx.gnp_random_graph(10, 0.3, seed=3)
    batch = _batch(graph, graph, dtype=torch.float32)

    def draw(seed):
        torch.manual_seed(0)
        model = RootedRP(1, 8, 4, 2, train_roots=3, generator=torch.Generator().manual_seed(seed)).train()
        return model, model(batch.x, batch)

    model, out = draw(7)
    assert torch.equal(out, draw(7)[1]) and not torch.equal(out, draw(8)[1])
    assert not torch.equal(out[0], out[1])  # each graph draws its own roots
    out.sum().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())


def test_concat_joins_whole_graph_models():
    torch.manual_seed(0)
    both = Concat(RootedRP(1, 4, 2, 3), RootedRP(1, 4, 2, 2)).eval()
    batch = _batch(nx.cycle_graph(5), dtype=torch.float32)
    assert both(batch.x, batch).shape == (1, 5)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(num_layers=0), ValueError, "num_layers must be >= 1"),
    (dict(train_roots=0), ValueError, "train_roots must be >= 1"),
    (dict(roots=0), ValueError, "roots must be >= 1"),
    (dict(roots=4), ValueError, "roots must be at most 3"),
    (dict(block_sets=0), ValueError, "block_sets must be >= 1"),
    (dict(init_gain=0.0), ValueError, "init_gain must be positive"),
    (dict(init_gain="3"), TypeError, "init_gain must be a float"),
    (dict(generator=1), TypeError, "generator must be a torch.Generator"),
])
def test_arguments_are_checked(kwargs, error, message):
    args = dict(in_dim=1, hidden=4, num_layers=2, out_dim=2)
    with pytest.raises(error, match=message):
        RootedRP(**{**args, **kwargs})


def test_inputs_are_checked():
    model = RootedRP(2, 4, 2, 2)
    batch = _batch(nx.cycle_graph(4), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"built for float x \[N, 2\], got \(4, 1\)"):
        model(batch.x, batch)
    with pytest.raises(ValueError, match=r"got \(4, 2\) torch.int64"):
        model(torch.ones(4, 2, dtype=torch.int64), batch)
    with pytest.raises(ValueError, match="needs node features"):
        model(None, batch)


def test_round_op_is_the_formula_on_a_dense_adjacency():
    graph = nx.gnp_random_graph(6, 0.5, seed=5)
    batch = _batch(graph, nx.path_graph(3))
    gen = torch.Generator().manual_seed(0)
    h, p = (torch.randn(3, 9, 4, generator=gen, dtype=torch.float64) for _ in range(2))
    own, bias, scale = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in ((3, 3), (3,), (9,)))
    adj = torch.block_diag(torch.tensor(nx.to_numpy_array(graph, nodelist=range(6))),
                           torch.tensor(nx.to_numpy_array(nx.path_graph(3))))
    expected = (torch.einsum("ck,knr->cnr", own, h) + bias.view(3, 1, 1)
                + scale.view(1, 9, 1) * (p + torch.einsum("vu,cur->cvr", adj, p)))
    torch.testing.assert_close(rooted_round(h, p, own, bias, scale, batch), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"h and p must be \[3, 9, R\]"):
        rooted_round(h[:, :8], p[:, :8], own, bias, scale, batch)
    with pytest.raises(TypeError, match="scale is torch.float32 but h is torch.float64"):
        rooted_round(h, p, own, bias, scale.float(), batch)
    with pytest.raises(TypeError, match="p must be a torch.Tensor"):
        rooted_round(h, p.numpy(), own, bias, scale, batch)
    with pytest.raises(TypeError, match="graph must be an rpfast.data.GraphBatch"):
        rooted_round(h, p, own, bias, scale, batch.edge_index)
    with pytest.raises(ValueError, match=r"own \[D, D\], bias \[D\], scale \[N\] with D = 3, N = 9"):
        rooted_round(h, p, own, bias, scale[:8], batch)


def _pool_args(dtype=torch.float64, H=2, L=3, D=3, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    return rand(10, D), rand(H, D), rand(H, L, D, D), rand(H, L, D, D), rand(H, L, D), rand(10).abs() + 0.5


# D: a width read at run time (3) and the two the kernel unrolls (4, 8); R: training's single root
# set, fewer sets than a register block, and a block with a remainder
@pytest.mark.parametrize("D", [3, 4, 8])
@pytest.mark.parametrize("R", [1, 2, 17])
def test_pool_op_runs_each_graph_through_its_own_hash_as_the_formula_says(D, R):
    graphs = [nx.gnp_random_graph(6, 0.5, seed=5), nx.path_graph(3), nx.empty_graph(0), nx.empty_graph(1)]
    batch = _batch(*graphs)
    start, marker, own, passed, bias, scale = _pool_args(D=D)
    # [R, B=4, K=2] local indices; -1 and indices past a graph's end mark nothing
    roots = torch.randint(-1, 8, (R, 4, 2), generator=torch.Generator().manual_seed(R))
    graph_hash = torch.tensor([1, 0, 1, 0])
    out = rpfast_ops.rooted_pool(start, marker, own, passed, bias, scale, roots, graph_hash, batch)
    assert out.shape == (R, 4, D)
    for b, graph in enumerate(graphs):
        first, n = int(batch.ptr[b]), graph.number_of_nodes()
        adj = torch.tensor(nx.to_numpy_array(graph, nodelist=range(n))) if n else torch.zeros(0, 0).double()
        g = int(graph_hash[b])
        for r in range(R):
            marked = torch.tensor([float(v in roots[r, b].tolist()) for v in range(n)], dtype=torch.float64)
            h = torch.cos(start[first:first + n] + marked.view(-1, 1) * marker[g])  # [n, D]
            for layer in range(3):
                p = h @ passed[g, layer].t()
                h = torch.cos(bias[g, layer] + h @ own[g, layer].t()
                              + scale[first:first + n].view(-1, 1) * (p + adj @ p))
            expected = h.mean(dim=0) if n else torch.zeros(D, dtype=torch.float64)
            torch.testing.assert_close(out[r, b], expected, rtol=1e-12, atol=1e-12)
    float32 = rpfast_ops.rooted_pool(*(t.float() for t in (start, marker, own, passed, bias, scale)), roots,
                                     graph_hash, batch)
    # its cosine is within an ulp or so of cos, but 3 rounds amplify float32 rounding: 1.4e-5 on one
    # value in the build without FMA (RPFAST_SIMD=baseline), whose products round twice
    torch.testing.assert_close(float32, out.float(), rtol=1e-4, atol=1e-4)


def test_pool_op_checks_its_arguments():
    batch = _batch(nx.path_graph(4), nx.cycle_graph(6))
    args = list(_pool_args())
    roots, graph_hash = torch.zeros(1, 2, 1, dtype=torch.int64), torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"own must be \[2, 3, 3, 3\]"):
        rpfast_ops.rooted_pool(*args[:2], args[2][:, :, :2], *args[3:], roots, graph_hash, batch)
    with pytest.raises(ValueError, match=r"roots \[R, 2, K\] and graph_hash \[2\]"):
        rpfast_ops.rooted_pool(*args, roots[:, :1], graph_hash, batch)
    with pytest.raises(TypeError, match="roots must be int64"):
        rpfast_ops.rooted_pool(*args, roots.int(), graph_hash, batch)
    with pytest.raises(TypeError, match="scale is torch.float32 but start is torch.float64"):
        rpfast_ops.rooted_pool(*args[:5], args[5].float(), roots, graph_hash, batch)
    with pytest.raises(ValueError, match=r"start must be \[10, D\]"):
        rpfast_ops.rooted_pool(args[0][:9], *args[1:], roots, graph_hash, batch)
    with pytest.raises(IndexError, match="graph_hash: 2 at graph 1 is not one of the 2 hashes"):
        rpfast_ops.rooted_pool(*args, roots, torch.tensor([0, 2]), batch)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pool_op_splits_many_root_sets_of_a_large_graph_into_tiles_that_give_the_formula(dtype):
    """A 400-vertex graph's scratch per root set is too large for one cache-sized tile of 40 sets:
    the kernel takes each graph's sets in tiles (16, 16 and 8: the largest graph sizes them), the
    7-cycle's too; every set gives the composed form's value."""
    args, batch = _large_and_small_pool_args(dtype)
    out = rpfast_ops.rooted_pool(*args, batch)
    expected = rooted_pool_op.composed(*args, batch.ptr, *graph_csr(batch))
    tolerance = 1e-12 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(out, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.kernels  # the composed path's products round by the CPU's BLAS blocking, which depends on R
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pool_kernel_tiles_never_read_each_others_root_sets(dtype):
    """The last two tiles' sets, alone, give bitwise what they give among the others."""
    args, batch = _large_and_small_pool_args(dtype)
    out = rpfast_ops.rooted_pool(*args, batch)
    roots, graph_hash = args[6], args[7]
    torch.testing.assert_close(rpfast_ops.rooted_pool(*args[:6], roots[16:], graph_hash, batch), out[16:],
                               rtol=0, atol=0)


def _large_and_small_pool_args(dtype):
    """rooted_pool's arguments on a 400-vertex 3-regular graph and a 7-cycle, two hashes, 40 root
    pairs each, and the batch."""
    graphs = [nx.random_regular_graph(3, 400, seed=2), nx.cycle_graph(7)]
    batch = _batch(*graphs, dtype=dtype)
    gen = torch.Generator().manual_seed(3)
    start, marker = torch.randn(407, 8, generator=gen, dtype=dtype), torch.randn(2, 8, generator=gen, dtype=dtype)
    own, passed = (torch.linalg.qr(torch.randn(2, 4, 8, 8, generator=gen, dtype=dtype))[0] for _ in range(2))
    bias, scale = torch.randn(2, 4, 8, generator=gen, dtype=dtype), torch.full((407,), 0.5, dtype=dtype)
    roots = torch.stack([torch.randint(0, 400, (40, 2), generator=gen), torch.randint(0, 7, (40, 2), generator=gen)],
                        dim=1)  # [40, 2, 2]
    graph_hash = torch.tensor([0, 1])
    return (start, marker, own, passed, bias, scale, roots, graph_hash), batch


def test_pool_kernel_refuses_an_edge_that_crosses_graphs():
    """The kernel keeps each graph's states in scratch of its own: an edge from another graph,
    which a GraphBatch never holds, is refused with the edge named, not read out of bounds."""
    args = [t.contiguous() for t in _pool_args(H=1)]
    ptr = torch.tensor([0, 5, 10])
    rowptr = torch.tensor([0, 1] + [1] * 9)  # one edge into node 0, from node 7 of the second graph
    col = torch.tensor([7])
    roots, out = torch.zeros(1, 2, 1, dtype=torch.int64), torch.empty(1, 2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="an edge from node 7 into graph 0 crosses graphs; edges must stay inside their graph"):
        _backend.call("rooted_pool", *args, roots, torch.zeros(2, dtype=torch.int64), ptr, rowptr, col, out)


def test_pool_op_cosine_is_within_two_ulps_of_cos_in_float32():
    """One round with no weights gives cos(bias) per graph: the kernel's float32 cosine."""
    count = 4000
    batch = GraphBatch.from_edge_lists([(torch.zeros(2, 0, dtype=torch.long), 1)] * count,
                                       x=[torch.ones(1, 1)] * count)
    x = torch.cat([torch.linspace(-3.3, 3.3, count // 2), torch.linspace(-1e4, 1e4, count // 2)])
    zero = torch.zeros(count, 1, 1, 1)
    got = rpfast_ops.rooted_pool(torch.zeros(count, 1), torch.zeros(count, 1), zero, zero, x.view(count, 1, 1),
                                 torch.ones(count), torch.zeros(1, count, 1, dtype=torch.int64), torch.arange(count),
                                 batch)[0, :, 0]
    assert (got.double() - torch.cos(x.double())).abs().max() < 2.5e-7


@pytest.mark.parametrize("roots", [1, 2])
def test_learned_rounds_give_in_a_training_forward_what_the_pool_op_gives(roots):
    graph = nx.random_regular_graph(3, 10, seed=1)
    model = _model(layers=4, roots=roots, learn_rounds=True).train()
    batch = _batch(graph, _relabeled(graph, 2))
    blocks = list(model.all_roots(batch))
    with torch.no_grad():  # no gradient: rooted_pool, one call per block
        pooled = [model.pooled(batch.x, batch)(block) for block, _ in blocks]
    learned = model.pooled(batch.x, batch)  # a gradient for the rounds: round by round, through rooted_round
    for (block, _), expected in zip(blocks, pooled):
        got = learned(block)
        assert got.requires_grad
        torch.testing.assert_close(got.detach(), expected, rtol=1e-12, atol=1e-12)
