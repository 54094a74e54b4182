"""The one validation layer: argument checks shared by every public function, and the one
memory budget.

Every public entry point validates its arguments here, once, before any kernel runs; the
bindings then only check that the buffers they receive match (dtype, shape, contiguity).
Every helper raises ``TypeError``/``ValueError`` whose message names the argument and
shows the bad value, so callers never surface NumPy or torch internals to the user.

Memory budget: every allocation that grows combinatorially or quadratically
(enumerations, dense adjacency views, relabeled tensors) is checked against it first.
The default is half of the memory available when the check runs (``MemAvailable``), so a
request this machine cannot hold fails at once with a clear error instead of swapping or
being killed. :func:`set_memory_budget` fixes a budget; ``None`` restores the default.

This module sits below everything else (``_validation <- _backend <- data <- ops <- nn``) and imports
no other rpfast module.
"""
import os
import sys
from numbers import Real
from typing import Iterable, Optional, Tuple

import numpy as np
import torch

# ============================================================ memory budget

_MIN_DEFAULT = 64 * 2**20
_budget: Optional[int] = None


def available_memory() -> int:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``; else physical)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


def get_memory_budget() -> int:
    """Bytes one rpfast result may take: the value set by :func:`set_memory_budget`, or by
    default half of :func:`available_memory` (at least 64 MiB)."""
    if _budget is not None:
        return _budget
    return max(_MIN_DEFAULT, available_memory() // 2)


def set_memory_budget(num_bytes: Optional[int]) -> None:
    """Fix the memory budget (bytes, > 0), or restore the default with ``None``."""
    global _budget
    if num_bytes is None:
        _budget = None
        return
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int) and not hasattr(num_bytes, "__index__"):
        raise TypeError(f"num_bytes must be an int or None, got {type(num_bytes).__name__}")
    num_bytes = int(num_bytes.__index__())
    if num_bytes < 1:
        raise ValueError(f"num_bytes must be >= 1, got {num_bytes}")
    _budget = num_bytes


def check_memory(num_bytes: int, what: str, hint: str = "", budget: Optional[int] = None) -> None:
    """Raise ValueError if ``num_bytes`` exceed the budget, naming ``what`` and the sizes."""
    if budget is None and _budget is None and num_bytes <= _MIN_DEFAULT:
        return  # within every default budget: no need to read the system's free memory
    limit = get_memory_budget() if budget is None else budget
    if num_bytes > limit:
        raise ValueError(
            f"{what} would need {_gib(num_bytes)}, more than the memory budget of {_gib(limit)}"
            + (f"; {hint}" if hint else "")
            + " (rpfast.set_memory_budget changes the budget)"
        )


def _gib(num_bytes: int) -> str:
    if num_bytes >= 2**26:
        return f"{num_bytes / 2**30:.2f} GiB"
    return f"{num_bytes / 2**20:.2f} MiB" if num_bytes >= 2**20 else f"{num_bytes} bytes"


# ============================================================ values and tensors
def is_pyg_data(value) -> bool:
    """True for a ``torch_geometric.data.Data`` or ``Batch`` (without importing PyG)."""
    pyg = sys.modules.get("torch_geometric.data")
    return pyg is not None and isinstance(value, pyg.Data)


def _reject_graph_objects(value, name: str) -> None:
    if is_pyg_data(value):
        raise TypeError(f"{name} is a torch_geometric {type(value).__name__}, not an index tensor; "
                        f"convert it with GraphBatch.from_pyg(batch)")
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        hint = ("for PyG's adj_t (stored entry adj_t[i, j] = edge j -> i, COO or CSR) pass "
                f"{name}=rpfast.data.edge_index_from_adj_t(adj_t); rpfast's graph layers also take adj_t "
                "in edge_index's place") if name == "edge_index" else f"pass {name}.to_dense()"
        raise TypeError(f"{name} is a sparse tensor ({value.layout}); {hint}")


