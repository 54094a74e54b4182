"""rpfast._backend: the one boundary to the compiled kernels (buffers, devices, threads)."""
import os
import subprocess
import sys

import pytest
import torch

from rpfast import ops
from rpfast.data import GraphBatch
from rpfast import _backend, _testing

META = torch.device("meta")  # a device with no rpfast kernel, available on every machine
MIXED_ERROR = r"is on (cpu|meta) but .* is on (cpu|meta); (put them on one device|move one with \.to\(\))"


@pytest.mark.parametrize("call", [
    lambda: ops.segment_sum(torch.zeros(3, 2, device=META), torch.tensor([0, 3])),
    lambda: ops.batch_norm_relu(torch.zeros(4, 2, device=META), *[torch.ones(2)] * 4, training=True),
    lambda: ops.permute_adjacency(torch.zeros(1, 3, 3, device=META), torch.zeros(1, 1, 3, dtype=torch.long)),
    lambda: ops.permute_nodes(torch.zeros(1, 3, 2, device=META), torch.zeros(1, 1, 3, dtype=torch.long)),
    lambda: ops.gin_aggregate(torch.zeros(2, 1, device=META), GraphBatch(torch.tensor([[0], [1]]))),
    lambda: ops.linear(torch.zeros(2, 3, device=META), torch.zeros(4, 3)),
    lambda: ops.embedding(torch.zeros(4, 3, device=META), torch.tensor([0, 1])),
])
def test_one_error_for_inputs_on_two_devices(call):
    """Every op runs on any device, but all its inputs must be on one: the error names both."""
    with pytest.raises(ValueError, match=MIXED_ERROR):
        call()


def test_call_converts_tensors_and_passes_threads():
    x = torch.arange(6.0).reshape(1, 3, 2)
    out = torch.empty(1, 2, 2)
    _backend.call("segment_sum", x, torch.tensor([0, 1, 3]), out)
    torch.testing.assert_close(out[0], torch.tensor([[0.0, 1.0], [6.0, 8.0]]))


def test_call_rejects_mixed_devices_and_unknown_devices():
    with pytest.raises(ValueError, match="segment_sum's input is on meta"):
        _backend.call("segment_sum", torch.zeros(1, 3, 2, device=META), torch.tensor([0, 3]), torch.empty(1, 1, 2))
    with pytest.raises(ValueError, match="segment_sum's input is on meta"):
        _backend.call("segment_sum", torch.zeros(1, 3, 2), torch.tensor([0, 3], device=META), torch.empty(1, 1, 2))


