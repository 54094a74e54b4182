"""What the k-subset enumeration, counting and sampling share (:mod:`rpfast.ops.subsets`,
:mod:`rpfast.ops.subsets_bounded`): the prune modes and the kernels' view of a batch."""
import enum
import warnings
from typing import Optional, Tuple, Union

import numpy as np
from torch import Tensor

from rpfast.data import GraphBatch

__all__ = ["Prune", "PRUNE_MODES", "UINT64_MAX", "GraphLike"]


class Prune(str, enum.Enum):
    """Which k-subsets an enumeration drops (module docstring). A ``str``, so it compares
    equal to its value; ``code`` is the number the compiled kernels take."""

    NONE = ("none", 0)
    EDGELESS = ("edgeless", 1)
    ISOLATED = ("isolated", 2)
    DISCONNECTED = ("disconnected", 3)

    code: int

    def __new__(cls, value: str, code: int):
        member = str.__new__(cls, value)
        member._value_ = value
        member.code = code
        return member

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value):
        if value == _DEPRECATED_CONNECTED:  # Prune("connected")
            _warn_connected(stacklevel=5)
            return cls.DISCONNECTED
        return None


# value string -> Prune (the deprecated alias "connected" is not listed)
PRUNE_MODES = {p.value: p for p in Prune}
_DEPRECATED_CONNECTED = "connected"
UINT64_MAX = 2**64 - 1


def _warn_connected(stacklevel: int) -> None:
    warnings.warn('prune="connected" was renamed "disconnected" (prune names what is dropped: subsets whose '
                  'induced subgraph is disconnected); "connected" will be removed', DeprecationWarning,
                  stacklevel=stacklevel)


def _prune(prune) -> Prune:
    """``prune`` as a :class:`Prune`: the enum or its string value (``"connected"`` warns).

    Called directly by the public functions, so the warning points at their caller."""
    if isinstance(prune, Prune):
        return prune
    if isinstance(prune, str):
        if prune == _DEPRECATED_CONNECTED:
            _warn_connected(stacklevel=4)
            return Prune.DISCONNECTED
        if prune in PRUNE_MODES:
            return PRUNE_MODES[prune]
    raise ValueError(f"prune must be one of {list(PRUNE_MODES)} (or an rpfast.ops.subsets.Prune), got {prune!r}")


GraphLike = Union[GraphBatch, Tensor]


def _as_batch(graph: GraphLike, num_nodes: Optional[int]) -> GraphBatch:
    if isinstance(graph, GraphBatch):
        if num_nodes is not None:
            raise ValueError("num_nodes is only for a bare edge_index; a GraphBatch knows its sizes")
        return graph
    if isinstance(graph, (Tensor, np.ndarray, list, tuple)):
        return GraphBatch(graph, num_nodes=num_nodes)
    raise TypeError(f"graph must be a GraphBatch or an edge_index [2, E], got {type(graph).__name__}")


def _arrays(batch: GraphBatch) -> Tuple[Tensor, Tensor, Tensor]:
    """The kernels' view of a batch: ptr [B + 1] and the undirected CSR (rowptr [N + 1], col [E])."""
    rowptr, col = batch.undirected_csr()
    return batch.ptr, rowptr, col
