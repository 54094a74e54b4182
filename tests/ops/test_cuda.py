"""rpfast's CUDA kernels (csrc/cuda/, rpfast._C_cuda, reached through rpfast/_backend.py).

Everywhere: the counter-based streams the CPU and the CUDA kernels share (csrc/rpfast/
stream_rng.hpp) are pinned, a build without CUDA, or without a device, says so in one line, and
the one switch (``kernels_for``) sends CUDA tensors to the composed path under
``set_backend("torch")`` and an op's declared CUDA kernel otherwise.
With ``rpfast._C_cuda`` built (``-Ccmake.define.RPFAST_CUDA=ON``, as ``.ci/run`` checks when nvcc
exists): it imports and reports its architectures and "no device". On a GPU
(``scripts/gpu_check.sh``): every kernel against the CPU kernels on the same inputs, bitwise
for permutations and gathers, 1e-5 relative for float sums, and the same permutations for one seed;
and every layer trained one step on the GPU, with the kernels and with the torch-composed ops,
against the same layer on the CPU.
"""
import copy
import hashlib
import os

import pytest
import torch

import rpfast
from tests.helpers.assertions import backend
from tests.helpers.layer_cases import layer_cases
from rpfast import _backend
from rpfast.ops import _registry
from rpfast.data import GraphBatch
from rpfast.ops import permute_adjacency, permute_nodes, random_permutations
from rpfast.ops.random import random_positions

BUILT = _backend.cuda_build_info()["built"]
DEVICES = _backend.cuda_build_info()["devices"]
needs_gpu = pytest.mark.skipif(not (BUILT and DEVICES and torch.cuda.is_available()),
                               reason="needs rpfast._C_cuda and a CUDA device (scripts/gpu_check.sh)")


def _stream_digest() -> str:
    """A hash of permutations and positions drawn for fixed seeds (dense and sparse CPU paths)."""
    digest = hashlib.sha256()
    for seed in range(20):
        for sizes, P, k in [([5, 3, 0, 9], 4, None), ([41] * 6, 3, 10), ([3000], 2, 5), ([12, 7], 5, 12)]:
            generator = torch.Generator().manual_seed(seed)
            digest.update(random_permutations(torch.tensor(sizes), P, k=k, generator=generator).numpy().tobytes())
        generator = torch.Generator().manual_seed(seed)
        digest.update(random_positions(torch.tensor([0, 4, 9, 20]), 3, 7, generator=generator).numpy().tobytes())
    return digest.hexdigest()


def test_the_shared_random_streams_are_pinned():
    """The CPU and the CUDA kernels draw from stream_rng.hpp's streams; a seed must keep giving the
    same permutations release after release (the value is the CPU's output before the streams
    moved to the device-neutral header)."""
    assert _stream_digest() == "9c314c757961a01c837f102f01abe2e3c060763c55f3b3c0f1857d7422589b2d"


def test_show_config_reports_the_cuda_build(capsys):
    rpfast.show_config()
    line = next(text for text in capsys.readouterr().out.splitlines() if "CUDA kernels" in text)
    assert ("built for" in line) == BUILT
    if BUILT and not DEVICES:
        assert "no device" in line and line.endswith("; off")


def test_require_says_what_is_missing_in_one_line():
    if BUILT and DEVICES:
        _backend.require_cuda()
        return
    with pytest.raises(RuntimeError) as raised:
        _backend.require_cuda()
    message = str(raised.value)
    assert "\n" not in message
    assert ("no CUDA device" in message) if BUILT else ("RPFAST_CUDA=ON" in message)


@pytest.mark.skipif(not BUILT, reason="rpfast._C_cuda is not built (pip install -Ccmake.define.RPFAST_CUDA=ON .)")
def test_the_cuda_module_imports_with_its_architectures():
    from rpfast import _C_cuda

    assert "80" in _C_cuda.architectures and "90" in _C_cuda.architectures
    count, error = _C_cuda.device_count()
    assert count >= 0 and (count > 0 or error)
    assert _backend.cuda_kernels_enabled() == (count > 0 and os.environ.get("RPFAST_CUDA_KERNELS", "1") != "0")


