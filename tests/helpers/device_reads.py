"""What makes a training step on a GPU wait for the host, counted on the CPU.

A step waits when the host reads device memory: ``item()``, ``int()``, ``bool()`` of a tensor
(``aten::_local_scalar_dense``), and ops whose output shape depends on the data (``nonzero``,
``unique``, ``masked_select``, ``bincount``, ...), whose size the host must learn before it can
allocate. :class:`DeviceReads` counts those ops on device data: the tensors it is given (the
model's parameters and buffers, the step's inputs and their batches' tensors) and everything
computed from them. What the step makes from host data alone (sizes given as a list, a batch's
host-side views, draws from a CPU ``torch.Generator``, factories such as ``arange``, which on the
CPU cannot say which side they are on) is host data and not counted. Reads that bypass the
dispatcher (``tolist()``) and reads of factory-made data on a device are not seen here; the
``meta`` device, where every read fails, catches them on the composed path.
"""
import traceback
import weakref
from pathlib import Path
from typing import Iterable, List

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten

# ops that read data back or size their output by it
WAITS = {
    aten._local_scalar_dense.default, aten.nonzero.default, aten.nonzero_static.default,
    aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default, aten.masked_select.default,
    aten.bincount.default, aten.repeat_interleave.Tensor, aten.is_nonzero.default,
}


def _tensors(values) -> List[torch.Tensor]:
    return [v for v in tree_flatten(values)[0] if isinstance(v, torch.Tensor)]


class _Tensors:
    """A set of tensors by identity that does not keep them alive (a WeakSet compares tensors
    with ``==``, which is elementwise)."""

    def __init__(self, tensors: Iterable[torch.Tensor] = ()):
        self._refs = {}
        self.update(tensors)

    def update(self, tensors: Iterable[torch.Tensor]) -> None:
        for t in tensors:
            self._refs[id(t)] = weakref.ref(t)

    def __contains__(self, t: torch.Tensor) -> bool:
        ref = self._refs.get(id(t))
        return ref is not None and ref() is t


def _waits(func, kwargs) -> bool:
    if func is aten.repeat_interleave.Tensor:  # sized by the data unless told its output size
        return kwargs.get("output_size") is None
    return func in WAITS


class DeviceReads(TorchDispatchMode):
    """Within the block, ``waits`` lists the names of the ops that would make the step wait."""

    def __init__(self, device_data: Iterable[torch.Tensor]):
        super().__init__()
        self.device = _Tensors(device_data)
        self.waits: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on_device = any(t in self.device for t in _tensors((args, kwargs)))
        if on_device and _waits(func, kwargs):
            self.waits.append(_where(func))
        out = func(*args, **kwargs)
        if on_device:
            self.device.update(_tensors(out))
        return out


class BlockingUploads(TorchDispatchMode):
    """Within the block, ``uploads`` names the ops that would copy host memory to the device and
    wait for the copy (on a GPU: a pageable ``cudaMemcpy``, a synchronisation): a move of a CPU
    tensor to another device without ``non_blocking``, a ``copy_`` from one, and an op that mixes
    a CPU tensor of one or more elements (an index, say) with device tensors, which torch moves
    itself. Run it on the ``meta`` device (any non-CPU device counts as the device)."""

    def __init__(self):
        super().__init__()
        self.uploads: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = _tensors((args, kwargs))
        host = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
        device = [t for t in tensors if t.device.type != "cpu"]
        target = kwargs.get("device")
        if func is aten._to_copy.default:
            if host and target is not None and torch.device(target).type != "cpu" and not kwargs.get("non_blocking"):
                self.uploads.append(_where(func))
        elif host and device and func is not aten.copy_.default or (
                func is aten.copy_.default and args[0].device.type != "cpu" and args[1].device.type == "cpu"
                and not (len(args) > 2 and args[2]) and not kwargs.get("non_blocking")):
            self.uploads.append(_where(func))
        return func(*args, **kwargs)


def _where(func) -> str:
    """``op at file:line``: the innermost line of rpfast's own code that ran ``func``."""
    package = Path(__file__).resolve().parents[2] / "rpfast"
    frames = [f for f in traceback.extract_stack() if str(Path(f.filename).resolve()).startswith(str(package))]
    return f"{func.__name__} at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else func.__name__