def index_tensor(value, name: str, *, ndim: Optional[int] = None) -> torch.Tensor:
    """Integers (tensor/array/list) -> contiguous int64 tensor (a tensor keeps its device), else
    TypeError/ValueError; with ``ndim``, also checks the number of dimensions."""
    if type(value) is torch.Tensor and value.dtype == torch.int64 and value.layout == torch.strided:
        # the common case, without the general checks
        t = value.contiguous()
    elif isinstance(value, torch.Tensor):
        _reject_graph_objects(value, name)
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers (int64), got {value.dtype}")
        _check_unsigned_fits(value, name)
        t = value.to(torch.int64).contiguous()
    else:
        _reject_graph_objects(value, name)
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as error:  # ragged nesting, unconvertible objects
            raise TypeError(f"{name} must be an integer tensor/array, got {type(value).__name__} ({error})") from None
        if arr.dtype == object or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"{name} must hold integers, got {type(value).__name__} of dtype {arr.dtype}")
        if arr.size and arr.dtype.kind == "u" and arr.max() > INT64_MAX:
            _raise_beyond_int64(name, np.unravel_index(int(np.argmax(arr > INT64_MAX)), arr.shape),
                                int(arr.max()))
        t = torch.as_tensor(arr.astype(np.int64, copy=False)).contiguous()
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    return t


def _check_unsigned_fits(value: torch.Tensor, name: str) -> None:
    """A uint64 entry above 2^63 - 1 would wrap to a negative int64: name it instead."""
    if value.dtype == torch.uint64 and value.numel():
        bits = value.view(torch.int64)  # the same bits: entries above 2^63 - 1 read negative
        beyond = bits < 0
        if bool(beyond.any()):
            where = tuple(int(i) for i in torch.nonzero(beyond)[0])
            _raise_beyond_int64(name, where, int(bits[where]) + 2**64)


def _raise_beyond_int64(name: str, where, value: int) -> None:
    index = f"[{', '.join(str(int(i)) for i in where)}]" if len(where) else ""
    raise ValueError(f"{name}{index} = {value} is beyond int64 (at most {INT64_MAX})")


def float_tensor(value, name: str) -> torch.Tensor:
    """Numbers (tensor/array/list) -> floating tensor (integers become the default dtype; a tensor
    keeps its device)."""
    if type(value) is torch.Tensor and value.dtype.is_floating_point and value.layout == torch.strided:
        # the common case, without the general checks
        return value
    _reject_graph_objects(value, name)
    if not isinstance(value, torch.Tensor):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as error:
            raise TypeError(f"{name} must be a numeric tensor/array, got {type(value).__name__} ({error})") from None
        if arr.dtype == object:
            raise TypeError(f"{name} must be numeric, got {type(value).__name__} of dtype object")
        value = torch.as_tensor(arr)
    if not (value.dtype.is_floating_point or value.dtype in (torch.int64, torch.int32, torch.bool, torch.uint8)):
        raise TypeError(f"{name} must be numeric, got {value.dtype}")
    if not value.dtype.is_floating_point:
        value = value.to(torch.get_default_dtype())
    return value


def check_count(value, name: str, minimum: int = 0) -> int:
    """An int-like count (Python/NumPy int or 0-d integer tensor) ``>= minimum`` as an ``int``.

    ``bool``, floats (even ``3.0``) and strings are a ``TypeError``: they are never counts, and
    silently truncating or parsing them hides bugs.
    """
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not (
        value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool
    ):
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_real(value, name: str) -> float:
    """A real number (Python/NumPy, or a one-element float tensor) as a ``float``; else TypeError."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.integer, np.floating)):
        raise TypeError(f"{name} must be a float or a tensor of one float, got {value!r} ({type(value).__name__})")
    return float(value)


def check_sizes(num_nodes: torch.Tensor, name: str = "num_nodes") -> None:
    if num_nodes.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(num_nodes.shape)}")
    if num_nodes.numel() and int(num_nodes.min()) < 0:
        b = int(torch.nonzero(num_nodes < 0)[0, 0])
        raise ValueError(f"{name}[{b}] = {int(num_nodes[b])} is negative")


# ============================================================ op arguments
FLOAT_DTYPES = (torch.float32, torch.float64)


def require_tensor(value, name: str) -> torch.Tensor:
    """``value`` must be a dense (strided) torch.Tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    require_dense(value, name)
    return value