def test_the_bindings_check_every_array_in_cpp():
    """Tensors cross as DLPack capsules, checked in C++ by name: dtype, layout, rank, shape."""
    x, ptr = torch.arange(6.0).reshape(1, 3, 2), torch.tensor([0, 1, 3])
    with pytest.raises(TypeError, match="out: expected dtype float32, got float64"):
        _backend.call("segment_sum", x, ptr, torch.empty(1, 2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="src: array must be C-contiguous"):
        _backend.call("segment_sum", x.transpose(1, 2).contiguous().transpose(1, 2), ptr, torch.empty(1, 2, 2))
    with pytest.raises(TypeError, match="ptr: expected dtype int64, got int32"):
        _backend.call("segment_sum", x, ptr.int(), torch.empty(1, 2, 2))
    out = torch.empty(1, 2, 2)
    _backend.call("segment_sum", x.numpy(), ptr.numpy(), out.numpy())  # NumPy arrays cross too
    torch.testing.assert_close(out[0], torch.tensor([[0.0, 1.0], [6.0, 8.0]]))


def test_threads_follow_torch():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _backend.num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert _backend.kernel_devices() == ("cpu",)
    assert set(_backend.build_info()) >= {"compiler", "openmp", "cuda"}


def test_kernels_back_off_only_when_lagging_regions_repeat():
    """parallel.hpp: one parallel region whose other thread lagged (a VM's vCPU descheduled
    once) keeps the threads; two among the last 16 regions (a busy neighbour, or vCPUs the host
    placed far apart) make mid-sized loops run serially for a while."""
    record = _testing.record_region
    threshold = _testing.serial_work(0)
    try:
        _testing.serial_work(threshold, adaptive=True)  # a fresh history
        assert not record(lagging=True)
        for _ in range(15):
            assert not record(lagging=False)
        assert not record(lagging=True)  # the first lagging region has left the window of 16
        assert not record(lagging=False)
        assert record(lagging=True)  # two within 16 regions
        _testing.serial_work(threshold, adaptive=False)
        assert not record(lagging=True) and not record(lagging=True)  # fixed threshold: never backs off
    finally:
        _testing.serial_work(threshold, adaptive=True)


def test_a_slow_thread_runs_fewer_items_and_backs_the_kernels_off():
    """parallel.hpp: the threads take chunks of a loop in turn, so a thread that runs slowly
    leaves the rest of the loop to the others instead of holding the region up for its static
    half; and such regions count as lagging, so two of them switch mid-sized loops to serial."""
    threshold = _testing.serial_work(0)
    try:
        _testing.serial_work(threshold, adaptive=True)
        with pytest.raises(ValueError, match="must be >= 0"):
            _testing.item_threads(-1, 2, worker_delay_us=0)
        owners = _testing.item_threads(64, 2, worker_delay_us=0)
        assert len(owners) == 64 and set(owners) <= {0, 1}  # every item ran, on one of the two threads
        slow = _testing.item_threads(64, 2, worker_delay_us=2000)  # 2 ms per item off the calling thread
        assert set(slow) <= {0, 1} and slow.count(0) >= 48, f"the calling thread ran {slow.count(0)} of 64 items"
        _testing.item_threads(64, 2, worker_delay_us=2000)
        assert _testing.record_region(lagging=False)  # backing off now
    finally:
        _testing.serial_work(threshold, adaptive=True)


def test_kernels_back_off_when_the_threads_move_far_apart():
    """parallel.hpp: a round trip between the kernel threads over 200 ns and more than 3x the
    shortest this process has seen (the host moved the vCPUs apart) makes mid-sized loops
    serial; one that was always that long (threads on two sockets) does not."""
    record = _testing.record_round_trip
    threshold = _testing.serial_work(0)
    try:
        _testing.serial_work(threshold, adaptive=True)  # forgets the best round trip too
        assert not record(100) and not record(250)
        assert record(350)
        _testing.serial_work(threshold, adaptive=True)
        assert not record(20) and not record(150)  # hyperthreads, then two cores of one die: near
        _testing.serial_work(threshold, adaptive=True)
        assert not record(350) and not record(400)  # as far apart as ever: keep the threads
        _testing.serial_work(threshold, adaptive=False)
        assert not record(100) and not record(10_000)
    finally:
        _testing.serial_work(threshold, adaptive=True)


def test_thread_round_trip_is_a_plausible_time():
    """The diagnostic behind benchmarks/vcpu_placement_check.py: two threads hand a counter back
    and forth; one round trip takes tens to hundreds of nanoseconds, not zero."""
    ns = _testing.thread_round_trip_ns()
    assert ns == -1 or 1 < ns < 1e6, ns  # -1: the second thread did not run within 10 ms (a busy host)


def test_rpfast_simd_selects_the_kernel_module():
    code = "from rpfast import _backend; info = _backend.build_info(); print(info['simd'], info['avx512_kernels'])"
    env = {**os.environ, "RPFAST_SIMD": "baseline"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "baseline []"
    env["RPFAST_SIMD"] = "avx2"  # no kernel from rpfast._C_avx512
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith(" []")
    env["RPFAST_SIMD"] = "fastest"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "RPFAST_SIMD must be one of auto, avx2, baseline, got 'fastest'" in bad.stderr


@pytest.mark.skipif(not _backend.AVX512_KERNELS, reason="needs rpfast._C_avx512 and a CPU with AVX-512")
def test_avx512_kernels_compute_what_the_module_of_every_kernel_computes():
    """rpfast._C_avx512's rooted_pool (16-lane registers) against rpfast._C's (the module the
    other kernels come from): the same operations per root set, so the same bits, on an eval
    block with a remainder of sets (37) and on training's single set; the thread policy reaches
    both modules."""
    import networkx as nx
    from rpfast.data import GraphBatch
    from rpfast.datasets.pairs import networkx_edge_index
    from rpfast.ops.gin import graph_csr

    assert _backend.AVX512_KERNELS == {"rooted_pool", "rooted_round"}
    graphs = [nx.random_regular_graph(3, 30, seed=0), nx.cycle_graph(9)]
    batch = GraphBatch.from_edge_lists([(networkx_edge_index(g), g.number_of_nodes()) for g in graphs])
    gen = torch.Generator().manual_seed(0)
    N, D, L = batch.total_nodes, 8, 6
    tensors = [torch.randn(*shape, generator=gen) for shape in ((N, D), (1, D), (1, L, D, D), (1, L, D, D),
                                                                 (1, L, D))] + [torch.full((N,), 0.7)]
    modules = {"all kernels": _backend._C, "avx512": _backend._C_AVX512}
    for R in (37, 1):
        roots = torch.randint(0, 9, (R, 2, 2), generator=gen)
        outs = {}
        for name, module in modules.items():
            out = torch.empty(R, 2, D)
            capsules = [torch.utils.dlpack.to_dlpack(t) for t in (*tensors, roots, torch.zeros(2, dtype=torch.int64),
                                                                   batch.ptr, *graph_csr(batch)[:2], out)]
            module.rooted_pool(*capsules, 2)
            outs[name] = out
        assert torch.equal(outs["all kernels"], outs["avx512"]), R
    _backend.set_threads_policy("fixed")
    try:
        assert not _backend._C_AVX512.adaptive_threads() and not _backend._C.adaptive_threads()
    finally:
        _backend.set_threads_policy("adaptive")


def test_prepare_converts_nested_lists_tuples_and_namedtuples():
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    a, b = torch.zeros(2), torch.ones(3)
    prepared = _backend.prepare([Pair(a, (b, 1.5)), [a]], "nested")
    pair, (inner,) = prepared.value
    assert isinstance(pair, Pair) and pair.b[1] == 1.5
    for capsule, tensor in ((pair.a, a), (pair.b[0], b), (inner, a)):  # zero-copy DLPack capsules
        assert torch.from_dlpack(capsule).data_ptr() == tensor.data_ptr()
    assert prepared.device == torch.device("cpu")
    with pytest.raises(ValueError, match="arguments are on cpu and meta"):
        _backend.prepare([a, (torch.zeros(1, device=META),)], "nested")


def test_the_production_module_has_no_test_hooks_at_top_level():
    """Test hooks live in the extension's _testing submodule, reached through rpfast._testing."""
    from rpfast import _testing

    extension = _backend.testing_hooks().__name__.rpartition(".")[0]
    module = __import__(extension, fromlist=["_testing"])
    hidden = [name for name in dir(module) if name.startswith("_") and not name.startswith("__")]
    assert hidden == ["_testing"], hidden
    assert all(callable(getattr(_testing, name)) for name in _testing.__all__)


def test_threads_policy_switch_and_environment_variable():
    import rpfast

    assert rpfast.threads_policy() == "adaptive"
    try:
        rpfast.set_threads_policy("fixed")
        assert rpfast.threads_policy() == "fixed"
        with pytest.raises(ValueError, match="'adaptive' or 'fixed', got 'sometimes'"):
            rpfast.set_threads_policy("sometimes")
    finally:
        rpfast.set_threads_policy("adaptive")
    code = "import rpfast; print(rpfast.threads_policy())"
    env = {**os.environ, "RPFAST_THREADS_POLICY": "fixed"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "fixed", done.stderr
    env["RPFAST_THREADS_POLICY"] = "bogus"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "RPFAST_THREADS_POLICY must be 'adaptive' or 'fixed'" in done.stderr