@pytest.mark.skipif(not BUILT, reason="rpfast._C_cuda is not built (pip install -Ccmake.define.RPFAST_CUDA=ON .)")
def test_the_cuda_bindings_refuse_host_memory_by_name():
    """The CUDA module takes the CPU module's Array and checks it in C++: a host tensor handed to
    a CUDA kernel is refused before any launch, naming the argument."""
    from torch.utils.dlpack import to_dlpack

    from rpfast import _C_cuda

    x, ptr, out = torch.zeros(1, 2, 1), torch.tensor([0, 2]), torch.zeros(1, 1, 1)
    with pytest.raises(ValueError, match="the tensor is on cpu, but this kernel reads CUDA memory"):
        _C_cuda.segment_sum(to_dlpack(x), to_dlpack(ptr), to_dlpack(out), 0)
    with pytest.raises(ValueError, match="rowptr: the tensor is on cpu"):
        _C_cuda.gin_aggregate(to_dlpack(torch.zeros(2, 1)), to_dlpack(torch.tensor([0, 0, 0])),
                              to_dlpack(torch.zeros(0, dtype=torch.int64)), to_dlpack(torch.zeros(1)),
                              to_dlpack(torch.zeros(2, 1)), 0)
    x, vec = torch.zeros(3, 2), torch.zeros(2)
    with pytest.raises(ValueError, match=r"\w+: the tensor is on cpu, but this kernel reads CUDA memory"):
        _C_cuda.batch_norm_relu_forward(*(to_dlpack(t) for t in (x, vec, vec.clone(), vec.clone(), vec.clone())),
                                        True, 0.1, 1e-5, *(to_dlpack(t) for t in (x.clone(), x.clone(), vec.clone(),
                                                                                  vec.clone())), 0)


class _CudaLike:
    """What kernels_for reads of a tensor on a CUDA device (none is needed to test the switch)."""
    is_cpu, is_cuda = False, True


def test_set_backend_torch_sends_cuda_tensors_to_the_composed_path(monkeypatch):
    """One switch for both devices: with the CUDA kernels available (a device pretended where the
    module is built, or the module's presence too where it is not), "auto" picks them for a CUDA
    tensor and "torch" the composed form, as for the CPU; RPFAST_CUDA_KERNELS=0 turns them off."""
    if not BUILT:
        monkeypatch.setattr(_backend, "_C_cuda", object())
    monkeypatch.setattr(_backend, "_cuda_devices", 1)
    cuda_tensor = _CudaLike()
    with backend("auto"):
        assert _backend.kernels_for(cuda_tensor) == "cuda" and _backend.kernels_for(torch.zeros(1)) == "cpu"
    with backend("torch"):
        assert _backend.kernels_for(cuda_tensor) is None and _backend.kernels_for(torch.zeros(1)) is None
    monkeypatch.setattr(_backend, "_CUDA_SWITCHED_ON", False)
    with backend("auto"):
        assert _backend.kernels_for(cuda_tensor) is None


def test_an_op_runs_the_kernel_of_the_device_kernels_for_names(monkeypatch):
    """The declaration is the one place an op's device forms meet: kernels["cuda"] for the device
    kernels_for names, the composed form where it names none or the op has no kernel there."""
    op = _registry.registered()["segment_sum"]
    calls = []
    for device in ("cpu", "cuda"):
        monkeypatch.setitem(op.kernels, device, lambda *args, device=device: calls.append(device))
    monkeypatch.setattr(op, "composed", lambda *args: calls.append("composed"))
    x, ptr = torch.zeros(1, 2, 1), torch.tensor([0, 2])
    for answer in ("cuda", "cpu", None):
        monkeypatch.setattr(_backend, "kernels_for", lambda t, answer=answer: answer)
        op.run(x, ptr)
    assert calls == ["cuda", "cpu", "composed"]
    assert "cuda" not in _registry.registered()["neighbour_max"].kernels  # no CUDA kernel: composed on CUDA


# ----------------------------------------------------------------------------- on a GPU
def _graphs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.tensor([5, 1, 0, 9, 7])
    B, n = len(sizes), int(sizes.max())
    adj = (torch.rand(B, n, n, 3, generator=generator) < 0.4).double() * torch.rand(B, n, n, 3, generator=generator)
    x = torch.randn(B, n, 4, generator=generator, dtype=torch.float64)
    return sizes, adj, x


