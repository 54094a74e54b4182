"""What a :class:`~rpfast.data.GraphBatch` keeps on the host for host-side work (traversals,
enumerations, groupings) on a batch that lives on a device, and whether it is still current.

A record remembers the batch tensors it stands for, by identity and version counter: a tensor
replaced on the batch, or changed in place through torch, makes the record stale, and the batch
makes its host copy again (one read of the device). Writes through aliases that torch does not
see (a NumPy view, say) do not bump the version counter: the same limit as the graph cache's
(:mod:`rpfast.data.cache`).
"""
from typing import Any, Dict, Optional, Tuple

from torch import Tensor

__all__ = ["HostBatch", "HostTensor"]

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
