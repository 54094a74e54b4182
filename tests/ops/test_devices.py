"""Every op declared once (rpfast/ops/_registry.py), run on any device.

* ``torch.library.opcheck`` on every registered op (schema, autograd registration, fake
  function, AOT dispatch);
* each op's torch-composed implementation (what runs on CUDA, MPS, ...) against its C++ kernel,
  forward and backward, and every layer under ``rpfast.set_backend("torch")`` against the kernels;
* the ``meta`` device and float64 for ops, batches and models.
"""
import copy

import pytest
import torch

import rpfast
from rpfast import ops
from tests.helpers.assertions import backend, op_gradients
from tests.helpers.layer_cases import layer_cases, small_batch
from rpfast.nn import GIN, GINConv
from rpfast.ops import _registry
from rpfast.ops.gin import graph_csr

META = torch.device("meta")


def _samples():
    """Arguments for every registered op: name -> (args, tests opcheck may run)."""
    g = small_batch()
    csr = list(graph_csr(g))
    gen = torch.Generator().manual_seed(1)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    perms = torch.tensor([[[2, 0, 1, -1], [3, 1, -1, -1]], [[0, 1, 2, 3], [1, 0, 3, 2]]])
    x3, eps = rand(2, 9, 3), torch.tensor([0.25], dtype=torch.float64)
    h = rand(9, 3)
    out, ties = ops.pool.neighbour_max_op.run(h, *csr)
    gout, gties = ops.pool.graph_max_op.run(h, g.ptr)
    y, xhat, invstd, _, _ = ops.norm.bn_relu_forward_op.run(rand(6, 3), rand(3), rand(3), torch.zeros(3).double(),
                                                            torch.ones(3).double(), True, 0.1, 1e-5)
    deterministic = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    random = ("test_schema", "test_autograd_registration", "test_faketensor")  # draws differ call to call
    return {
        "gin_aggregate": ((x3, *csr, eps), deterministic),
        "gin_aggregate_backward": ((x3, rand(2, 9, 3), csr[2], csr[3], eps, True), deterministic),
        "rooted_round": ((rand(3, 9, 2), rand(3, 9, 2), rand(3, 3), rand(3), rand(9), *csr), deterministic),
        "rooted_pool": ((rand(9, 2), rand(2, 2), rand(2, 3, 2, 2), rand(2, 3, 2, 2), rand(2, 3, 2), rand(9),
                         torch.tensor([[[0], [0], [3]], [[2], [1], [0]]]), torch.tensor([0, 1, 0]), g.ptr, *csr),
                        deterministic),
        "sum_product": ((x3, rand(2, 9, 3)), deterministic),
        "csr": ((g.edge_index, 9), deterministic),
        "segment_sum": ((x3, g.ptr), deterministic),
        "segment_broadcast": ((rand(2, 3, 3), g.ptr, 9), deterministic),
        "rows_product": ((rand(2, 4, 3), rand(3, 5)), deterministic),
        "matmul_tn": ((rand(6, 3), rand(6, 4)), deterministic),
        "linear": ((rand(2, 4, 3), rand(5, 3), rand(5)), deterministic),
        "embedding": ((rand(5, 3), torch.tensor([[0, 4, 2], [1, 1, 3]])), deterministic),
        "scatter_rows_sum": ((torch.tensor([[0, 4, 2], [1, 1, 3]]), rand(2, 3, 4), 5), deterministic),
        "batch_norm_relu": ((rand(6, 3), rand(3), rand(3), torch.zeros(3).double(), torch.ones(3).double(), True,
                             0.1, 1e-5), deterministic),
        "batch_norm_relu_backward": ((rand(6, 3), y, xhat, rand(3), invstd, True), deterministic),
        "neighbour_max": ((h, *csr), deterministic),
        "neighbour_max_adjoint": ((rand(9, 3), h, out, ties, *csr), deterministic),
        "graph_max": ((h, g.ptr), deterministic),
        "graph_max_adjoint": ((rand(3, 3), h, g.ptr, gout, gties), deterministic),
        "permute_adjacency": ((rand(2, 4, 4, 2), perms), deterministic),
        "permute_adjacency_backward": ((rand(2, 2, 4, 4, 2), perms, 4), deterministic),
        "permute_nodes": ((rand(2, 4, 3), perms), deterministic),
        "permute_nodes_backward": ((rand(2, 2, 4, 3), perms, 4), deterministic),
        "sample_ids": ((g.ptr, 9, 2, 3), random),
        "random_permutations": ((torch.tensor([4, 0, 3]), -7, 2, 3), deterministic),  # one seed: one draw
        # the seed from a buffer (a captured step's), as the CUDA kernel reads it
        "random_positions": ((g.ptr, g.host_ptr, 0, torch.tensor([2**62]), 2, 5, 9, g.n_max), deterministic),
        "pisgd_relabel": ((rand(2, 4, 4, 1), rand(2, 4, 3), torch.tensor([4, 3]), 2, 3), random),
    }