@needs_gpu
def test_random_permutations_match_the_cpu_for_one_seed():
    sizes = torch.tensor([5, 1, 0, 9, 7, 41])
    for seed in range(5):
        for K in (None, 3):
            cpu = random_permutations(sizes, 4, k=K, generator=torch.Generator().manual_seed(seed))
            gpu = random_permutations(sizes.cuda(), 4, k=K, generator=torch.Generator().manual_seed(seed))
            assert gpu.is_cuda and torch.equal(gpu.cpu(), cpu)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_permutation_gathers_and_their_adjoints_match_the_cpu_bitwise(dtype):
    sizes, adj, x = _graphs()
    adj, x = adj.to(dtype), x.to(dtype)
    perms = random_permutations(sizes, 3, generator=torch.Generator().manual_seed(1))
    n = adj.shape[1]
    assert torch.equal(permute_adjacency(adj.cuda(), perms.cuda()).cpu(), permute_adjacency(adj, perms))
    assert torch.equal(permute_nodes(x.cuda(), perms.cuda()).cpu(), permute_nodes(x, perms))
    from rpfast.ops.permute import permute_adjacency_backward_op, permute_nodes_backward_op

    g_adj = torch.randn(*perms.shape, perms.shape[2], 3, dtype=dtype)
    g_x = torch.randn(*perms.shape, 4, dtype=dtype)
    assert torch.equal(permute_adjacency_backward_op.run(g_adj.cuda(), perms.cuda(), n).cpu(),
                       permute_adjacency_backward_op.run(g_adj, perms, n))
    assert torch.equal(permute_nodes_backward_op.run(g_x.cuda(), perms.cuda(), n).cpu(),
                       permute_nodes_backward_op.run(g_x, perms, n))


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segment_sum_and_gin_aggregation_match_the_cpu(dtype):
    from rpfast.datasets import csl_batch, csl_dataset
    from rpfast.ops import gin_aggregate, graph_sum

    graphs, _ = csl_dataset()
    graph = csl_batch(graphs, [0, 40, 99])
    x = torch.randn(2, graph.total_nodes, 5, dtype=dtype)
    cuda_graph = graph.to("cuda")
    torch.testing.assert_close(graph_sum(x.cuda(), cuda_graph).cpu(), graph_sum(x, graph), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gin_aggregate(x.cuda(), cuda_graph, 0.25).cpu(), gin_aggregate(x, graph, 0.25),
                               rtol=1e-5, atol=1e-6)


@needs_gpu
def test_random_positions_match_the_cpu_for_one_seed():
    ptr = torch.tensor([0, 4, 4, 13, 20, 61])
    for seed in range(5):
        cpu = random_positions(ptr, 3, 7, generator=torch.Generator().manual_seed(seed))
        gpu = random_positions(ptr.cuda(), 3, 7, generator=torch.Generator().manual_seed(seed))
        assert gpu.is_cuda and torch.equal(gpu.cpu(), cpu)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segment_max_and_its_adjoint_match_the_cpu_bitwise(dtype):
    from rpfast.ops.pool import graph_max_adjoint_op, graph_max_op

    ptr = torch.tensor([0, 3, 3, 9, 10])
    x = torch.randint(0, 3, (10, 6)).to(dtype)  # small integers: ties on purpose
    x[4, 2] = float("nan")
    out, ties = graph_max_op.run(x, ptr)
    gpu_out, gpu_ties = graph_max_op.run(x.cuda(), ptr.cuda())
    assert torch.equal(gpu_out.cpu(), out) or torch.allclose(gpu_out.cpu(), out, equal_nan=True)
    assert torch.equal(gpu_ties.cpu(), ties)
    grad = torch.randn(4, 6, dtype=dtype)
    expected = graph_max_adjoint_op.run(grad, x, ptr, out, ties)
    got = graph_max_adjoint_op.run(grad.cuda(), x.cuda(), ptr.cuda(), gpu_out, gpu_ties).cpu()
    assert torch.equal(got, expected)


