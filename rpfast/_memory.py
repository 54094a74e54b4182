"""Handing freed heap memory back to the operating system.

glibc's ``free`` keeps small blocks (below its mmap threshold, 128 KiB to 32 MiB) in the
process heap for reuse, so a phase that allocates and frees many arrays (featurisation's
worker parts, batches of features) leaves the peak resident size where it was. ``malloc_trim(0)``
returns the free pages at the top and inside the heap. It walks the whole heap, so it is called
once after such a phase, never per batch (per validation batch it made validation 2.5x slower:
benchmarks/README.md, "Molecules at full scale").
"""
import ctypes
import ctypes.util
import functools

__all__ = ["release_free_memory"]


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None off glibc (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim(0)``); True when
    some were returned, False when none were or the C library has no such call (a no-op)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