SAMPLES = _samples()
RANDOM_OPS = {"sample_ids", "pisgd_relabel"}


def test_every_registered_op_has_samples_here():
    """A new op must be added to SAMPLES, so opcheck and the composed-path checks cover it."""
    assert set(_registry.registered()) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck(name):
    op = _registry.registered()[name]
    args, checks = SAMPLES[name]
    args = [a.clone().requires_grad_(a.is_floating_point() and op.backward is not None) if isinstance(a, torch.Tensor)
            else a for a in args]
    torch.library.opcheck(op.library_op, args, test_utils=checks)


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - RANDOM_OPS))
def test_composed_forward_matches_the_kernel(name):
    op = _registry.registered()[name]
    args, _ = SAMPLES[name]
    expected = op.kernel(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    got = op.composed(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    got = got if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(n for n, op in _registry.registered().items() if op.backward is not None))
def test_composed_gradients_match_the_kernels(name):
    op = _registry.registered()[name]
    args, _ = SAMPLES[name]

    with backend("auto"):
        expected = op_gradients(op, args)
    with backend("torch"):
        got = op_gradients(op, args)
    for g, e in zip(got, expected):
        if e is None or g is None:
            assert (e is None or not e.abs().sum()) and (g is None or not g.abs().sum())
        else:
            torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-9)


def test_gradcheck_through_the_composed_path():
    g = small_batch()
    x = g.x.clone().requires_grad_()
    eps = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    with backend("torch"):
        assert torch.autograd.gradcheck(lambda x, e: ops.gin_aggregate(x, g, e), (x, eps))
        assert torch.autograd.gradgradcheck(lambda x, e: ops.gin_aggregate(x, g, e), (x, eps))
        assert torch.autograd.gradcheck(lambda x: ops.graph_sum(x, g), (x,))
        assert torch.autograd.gradcheck(lambda x: ops.neighbour_max(x, g), (x,))
        adj = torch.randn(2, 4, 4, 2, dtype=torch.float64, requires_grad=True)
        perms = SAMPLES["permute_adjacency"][0][1]
        assert torch.autograd.gradgradcheck(lambda a: ops.permute_adjacency(a, perms), (adj,))


# ------------------------------------------------------------------ the meta device
def test_ops_on_meta_give_shapes():
    g = small_batch(torch.float32).to(META)
    assert g.device == META and g.t_rowptr.device == META
    x = g.x
    assert ops.gin_aggregate(x, g, 0.5).shape == (9, 3)
    assert ops.graph_sum(x, g).shape == (3, 3)
    assert ops.segment_sum(torch.zeros(2, 9, 3, device=META), g.ptr).shape == (2, 3, 3)
    assert ops.neighbour_max(x, g).shape == (9, 3)
    assert ops.graph_max(x, g).shape == (3, 3)
    assert ops.linear(x, torch.zeros(5, 3, device=META)).shape == (9, 5)
    assert ops.embedding(torch.zeros(4, 2, device=META), torch.zeros(9, dtype=torch.long, device=META)).shape == (9, 2)
    ones = torch.ones(3, device=META)
    assert ops.batch_norm_relu(x, ones, ones, ones, ones, training=True).shape == (9, 3)
    perms = torch.zeros(2, 5, 3, dtype=torch.long, device=META)
    assert ops.permute_adjacency(torch.zeros(2, 4, 4, 2, device=META), perms).shape == (2, 5, 3, 3, 2)
    assert ops.permute_nodes(torch.zeros(2, 4, 3, device=META), perms).shape == (2, 5, 3, 3)


