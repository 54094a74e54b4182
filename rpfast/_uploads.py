"""Host data into a step's device without making the host wait.

What a step computes on the host (relabelings drawn from the CPU's streams, degree groups, root
sets, subgraph structures) has to reach the device its data lives on. ``tensor.to("cuda")`` of
ordinary (pageable) memory waits for the copy; :func:`upload` copies from page-locked memory
with ``non_blocking`` instead, so the host goes on issuing the step while the copy runs (torch's
pinned-memory allocator keeps the host block until the copy has finished).
"""
from typing import Optional

import torch
from torch import Tensor

from rpfast._capture import refuse_while_capturing

__all__ = ["upload"]


def upload(value: Tensor, device, dtype: Optional[torch.dtype] = None) -> Tensor:
    """``value.to(device, dtype)``, without waiting when host memory goes to a device: a CPU
    tensor bound for a CUDA device is converted on the host, pinned and copied asynchronously;
    to another device (``meta``) it moves with ``non_blocking``. Every other move (to the CPU,
    between devices) is torch's own, so a tensor arriving on the host is complete. ``value``
    itself when it is already there; ``device`` None keeps the device (a dtype conversion).
    Refused while a step is captured as a CUDA graph (:mod:`rpfast._capture`): the copy would be
    replayed from the same host memory at every step."""
    if value.device.type == "cpu":  # made on the host in this step: a replayed graph would keep it
        refuse_while_capturing("uploading host data made in the step")
    device = value.device if device is None else torch.device(device)
    if value.device.type != "cpu" or device.type == "cpu" or value.is_pinned():
        return value.to(device=device, dtype=dtype)  # a caller's pinned tensor: its memory may change after
    if device.type == "cuda":
        if dtype is not None:
            value = value.to(dtype)
        return value.pin_memory().to(device, non_blocking=True)
    return value.to(device=device, dtype=dtype, non_blocking=True)
