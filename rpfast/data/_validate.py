"""Validation helpers for graph inputs (kept free of rpfast.ops imports).

Every helper raises ``TypeError``/``ValueError`` whose message names the argument and shows
the bad value, so callers never surface NumPy or torch internals to the user.
"""
import sys
from numbers import Real

import numpy as np
import torch


def is_pyg_data(value) -> bool:
    """True for a ``torch_geometric.data.Data`` or ``Batch`` (without importing PyG)."""
    pyg = sys.modules.get("torch_geometric.data")
    return pyg is not None and isinstance(value, pyg.Data)


def _reject_graph_objects(value, name: str) -> None:
    if is_pyg_data(value):
        raise TypeError(f"{name} is a torch_geometric {type(value).__name__}, not an index tensor; "
                        f"convert it with GraphBatch.from_pyg(batch)")
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        hint = f"pass its indices instead: {name}=adj.coalesce().indices()" if name == "edge_index" \
            else f"pass {name}.to_dense()"
        raise TypeError(f"{name} is a sparse tensor ({value.layout}); {hint}")


def index_tensor(value, name: str) -> torch.Tensor:
    """Integers (tensor/array/list) -> contiguous CPU int64 tensor, else TypeError."""
    _reject_graph_objects(value, name)
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers (int64), got {value.dtype}")
        if value.device.type != "cpu":
            raise ValueError(f"{name} is on {value.device}; rpfast graph batches live on the CPU")
        return value.to(torch.int64).contiguous()
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as error:  # ragged nesting, unconvertible objects
        raise TypeError(f"{name} must be an integer tensor/array, got {type(value).__name__} ({error})") from None
    if arr.dtype == object or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must hold integers, got {type(value).__name__} of dtype {arr.dtype}")
    return torch.as_tensor(arr.astype(np.int64, copy=False)).contiguous()


def float_tensor(value, name: str) -> torch.Tensor:
    """Numbers (tensor/array/list) -> CPU floating tensor (integers become the default dtype)."""
    _reject_graph_objects(value, name)
    if not isinstance(value, torch.Tensor):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as error:
            raise TypeError(f"{name} must be a numeric tensor/array, got {type(value).__name__} ({error})") from None
        if arr.dtype == object:
            raise TypeError(f"{name} must be numeric, got {type(value).__name__} of dtype object")
        value = torch.as_tensor(arr)
    if value.device.type != "cpu":
        raise ValueError(f"{name} is on {value.device}; rpfast graph batches live on the CPU")
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
