"""The one memory budget: every allocation that grows combinatorially or quadratically
(enumerations, dense adjacency views, relabeled tensors) is checked against it first.

The default is half of the memory available when the check runs (``MemAvailable``), so a
request this machine cannot hold fails at once with a clear error instead of swapping or
being killed. :func:`set_memory_budget` fixes a budget; ``None`` restores the default.
"""
import os
from typing import Optional

__all__ = ["available_memory", "get_memory_budget", "set_memory_budget", "check_memory"]

_MIN_DEFAULT = 64 * 2**20
_budget: Optional[int] = None


def available_memory() -> int:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``; else physical)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


def get_memory_budget() -> int:
    """Bytes one rpfast result may take: the value set by :func:`set_memory_budget`, or by
    default half of :func:`available_memory` (at least 64 MiB)."""
    if _budget is not None:
        return _budget
    return max(_MIN_DEFAULT, available_memory() // 2)


def set_memory_budget(num_bytes: Optional[int]) -> None:
    """Fix the memory budget (bytes, > 0), or restore the default with ``None``."""
    global _budget
    if num_bytes is None:
        _budget = None
        return
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int) and not hasattr(num_bytes, "__index__"):
        raise TypeError(f"num_bytes must be an int or None, got {type(num_bytes).__name__}")
    num_bytes = int(num_bytes.__index__())
    if num_bytes < 1:
        raise ValueError(f"num_bytes must be >= 1, got {num_bytes}")
    _budget = num_bytes


def check_memory(num_bytes: int, what: str, hint: str = "", budget: Optional[int] = None) -> None:
    """Raise ValueError if ``num_bytes`` exceed the budget, naming ``what`` and the sizes."""
    limit = get_memory_budget() if budget is None else budget
    if num_bytes > limit:
        raise ValueError(
            f"{what} would need {_gib(num_bytes)}, more than the memory budget of {_gib(limit)}"
            + (f"; {hint}" if hint else "")
            + " (rpfast.set_memory_budget changes the budget)"
        )


def _gib(num_bytes: int) -> str:
    if num_bytes >= 2**26:
        return f"{num_bytes / 2**30:.2f} GiB"
    return f"{num_bytes / 2**20:.2f} MiB" if num_bytes >= 2**20 else f"{num_bytes} bytes"
