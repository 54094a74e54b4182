"""How many threads a command uses when the user does not say: the cores other processes leave
free.

Torch's default is one thread per core, and its OpenMP threads spin while they wait for each
other. Beside busy neighbours that is ruinous: measured on this 2-core machine
(``benchmarks/load_table.py``), a Tox21 Duvenaud epoch took 43 s with the default 2 threads and
two spinning neighbours against 2.0 s with one thread. So a command looks at the machine before
it starts: it samples the kernel's CPU counters (``/proc/stat``) for a quarter of a second, and
when other processes keep cores busy it uses only the cores left free (at least one), saying
so in one line on stderr. ``--threads N`` is always obeyed as given, and ``RPFAST_LOAD_CHECK=0``
in the environment turns the check off (torch's default then, whatever the load: for timings
or runs that must use one thread count).
"""
import os
import sys
import time
from typing import Optional, Tuple

#: How long the CPU counters are sampled, in seconds.
SAMPLE_SECONDS = 0.25


def _cpu_counters() -> Optional[Tuple[int, int]]:
    """``(busy, total)`` jiffies of all CPUs since boot from ``/proc/stat``; None where it is missing."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - idle, total


def busy_cores(seconds: float = SAMPLE_SECONDS) -> Optional[float]:
    """The cores the machine's processes keep busy now, averaged over ``seconds`` (this process
    sleeps meanwhile, so the count is the other processes'); None where ``/proc/stat`` is missing."""
    before = _cpu_counters()
    if before is None:
        return None
    time.sleep(seconds)
    after = _cpu_counters()
    if after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def free_threads(requested: Optional[int], default: int, command: str) -> Optional[int]:
    """The thread count a command runs with: ``requested`` when given; else ``default`` (torch's
    thread count) reduced to the cores other processes leave free, at least 1 (unless
    ``RPFAST_LOAD_CHECK=0``). Returns None when nothing changes (use the default), else the count,
    after printing why on stderr."""
    if requested is not None:
        return requested
    if os.environ.get("RPFAST_LOAD_CHECK", "1") == "0":
        return None
    busy = busy_cores()
    if busy is None:
        return None
    cores = os.cpu_count() or default
    free = max(1, int(cores - busy + 0.5))
    if free >= default:
        return None
    print(f"{command}: other processes keep {busy:.1f} of {cores} cores busy: using {free} "
          f"thread{'s' * (free > 1)} instead of {default} (--threads N to choose)", file=sys.stderr)
    return free
