"""Uniform random relabelings for pi-SGD (one or more permutations per graph)."""
from typing import Optional

import torch
from torch import Tensor

from rpfast import _backend
from rpfast._capture import refuse_while_capturing
from rpfast._uploads import upload
from rpfast.data import GraphBatch
from rpfast.ops import seed_tape
from rpfast.ops._registry import declare
from rpfast._validation import check_int, check_layout, check_output_size, index_tensor

__all__ = ["random_permutations", "random_positions", "graph_positions", "seed_from_generator"]


def seed_from_generator(generator: Optional[torch.Generator]) -> int:
    """Draw a 64-bit kernel seed from ``generator`` (torch's default one if None).

    Advances the generator, so consecutive calls give fresh, reproducible seeds.
    """
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator, got one on {generator.device}")
    high, low = torch.randint(0, 2**62, (2,), generator=generator, dtype=torch.int64).tolist()  # CPU memory
    return (high << 2) ^ low


# ------------------------------------------------------------------ the draws, one op each
# A 64-bit kernel seed crosses the op schema (int64) as its two's-complement value.
def _signed(seed: int) -> int:
    return seed - 2**64 if seed >= 2**63 else seed


def _unsigned(seed: int) -> int:
    return seed % 2**64


def _permutations_cpu(num_nodes: Tensor, seed: int, samples: int, k: int) -> Tensor:
    out = torch.empty((num_nodes.shape[0], samples, k), dtype=torch.int64)
    _backend.call("random_permutations", num_nodes, _unsigned(seed), out)
    return out


def _permutations_cuda(num_nodes: Tensor, seed: int, samples: int, k: int) -> Tensor:
    """The same counter-based streams as the CPU, one row per thread; each row's Fisher-Yates pool
    is a row of ``workspace [B * P, n_max]``."""
    B = num_nodes.shape[0]
    n_max = int(num_nodes.max()) if B else 0
    out = torch.empty((B, samples, k), dtype=torch.int64, device=num_nodes.device)
    workspace = torch.empty((B * samples, max(n_max, 1)), dtype=torch.int64, device=num_nodes.device)
    _backend.call("random_permutations", num_nodes, _unsigned(seed), workspace, out)
    return out


def _permutations_elsewhere(num_nodes: Tensor, seed: int, samples: int, k: int) -> Tensor:
    """Drawn by the CPU kernel and moved: the same permutations on every device and backend."""
    return upload(_permutations_cpu(num_nodes.cpu(), seed, samples, k), num_nodes.device)


permutations_op = declare(
    "random_permutations", "(Tensor num_nodes, int seed, int samples, int k) -> Tensor",
    kernels={"cpu": _permutations_cpu, "cuda": _permutations_cuda}, composed=_permutations_elsewhere,
    fake=lambda num_nodes, seed, samples, k: num_nodes.new_empty((num_nodes.shape[0], samples, k)))


def _seed(seed: int, seed_at: Optional[Tensor]) -> int:
    """The kernel seed: ``seed``, or the value in ``seed_at`` (a CPU tensor here: read for free)."""
    return _unsigned(seed if seed_at is None else int(seed_at))


def _positions_cpu(ptr: Tensor, host_ptr: Tensor, seed: int, seed_at: Optional[Tensor], samples: int, modulus: int,
                   total_nodes: int, n_max: int) -> Tensor:
    out = torch.empty((samples, total_nodes), dtype=torch.int64)
    _backend.call("random_positions", host_ptr, modulus, _seed(seed, seed_at), out)
    return out


def _positions_cuda(ptr: Tensor, host_ptr: Tensor, seed: int, seed_at: Optional[Tensor], samples: int, modulus: int,
                    total_nodes: int, n_max: int) -> Tensor:
    """The CPU's streams on the device; each graph's Fisher-Yates pool is a row of ``workspace
    [B * P, n_max]`` (``n_max`` from the host: nothing is read back). ``seed_at`` (one int64 on
    the device) is read by the kernel: a captured CUDA graph's seed, refilled before each replay."""
    B = ptr.shape[0] - 1
    out = torch.empty((samples, total_nodes), dtype=torch.int64, device=ptr.device)
    workspace = torch.empty((B * samples, max(n_max, 1)), dtype=torch.int64, device=ptr.device)
    _backend.call("random_positions", ptr, modulus, _unsigned(seed), seed_at, workspace, out)
    return out


def _positions_elsewhere(ptr: Tensor, host_ptr: Tensor, seed: int, seed_at: Optional[Tensor], samples: int,
                         modulus: int, total_nodes: int, n_max: int) -> Tensor:
    """Drawn from the host's copy of the sizes by the CPU kernel and moved: the same positions on
    every device and backend, and no read of device memory (on ``meta`` the move keeps the shape).
    A ``seed_at`` on a device is read back (so this form is not captured in a CUDA graph)."""
    if seed_at is not None:
        refuse_while_capturing("drawing relabelings on the host (rpfast without its CUDA kernels)")
        seed = int(seed_at)
    return upload(_positions_cpu(host_ptr, host_ptr, seed, None, samples, modulus, total_nodes, n_max), ptr.device)


positions_op = declare(
    "random_positions", "(Tensor ptr, Tensor host_ptr, int seed, Tensor? seed_at, int samples, int modulus, "
                        "SymInt total_nodes, SymInt n_max) -> Tensor",
    kernels={"cpu": _positions_cpu, "cuda": _positions_cuda}, composed=_positions_elsewhere,
    fake=lambda ptr, host_ptr, seed, seed_at, samples, modulus, total_nodes, n_max: ptr.new_empty(
        (samples, total_nodes)))