def require_dense(t: torch.Tensor, name: str) -> None:
    if t.layout != torch.strided:
        raise TypeError(f"{name} is a {t.layout} tensor; rpfast ops take dense tensors ({name}.to_dense())")


def require_flag(value, name: str) -> bool:
    """A Python/NumPy bool (``training``, ``skip_invalid``, ...), else TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


# Device types with compiled kernels (rpfast._backend, which owns them, checks its table against it).
KERNEL_DEVICES: Tuple[str, ...] = ("cpu",)


def require_kernel_device(t: torch.Tensor, name: str) -> None:
    """``t`` must be on a device this build has kernels for (the one device error of every op)."""
    if t.device.type not in KERNEL_DEVICES:
        raise ValueError(f"{name} is on {t.device}, but this rpfast build has kernels for "
                         f"{', '.join(KERNEL_DEVICES)} only; move it with {name}.cpu()")


def require_float(t: torch.Tensor, name: str) -> None:
    """TypeError unless ``t`` is float32 or float64; for half precision (float16, bfloat16) the
    message says it is not supported and how to convert."""
    if t.dtype not in FLOAT_DTYPES:
        half = t.dtype in (torch.float16, torch.bfloat16)
        raise TypeError(f"{name} must be float32 or float64, got {t.dtype}" + (
            ": rpfast does not support half precision (float16/bfloat16); convert the input with .float() "
            "and the model with model.float()" if half else ""))


def require_index(t: torch.Tensor, name: str) -> None:
    if t.dtype != torch.int64:
        raise TypeError(f"{name} must be an int64 (torch.long) tensor, got {t.dtype}")


def require_ndim(t: torch.Tensor, name: str, ndims: Iterable[int], layout: str) -> None:
    ndims = tuple(ndims)
    if t.dim() not in ndims:
        raise ValueError(
            f"{name} must have shape {layout}, got {tuple(t.shape)} ({t.dim()} dimensions)"
        )


INT64_MAX = 2**63 - 1


def check_int(value, name: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """``value`` as a Python int in [minimum, maximum] (:func:`check_count`, plus a maximum:
    the kernels take 64-bit sizes)."""
    value = check_count(value, name, minimum)
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_output_size(numel: int, element_size: int, name: str) -> None:
    """Refuse outputs beyond the memory budget (:func:`rpfast.get_memory_budget`)."""
    check_memory(numel * element_size, name, "reduce the batch, the samples or k")


def check_layout(shape: tuple, name: str) -> None:
    """ValueError unless torch can lay out a tensor of ``shape``: its strides multiply the sizes
    (a zero counted as one), so even an empty batch of 2^62 samples overflows them."""
    entries = 1
    for size in shape:
        entries *= max(int(size), 1)
    if entries > INT64_MAX:
        raise ValueError(f"{name} of shape {list(shape)} cannot be laid out (its strides exceed 2^63); "
                         "use fewer samples or positions")


def eps_tensor(eps, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """GIN's epsilon as a one-element tensor of ``dtype`` on ``device`` (keeps autograd) from a
    Python/NumPy number (0-d) or a one-element floating-point tensor on ``device`` (kept as it
    is when it has ``dtype``: a reshape would add an autograd node to every call; gradients keep
    its shape)."""
    if isinstance(eps, torch.Tensor):
        require_dense(eps, "eps")
        if eps.numel() != 1 or not eps.dtype.is_floating_point:
            raise ValueError(f"eps must be a float or a one-element float tensor, got shape {tuple(eps.shape)} "
                             f"{eps.dtype}")
        if eps.device != device:
            raise ValueError(f"eps is on {eps.device} but the input is on {device}; put them on one device")
        return eps if eps.dtype == dtype else eps.to(dtype)
    return torch.tensor(check_real(eps, "eps"), dtype=dtype, device=device)
