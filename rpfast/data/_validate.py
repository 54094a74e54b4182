"""Validation helpers for graph inputs (kept free of rpfast.ops imports)."""
import numpy as np
import torch


def index_tensor(value, name: str) -> torch.Tensor:
    """Integers (tensor/array/list) -> contiguous CPU int64 tensor, else TypeError."""
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers (int64), got {value.dtype}")
        if value.device.type != "cpu":
            raise ValueError(f"{name} is on {value.device}; rpfast graph batches live on the CPU")
        return value.to(torch.int64).contiguous()
    arr = np.asarray(value)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return torch.as_tensor(arr.astype(np.int64, copy=False)).contiguous()


def float_tensor(value, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(np.asarray(value))
    if value.device.type != "cpu":
        raise ValueError(f"{name} is on {value.device}; rpfast graph batches live on the CPU")
    if not (value.dtype.is_floating_point or value.dtype in (torch.int64, torch.int32, torch.bool, torch.uint8)):
        raise TypeError(f"{name} must be numeric, got {value.dtype}")
    if not value.dtype.is_floating_point:
        value = value.to(torch.get_default_dtype())
    return value


def check_sizes(num_nodes: torch.Tensor, name: str = "num_nodes") -> None:
    if num_nodes.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(num_nodes.shape)}")
    if num_nodes.numel() and int(num_nodes.min()) < 0:
        b = int(torch.nonzero(num_nodes < 0)[0, 0])
        raise ValueError(f"{name}[{b}] = {int(num_nodes[b])} is negative")
