"""Index arithmetic over segments (the graphs of a batch, the edges of each graph): prefix
offsets, concatenated ranges and repeats, on any device."""
import numpy as np
import torch
from torch import Tensor

from rpfast import _backend

__all__ = ["offsets", "ranges", "repeat"]


def offsets(counts: Tensor) -> Tensor:
    """``[len + 1]`` exclusive prefix sums of ``counts`` (a ``ptr``)."""
    return torch.cat([torch.zeros(1, dtype=torch.int64, device=counts.device), counts.cumsum(0)])


def ranges(starts: Tensor, counts: Tensor) -> Tensor:
    """Concatenation of ``arange(starts[i], starts[i] + counts[i])`` over ``i``."""
    ends = offsets(counts)
    total = int(ends[-1])
    return repeat(starts - ends[:-1], counts, total) + torch.arange(total, device=counts.device)


def repeat(values: Tensor, counts: Tensor, total: int) -> Tensor:
    """``values[i]`` repeated ``counts[i]`` times, ``[total]`` (``total = counts.sum()``).

    NumPy's single-threaded repeat on CPU: torch's ``repeat_interleave`` opens an OpenMP
    parallel region for even a handful of graphs, and a batch is built every training step;
    when another process holds a core, each region can stall for the time slice of a
    descheduled thread. ``output_size`` spares torch's path (compiled or other devices) a
    read-back of the total."""
    if values.device.type != "cpu" or _backend.compiling():
        return torch.repeat_interleave(values, counts, output_size=total)
    return torch.from_numpy(np.repeat(values.numpy(), counts.numpy()))
