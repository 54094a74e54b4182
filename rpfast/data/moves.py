"""A :class:`~rpfast.data.GraphBatch` between devices: the move itself (:func:`moved`, what
``GraphBatch.to`` does), and what a batch keeps on the host for host-side work (traversals,
enumerations, groupings) when it lives on a device (:func:`host_batch`, :func:`host_extra`).

A host copy is a record that remembers the batch tensors it stands for, by identity and version counter: a tensor
replaced on the batch, or changed in place through torch, makes the record stale, and the batch
makes its host copy again (one read of the device). Writes through aliases that torch does not
see (a NumPy view, say) do not bump the version counter: the same limit as the graph cache's
(:mod:`rpfast.data.cache`).
"""
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from rpfast._uploads import upload

__all__ = ["moved", "host_batch", "host_extra", "HOST_RECORDS"]

HOST_VIEWS = "_lazy_host"  # the caches of GraphBatch.host_ptr, ...: they stay on the CPU when the batch moves
HOST_EXTRAS = "_host_extras"  # host_extra's records (HostTensor), by name
HOST_BATCH = "_host_batch"  # host_batch's record (HostBatch)
HOST_RECORDS = (HOST_BATCH, HOST_EXTRAS)  # not pickled: a copy rebuilds them, a move passes them on
# the views built on the source device before a move: the copy never recomputes them from data it
# cannot read (the meta device) or synchronises for them
STRUCTURE = ("num_nodes", "n_max", "host_ptr", "_host_in_degree", "batch", "local_index", "_csr_views",
             "_csr_t_views", "_edges_by_graph", "_edge_rank", "_undirected_views")
FEATURES = ("x", "edge_attr", "_lazy__dense_adj", "_lazy__dense_x")  # what a dtype converts

# the batch attributes a host copy of the whole batch stands for
_STANDS_FOR = ("edge_index", "x", "edge_attr")


def _mark(value: Any) -> Tuple[Any, Optional[int]]:
    return value, value._version if isinstance(value, Tensor) else None


def _unchanged(mark: Tuple[Any, Optional[int]], value: Any) -> bool:
    return mark[0] is value and (mark[1] is None or value._version == mark[1])


class HostBatch:
    """``batch``: a CPU GraphBatch with the contents of the device batch it was recorded for."""

    def __init__(self, batch, of):
        self.batch = batch
        self._marks = {name: _mark(getattr(of, name)) for name in _STANDS_FOR}
        self._extras: Dict[str, Tuple[Any, Optional[int]]] = {k: _mark(v) for k, v in of.extras.items()}

    def current(self, of) -> bool:
        """Whether ``of`` still has the tensors (and extras) this copy was made from."""
        return (all(_unchanged(mark, getattr(of, name)) for name, mark in self._marks.items())
                and self._extras.keys() == of.extras.keys()
                and all(_unchanged(mark, of.extras[key]) for key, mark in self._extras.items()))


class HostTensor:
    """``host``: a CPU tensor with the contents of the tensor it was recorded for."""

    def __init__(self, host: Tensor, of: Tensor):
        self.host = host
        self._mark = _mark(of)

    def current(self, of: Tensor) -> bool:
        return _unchanged(self._mark, of)


def host_batch(batch):
    """``GraphBatch.host()`` (see there): the batch itself on the CPU, else its current host copy,
    made (or made again) when there is none."""
    if batch.device.type == "cpu":
        return batch
    record = batch.__dict__.get(HOST_BATCH)
    if record is None or not record.current(batch):
        record = batch.__dict__[HOST_BATCH] = HostBatch(batch.to("cpu"), batch)
    return record.batch


def host_extra(batch, name: str) -> Optional[Tensor]:
    """``GraphBatch.host_extra(name)`` (see there)."""
    extra = batch.extras.get(name)
    if not isinstance(extra, Tensor):
        return None
    cache = batch.__dict__.setdefault(HOST_EXTRAS, {})
    record = cache.get(name)
    if record is None or not record.current(extra):
        record = cache[name] = HostTensor(extra.cpu().clone() if extra.is_cpu else extra.cpu(), extra)
    return record.host


def moved(batch, device=None, dtype: Optional[torch.dtype] = None):
    """``GraphBatch.to(device, dtype)`` (see there): the arguments checked, the batch itself when
    nothing changes, else a copy with every tensor and cached view moved, the host views kept on
    the CPU and the host copies passed on."""
    if isinstance(device, torch.dtype) and dtype is None:
        device, dtype = None, device
    if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    try:
        device = None if device is None else torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must name a torch device, got {device!r} ({error})") from None
    if dtype is None and (device is None or _same_device(device, batch.device)):
        return batch
    for name in STRUCTURE:
        getattr(batch, name)

    def move(value, features: bool = False):
        if isinstance(value, Tensor):  # host data goes up without waiting (pinned, non_blocking)
            return upload(value, device, dtype if features and value.is_floating_point() else None)
        if isinstance(value, tuple):
            return tuple(move(v, features) for v in value)
        return value

    out = object.__new__(type(batch))
    for key, value in batch.__getstate__().items():
        out.__dict__[key] = ({k: move(v) for k, v in value.items()} if key == "extras"
                             else value if key.startswith(HOST_VIEWS) else move(value, key in FEATURES))
    _pass_host_copies(batch, out, dtype)
    if dtype is not None:  # the adjacency of a batch without edge features too
        out.__dict__["_adjacency_dtype"] = dtype
    return out


def _same_device(asked: torch.device, current: torch.device) -> bool:
    """Whether a tensor on ``current`` is already on ``asked`` (``cuda`` meaning the current GPU)."""
    if asked.type != current.type:
        return False
    if asked.index is None:
        return asked.type != "cuda" or current.index == torch.cuda.current_device()
    return asked.index == current.index


def _pass_host_copies(batch, out, dtype: Optional[torch.dtype]) -> None:
    """Give a moved copy ``out`` the host copies of ``batch``, by reference: a CPU batch is the
    host copy of what it is moved into (unless the dtype changes), and its extras' CPU tensors
    serve as theirs; a device batch passes on the copies that are still current."""
    if batch.device.type == "cpu":
        host = batch if dtype is None else None
        extras = {name: value for name, value in batch.extras.items() if isinstance(value, Tensor)}
    else:
        record = batch.__dict__.get(HOST_BATCH)
        host = record.batch if record is not None and record.current(batch) else None
        extras = {name: record.host for name, record in batch.__dict__.get(HOST_EXTRAS, {}).items()
                  if isinstance(batch.extras.get(name), Tensor) and record.current(batch.extras[name])}
    if host is not None:
        out.__dict__[HOST_BATCH] = HostBatch(host, out)
    out.__dict__[HOST_EXTRAS] = {name: HostTensor(value, out.extras[name]) for name, value in extras.items()}
