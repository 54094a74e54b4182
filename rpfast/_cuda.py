"""rpfast's CUDA kernels (``rpfast._C_cuda``, built with ``-Ccmake.define.RPFAST_CUDA=ON``) for
the registered ops: loading, the switch, and one tensor-level wrapper per kernel.

Where the module is built and a device is present, CUDA tensors run these kernels;
``RPFAST_CUDA_KERNELS=0`` (read at import) makes them run each op's torch-composed
implementation instead. ``scripts/gpu_check.sh`` compares every kernel with the CPU kernels on a
GPU machine (passed on an NVIDIA H200, 2026-11-27; benchmarks/README.md).

Every wrapper checks its tensors (CUDA, one device, contiguous, dtype) and launches on torch's
current stream of that device; the module itself is torch-free (device pointers in).
"""
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

try:
    from rpfast import _C_cuda
    _IMPORT_ERROR: Optional[str] = None
except ImportError as error:  # the CPU wheel: no CUDA build
    _C_cuda = None
    _IMPORT_ERROR = str(error)

__all__ = ["build_info", "kernels_enabled", "require"]

_SWITCHED_ON = os.environ.get("RPFAST_CUDA_KERNELS", "1") != "0"


def build_info() -> dict:
    """``built`` (whether ``rpfast._C_cuda`` imports), its ``architectures``, ``devices`` (the CUDA
    runtime's count; 0 with ``device_error`` saying why) and whether the kernels serve CUDA
    tensors (``kernels_enabled``)."""
    if _C_cuda is None:
        return {"built": False, "architectures": None, "devices": 0, "device_error": "not built with RPFAST_CUDA",
                "kernels_enabled": False}
    count, error = _C_cuda.device_count()
    return {"built": True, "architectures": _C_cuda.architectures, "devices": count, "device_error": error or None,
            "kernels_enabled": kernels_enabled()}


def kernels_enabled() -> bool:
    """Whether CUDA tensors run rpfast's CUDA kernels (module built, a device present, not
    switched off by ``RPFAST_CUDA_KERNELS=0``; the device count is asked once)."""
    global _ENABLED
    if _ENABLED is None:
        _ENABLED = _SWITCHED_ON and _C_cuda is not None and _C_cuda.device_count()[0] > 0
    return _ENABLED


_ENABLED: Optional[bool] = None


def require() -> None:
    """RuntimeError, in one line, unless the CUDA kernels can run here."""
    if _C_cuda is None:
        raise RuntimeError("rpfast was built without CUDA kernels: reinstall with "
                           "`pip install -Ccmake.define.RPFAST_CUDA=ON .` on a machine with nvcc")
    count, error = _C_cuda.device_count()
    if count == 0:
        raise RuntimeError(f"rpfast's CUDA kernels are built but no CUDA device is usable here ({error})")


def _stream(t: Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream


def _checked(*tensors: Tensor, floats: Tuple = ()) -> torch.device:
    device = tensors[0].device
    for t in tensors:
        if t.device != device or t.device.type != "cuda" or not t.is_contiguous():
            raise ValueError(f"the CUDA kernels take contiguous tensors on one CUDA device, got {t.device}, "
                             f"contiguous={t.is_contiguous()}")
    for t in floats:
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"the CUDA kernels take float32 or float64, got {t.dtype}")
    return device


def random_permutations(num_nodes: Tensor, samples: int, K: int, seed: int) -> Tensor:
    """``[B, P, K]`` int64 on ``num_nodes``' device: the rows ``rpfast.ops.random_permutations``
    draws on the CPU for the same seed (the same counter-based streams)."""
    num_nodes = num_nodes.to(torch.int64).contiguous()
    _checked(num_nodes)
    B = num_nodes.shape[0]
    n_max = int(num_nodes.max()) if B else 0
    out = torch.empty((B, samples, K), dtype=torch.int64, device=num_nodes.device)
    workspace = torch.empty((B * samples, max(n_max, 1)), dtype=torch.int64, device=num_nodes.device)
    with torch.cuda.device(num_nodes.device):
        _C_cuda.random_permutations(num_nodes.data_ptr(), B, samples, K, n_max, seed, workspace.data_ptr(),
                                    out.data_ptr(), _stream(num_nodes))
    return out


def random_positions(ptr: Tensor, samples: int, modulus: int, seed: int) -> Tensor:
    """``[P, N]`` int64 on ``ptr``'s device: the positions ``rpfast.ops.random.random_positions``
    draws on the CPU for the same seed."""
    ptr = ptr.to(torch.int64).contiguous()
    _checked(ptr)
    B, N = ptr.shape[0] - 1, int(ptr[-1])
    n_max = int(ptr.diff().max()) if B else 0
    out = torch.empty((samples, N), dtype=torch.int64, device=ptr.device)
    workspace = torch.empty((B * samples, max(n_max, 1)), dtype=torch.int64, device=ptr.device)
    with torch.cuda.device(ptr.device):
        _C_cuda.random_positions(ptr.data_ptr(), B, samples, N, n_max, modulus, seed, workspace.data_ptr(),
                                 out.data_ptr(), _stream(ptr))
    return out


def _inverse(perms: Tensor, n_max: int) -> Tensor:
    inv = torch.empty((perms.shape[0], perms.shape[1], n_max), dtype=torch.int64, device=perms.device)
    _C_cuda.invert_permutations(perms.data_ptr(), perms.shape[0] * perms.shape[1], perms.shape[2], n_max,
                                inv.data_ptr(), _stream(perms))
    return inv


