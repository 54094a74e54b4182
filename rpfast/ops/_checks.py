"""Argument validation shared by the ops: clear errors before any kernel runs."""
from typing import Iterable, Optional

import numpy as np
import torch

from rpfast._validation import check_memory
from rpfast.data._validate import check_count, check_real

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


def require_cpu(t: torch.Tensor, name: str) -> None:
    if t.device.type != "cpu":
        raise ValueError(
            f"{name} is on {t.device}, but this rpfast build has CPU kernels only; "
            f"move it with {name}.cpu()"
        )


def require_float(t: torch.Tensor, name: str) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {t.dtype}")


def require_index(t: torch.Tensor, name: str) -> None:
    if t.dtype != torch.int64:
        raise TypeError(f"{name} must be an int64 (torch.long) tensor, got {t.dtype}")


def require_ndim(t: torch.Tensor, name: str, ndims: Iterable[int], layout: str) -> None:
    ndims = tuple(ndims)
    if t.dim() not in ndims:
        raise ValueError(
            f"{name} must have shape {layout}, got {tuple(t.shape)} ({t.dim()} dimensions)"
        )


def as_index_tensor(value, name: str, *, ndim: Optional[int] = None) -> torch.Tensor:
    """Turn a sequence/array/tensor of integers into a contiguous CPU int64 tensor."""
    if isinstance(value, torch.Tensor):
        require_dense(value, name)
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got {value.dtype}")
        t = value
    else:
        arr = np.asarray(value)
        if arr.dtype == object or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"{name} must hold integers, got {arr.dtype}")
        t = torch.as_tensor(arr.astype(np.int64, copy=False))
    require_cpu(t, name)
    t = t.to(torch.int64).contiguous()
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    return t


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


def eps_tensor(eps, dtype: torch.dtype) -> torch.Tensor:
    """GIN's epsilon as a 0-d tensor of ``dtype`` (keeps autograd): a Python/NumPy number
    or a one-element floating-point tensor."""
    if isinstance(eps, torch.Tensor):
        require_dense(eps, "eps")
        require_cpu(eps, "eps")
        if eps.numel() != 1 or not eps.dtype.is_floating_point:
            raise ValueError(f"eps must be a float or a one-element float tensor, got shape {tuple(eps.shape)} "
                             f"{eps.dtype}")
        return eps.reshape(()).to(dtype)
    return torch.tensor(check_real(eps, "eps"), dtype=dtype)