@needs_gpu
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm_relu_and_its_backward_match_the_cpu(dtype, training):
    """The CUDA BatchNorm + ReLU (two launches each way, sums in a fixed order; not yet declared for
    the op, called through its kernel function) against the CPU kernel: outputs, the normalised
    input, the running statistics and the three gradients."""
    from rpfast.ops.norm import _backward_kernel, _forward_kernel, bn_relu_backward_op, bn_relu_forward_op

    gen = torch.Generator().manual_seed(0)
    for M, H in [(1, 3), (37, 5), (1000, 70)]:
        x = torch.randn(M, H, dtype=dtype, generator=gen) * 3 + 1
        weight, bias = torch.randn(H, dtype=dtype, generator=gen), torch.randn(H, dtype=dtype, generator=gen)
        stats = (torch.randn(H, dtype=dtype, generator=gen), torch.rand(H, dtype=dtype, generator=gen) + 0.5)
        args = (x, weight, bias, *stats, training, 0.1, 1e-5)
        cpu = bn_relu_forward_op.run(*args)
        gpu = _forward_kernel(*(a.cuda() if isinstance(a, torch.Tensor) else a for a in args))
        for mine, theirs in zip(gpu, cpu):
            torch.testing.assert_close(mine.cpu(), theirs, rtol=1e-5, atol=1e-5)
        grad = torch.randn(M, H, dtype=dtype, generator=gen)
        y, xhat, invstd = cpu[:3]
        expected = bn_relu_backward_op.run(grad, y, xhat, weight, invstd, training)
        got = _backward_kernel(grad.cuda(), y.cuda(), xhat.cuda(), weight.cuda(), invstd.cuda(), training)
        for mine, theirs in zip(got, expected):
            torch.testing.assert_close(mine.cpu(), theirs, rtol=1e-5, atol=1e-4)


LAYERS = layer_cases()


def _on_gpu(value):
    return value.to("cuda") if isinstance(value, (torch.Tensor, GraphBatch)) else value


@needs_gpu
@pytest.mark.parametrize("kernels", [False, True], ids=["composed", "kernels"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_layer_trains_on_the_gpu_as_on_the_cpu(name, kernels, monkeypatch):
    """One float64 training step of every layer on CUDA tensors (with rpfast's CUDA kernels, and
    with the torch-composed ops they replace) against the same step on the CPU's C++ kernels:
    outputs, every gradient and the BatchNorm statistics. The relabelings are drawn from the same
    generator state on both devices, so the steps must agree to rounding."""
    monkeypatch.setattr(_backend, "_CUDA_SWITCHED_ON", kernels)
    torch.manual_seed(0)
    model, inputs = LAYERS[name]()
    twin = copy.deepcopy(model).cuda()

    def step(m, args):
        if getattr(m, "generator", None) is not None:
            m.generator.manual_seed(0)
        out = m(*args)
        out.square().sum().backward()
        return out.detach().cpu(), {k: None if p.grad is None else p.grad.cpu() for k, p in m.named_parameters()}

    out, grads = step(model, inputs)
    gpu_out, gpu_grads = step(twin, [_on_gpu(a) for a in inputs])
    torch.testing.assert_close(gpu_out, out, rtol=1e-8, atol=1e-8)
    for key, grad in grads.items():
        torch.testing.assert_close(gpu_grads[key], grad, rtol=1e-7, atol=1e-8, msg=lambda m: f"{key}: {m}")
    for (key, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-8, atol=1e-8, msg=lambda m: f"{key}: {m}")


# layers whose step still waits for the device (tests/nn/test_device_reads.py's list)
WAITS_ON_A_GPU = {"RP-Oriented"}


@needs_gpu
@pytest.mark.parametrize("kernels", [False, True], ids=["composed", "kernels"])
@pytest.mark.parametrize("name", sorted(set(LAYERS) - WAITS_ON_A_GPU))
def test_every_layer_steps_on_the_gpu_without_a_synchronisation(name, kernels, monkeypatch):
    """Issue 43: a training step (after one of warm-up) and an eval forward of every layer on
    CUDA tensors under ``torch.cuda.set_sync_debug_mode("error")``, which raises at any
    operation that makes the host wait for the device. Dense sizes are given on the host."""
    monkeypatch.setattr(_backend, "_CUDA_SWITCHED_ON", kernels)
    model, inputs = LAYERS[name]()
    model = model.cuda()
    inputs = [_on_gpu(a) if not (isinstance(a, torch.Tensor) and not a.is_floating_point()) else a.tolist()
              for a in inputs]

    def step():
        model.train()
        model(*inputs).square().sum().backward()
        model.eval()
        with torch.no_grad():
            model(*inputs)

    step()  # per-model caches, built once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