def permute_adjacency(adj: Tensor, perms: Tensor) -> Tensor:
    """``[B, P, K, K, C]`` (see :func:`rpfast.ops.permute_adjacency`); ``adj [B, N, N, C]``."""
    _checked(adj, perms, floats=(adj,))
    B, N, _, C = adj.shape
    P, K = perms.shape[1], perms.shape[2]
    out = adj.new_empty((B, P, K, K, C))
    with torch.cuda.device(adj.device):
        _C_cuda.permute_adjacency_forward(adj.dtype == torch.float64, adj.data_ptr(), perms.data_ptr(),
                                          out.data_ptr(), B, N, C, P, K, _stream(adj))
    return out


def permute_adjacency_backward(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    """``[B, n_max, n_max, C]``: the adjoint gather by the inverse permutations, summed over the
    samples in increasing order (no atomics)."""
    _checked(grad, perms, floats=(grad,))
    B, P, K, _, C = grad.shape
    grad_adj = grad.new_empty((B, n_max, n_max, C))
    with torch.cuda.device(grad.device):
        inv = _inverse(perms, n_max)
        _C_cuda.permute_adjacency_backward(grad.dtype == torch.float64, grad.data_ptr(), inv.data_ptr(),
                                           grad_adj.data_ptr(), B, n_max, C, P, K, _stream(grad))
    return grad_adj


def permute_nodes(x: Tensor, perms: Tensor) -> Tensor:
    """``[B, P, K, F]`` (see :func:`rpfast.ops.permute_nodes`); ``x [B, N, F]``."""
    _checked(x, perms, floats=(x,))
    B, N, F = x.shape
    P, K = perms.shape[1], perms.shape[2]
    out = x.new_empty((B, P, K, F))
    with torch.cuda.device(x.device):
        _C_cuda.permute_nodes_forward(x.dtype == torch.float64, x.data_ptr(), perms.data_ptr(), out.data_ptr(),
                                      B, N, F, P, K, _stream(x))
    return out


def permute_nodes_backward(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    """``[B, n_max, F]``: the adjoint of :func:`permute_nodes`, summed over the samples in order."""
    _checked(grad, perms, floats=(grad,))
    B, P, K, F = grad.shape
    grad_x = grad.new_empty((B, n_max, F))
    with torch.cuda.device(grad.device):
        inv = _inverse(perms, n_max)
        _C_cuda.permute_nodes_backward(grad.dtype == torch.float64, grad.data_ptr(), inv.data_ptr(),
                                       grad_x.data_ptr(), B, n_max, F, P, K, _stream(grad))
    return grad_x


def segment_sum(x: Tensor, ptr: Tensor) -> Tensor:
    """``[R, B, F]`` per-graph sums of ``x [R, N, F]`` (rows in increasing order)."""
    _checked(x, ptr, floats=(x,))
    R, N, F = x.shape
    B = ptr.shape[0] - 1
    out = x.new_empty((R, B, F))
    with torch.cuda.device(x.device):
        _C_cuda.segment_sum(x.dtype == torch.float64, x.data_ptr(), ptr.data_ptr(), out.data_ptr(), R, N, B, F,
                            _stream(x))
    return out


def gin_aggregate(x: Tensor, rowptr: Tensor, col: Tensor, eps: float) -> Tensor:
    """``(1 + eps) x_i + sum_{j in row i} x_j`` for ``x [R, N, F]`` over the CSR ``(rowptr, col)``."""
    _checked(x, rowptr, col, floats=(x,))
    R, N, F = x.shape
    out = torch.empty_like(x)
    with torch.cuda.device(x.device):
        _C_cuda.gin_aggregate(x.dtype == torch.float64, x.data_ptr(), rowptr.data_ptr(), col.data_ptr(), float(eps),
                              out.data_ptr(), R, N, F, _stream(x))
    return out


def segment_max(x: Tensor, ptr: Tensor) -> Tuple[Tensor, Tensor]:
    """``(out [B, F], ties [B, F])``: per-graph channel maxima of ``x [N, F]`` and how many rows
    attain them (the CPU's running-max step; an empty graph gives 0 and 0)."""
    _checked(x, ptr, floats=(x,))
    B, F = ptr.shape[0] - 1, x.shape[1]
    out, ties = x.new_empty((B, F)), x.new_empty((B, F))
    with torch.cuda.device(x.device):
        _C_cuda.segment_max(x.dtype == torch.float64, x.data_ptr(), ptr.data_ptr(), out.data_ptr(), ties.data_ptr(),
                            B, F, _stream(x))
    return out, ties


def segment_max_backward(grad: Tensor, x: Tensor, ptr: Tensor, out: Tensor, ties: Tensor) -> Tensor:
    """``[N, F]``: each graph's gradient shared evenly among the rows attaining its maximum."""
    _checked(grad, x, ptr, out, ties, floats=(grad, x))
    B, F = ptr.shape[0] - 1, x.shape[1]
    grad_x = torch.empty_like(x)
    with torch.cuda.device(x.device):
        _C_cuda.segment_max_backward(x.dtype == torch.float64, x.data_ptr(), ptr.data_ptr(), out.data_ptr(),
                                     ties.data_ptr(), grad.data_ptr(), grad_x.data_ptr(), B, F, _stream(x))
    return grad_x
