"""Argument validation shared by the ops: clear errors before any kernel runs."""
from typing import Iterable, Optional

import numpy as np
import torch

FLOAT_DTYPES = (torch.float32, torch.float64)


def require_tensor(value, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


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


def check_int(value, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_output_size(numel: int, element_size: int, name: str, limit_bytes: int = 1 << 36) -> None:
    """Refuse allocations that cannot be meant (default limit 64 GiB)."""
    if numel * element_size > limit_bytes:
        raise ValueError(
            f"{name} would need {numel * element_size / 2**30:.1f} GiB "
            f"({numel} elements); reduce the batch, samples or k"
        )