@pytest.mark.parametrize("flat", [False, True])
def test_gin_trains_on_meta(flat):
    """Forward and backward of a whole GIN on the meta device (shapes only)."""
    g = small_batch(torch.float32).to(META)
    model = GIN(3, 8, 2, 4, flat_parameters=flat).to(META)
    out = model(g.x, g)
    assert out.shape == (3, 4) and out.device == META
    out.sum().backward()
    assert all(p.grad is not None and p.grad.device == META for p in model.parameters())


def test_ginconv_runs_on_meta():
    g = small_batch(torch.float32).to(META)
    conv = GINConv(torch.nn.Linear(3, 4), train_eps=True).to(META)
    assert conv(g.x, g).shape == (9, 4)  # a raw meta edge_index has no CSR to build: give a moved GraphBatch


# ------------------------------------------------------------------ every layer on the composed path
LAYERS = layer_cases()


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_on_the_composed_path_match_the_kernels(name):
    """Every layer trains the same under rpfast.set_backend("torch") (the path other devices run):
    outputs, every gradient and the BatchNorm statistics, in float64."""
    torch.manual_seed(0)
    model, inputs = LAYERS[name]()
    twin = copy.deepcopy(model)

    def step(m):
        out = m(*inputs)
        out.square().sum().backward()
        return out.detach(), {k: p.grad for k, p in m.named_parameters()}

    with backend("auto"):
        out, grads = step(model)
    with backend("torch"):
        if getattr(twin, "generator", None) is not None:
            twin.generator.manual_seed(0)
        twin_out, twin_grads = step(twin)
    torch.testing.assert_close(twin_out, out, rtol=1e-8, atol=1e-8)
    for key, grad in grads.items():
        torch.testing.assert_close(twin_grads[key], grad, rtol=1e-7, atol=1e-8, msg=lambda m: f"{key}: {m}")
    for (key, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-8, msg=lambda m: f"{key}: {m}")


def test_backend_switch_is_validated_and_reported(capsys):
    with pytest.raises(ValueError, match="'auto' or 'torch'"):
        rpfast.set_backend("cuda")
    with backend("torch"):
        assert rpfast.backend() == "torch"
        rpfast.show_config()
    assert "backend        : torch" in capsys.readouterr().out
    assert rpfast.backend() == "auto" or rpfast.backend() == "torch"


# ------------------------------------------------------------------ opaque handles (issue 42)
def test_handles_name_objects_an_op_cannot_take_as_tensors():
    import gc

    from rpfast.ops._registry import Handles

    class Store:
        pass

    weak = Handles("the store is gone", weak=True)
    store = Store()
    handle = weak.add(store)
    assert weak.get(handle) is store and weak.get(torch.tensor(handle)) is store  # a traced int64 too
    del store
    gc.collect()
    assert weak.get(handle) is None  # a weak handle dies with its object

    kept = Handles("the activations are gone", weak=False, keep=2)
    first, second, third = (kept.add(object()) for _ in range(3))
    assert len(kept) == 2 and kept.get(first) is None  # the oldest was dropped
    assert kept.take(second) is not None and len(kept) == 1
    for gone in (first, second):  # dropped, or taken already
        with pytest.raises(RuntimeError, match="rpfast: the activations are gone"):
            kept.take(gone)
    assert kept.take(torch.tensor(third)) is not None