def graph_positions(graph, num_samples: int, modulus: int, generator: Optional[torch.Generator] = None) -> Tensor:
    """:func:`random_positions` of a :class:`~rpfast.data.GraphBatch` (valid by construction, its
    sizes known on the host), for layers: the counts are checked, the batch's offsets are not (no
    read of device memory), so a training step on a GPU draws its IDs without waiting for it.

    While a training step is captured as a CUDA graph (:mod:`rpfast.ops.seed_tape`), the seed
    comes from the tape's buffer, which is refilled from ``generator`` before every replay: the
    same draws, in the same order, as the step run eagerly."""
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    modulus = check_int(modulus, "modulus", minimum=1)
    check_output_size(num_samples * graph.total_nodes, 8, "random_positions output")
    tape = seed_tape.active()
    if tape is None:
        seed, seed_at = _signed(seed_from_generator(generator)), None
    else:
        seed, seed_at = 0, tape.slot(generator, lambda: _signed(seed_from_generator(generator)))
    return positions_op(graph.ptr, graph.host_ptr, seed, seed_at, num_samples, modulus, graph.total_nodes,
                        graph.n_max)


# ------------------------------------------------------------------ public API
def random_permutations(
    num_nodes,
    num_samples: int = 1,
    k: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """Uniformly random (partial) relabelings of every graph in a batch.

    ``out[b, p, :min(k, n_b)]`` are the first positions of a uniformly random
    permutation of ``0..n_b-1`` (so every ordered k-subset is equally likely), and the
    positions beyond ``n_b`` hold -1. Rows are drawn by a partial Fisher-Yates shuffle
    from a counter-based generator keyed by (seed, row), so the result depends only on
    ``generator``'s state, never on the thread count.

    Args:
        num_nodes: ``[B]`` graph sizes (tensor, array or list of non-negative ints).
        num_samples: permutations per graph ``P`` (>= 1, default 1).
        k: positions per permutation ``K`` (default ``max(num_nodes)``); the k-ary view.
        generator: a CPU ``torch.Generator``; advanced by one draw per call.

    Returns:
        LongTensor ``[B, P, K]`` in the gather convention, ready for
        :func:`rpfast.ops.permute_adjacency`, on ``num_nodes``' device (drawn on the CPU: the
        same permutations on every device).
    """
    num_nodes = index_tensor(num_nodes, "num_nodes", ndim=1)
    if num_nodes.numel() and int(num_nodes.min()) < 0:
        bad = int(torch.nonzero(num_nodes < 0)[0, 0])
        raise ValueError(f"num_nodes[{bad}] = {int(num_nodes[bad])} is negative")
    samples = check_int(num_samples, "num_samples", minimum=1)
    n_max = int(num_nodes.max()) if num_nodes.numel() else 0
    K = n_max if k is None else check_int(k, "k", minimum=0)
    B = num_nodes.numel()
    check_layout((B, samples, K), "the random_permutations output")
    check_output_size(B * samples * K, 8, "random_permutations output")
    return permutations_op(num_nodes.contiguous(), _signed(seed_from_generator(generator)), samples, K)


def random_positions(ptr: Tensor, num_samples: int, modulus: int, generator: Optional[torch.Generator] = None) -> Tensor:
    """``[num_samples, N]``: every node's position under ``num_samples`` uniformly random
    relabelings of its graph, mod ``modulus`` (RP-GIN's IDs, Murphy et al. eq. 3).

    ``out[p, i] = random_permutations(sizes, num_samples)[b, p, i - ptr[b]] % modulus`` for the
    node ``i`` of graph ``b`` with the same generator state, without the ``[B, P, n_max]``
    intermediate. (A uniform permutation read as positions is again uniform, so each graph's
    row is a uniformly random position assignment.)

    Args:
        ptr: ``[B + 1]`` node offsets of the graphs (``GraphBatch.ptr``).
        num_samples: relabelings ``P >= 1``; modulus: ``m >= 1``.
        generator: a CPU ``torch.Generator``; advanced by one draw per call.

    Drawn on the CPU and returned on ``ptr``'s device.
    """
    ptr = index_tensor(ptr, "ptr", ndim=1)
    samples = check_int(num_samples, "num_samples", minimum=1)
    modulus = check_int(modulus, "modulus", minimum=1)
    if ptr.numel() < 1:
        raise ValueError("ptr must hold at least one offset (0)")
    host_ptr = ptr.cpu()
    if int(host_ptr[0]) != 0 or bool((host_ptr.diff() < 0).any()):
        raise ValueError(f"ptr must start at 0 and never decrease, got {host_ptr.tolist()[:8]}")
    N = int(host_ptr[-1])
    check_output_size(samples * N, 8, "random_positions output")
    n_max = int(host_ptr.diff().max()) if host_ptr.numel() > 1 else 0
    return positions_op(ptr.contiguous(), host_ptr.contiguous(), _signed(seed_from_generator(generator)), None,
                        samples, modulus, N, n_max)


def _sample_ids(ptr: Tensor, total_nodes: int, samples: int, id_dim: int) -> Tensor:
    return random_positions(ptr, samples, id_dim)  # torch's default generator: compiled code has no other


sample_ids_op = declare(
    "sample_ids", "(Tensor ptr, SymInt total_nodes, int samples, int id_dim) -> Tensor",
    kernels={"cpu": _sample_ids}, composed=_sample_ids,
    fake=lambda ptr, total_nodes, samples, id_dim: ptr.new_empty((samples, total_nodes)))
sample_ids_op.__doc__ = """``[samples, N]`` RP-GIN IDs for compiled code: each node's position under a uniform
order of its graph, mod ``id_dim`` (:func:`random_positions` with torch's default generator)."""
