"""Former home of :class:`RelationalPooling`, now in :mod:`rpfast.nn.rp` (kept for imports)."""
from rpfast.nn.rp.relational_pooling import RelationalPooling  # noqa: F401

__all__ = ["RelationalPooling"]
