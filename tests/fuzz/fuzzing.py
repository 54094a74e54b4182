"""Shared settings of the fuzz suite: budget, hypothesis profiles, input counters, clean errors.

Budget. ``RPFAST_FUZZ_EXAMPLES`` is the (approximate) total number of inputs one run of
``tests/fuzz`` tries; every fuzz target gets a fixed share of it. Unset, the suite runs
its CI budget (``CI_TOTAL`` inputs, derandomized, so CI is reproducible). A long campaign:

    RPFAST_FUZZ_EXAMPLES=200000 python -m pytest tests/fuzz

Profiles (``RPFAST_FUZZ_PROFILE``): ``ci`` (derandomized: the same inputs every run) or
``campaign`` (fresh random inputs every run, failures kept in the local example database
``.hypothesis/``). Setting ``RPFAST_FUZZ_EXAMPLES`` without a profile selects ``campaign``.
Every failure message carries the exact input, so a campaign's finding can be replayed
by hand.
"""
import faulthandler
import os
import sys
import threading
import time
from contextlib import contextmanager
from collections import defaultdict
from typing import Dict

from hypothesis import HealthCheck, settings

CI_TOTAL = 13_778  # the sum of the per-target counts (malformed.GROUPS, test_fuzz_reference.py, *_backends.py)

# Share of the budget per fuzz target (name -> weight); normalised below. The malformed
# targets are cheap (validation errors), the reference targets cost a brute-force check.
WEIGHTS: Dict[str, float] = {}

# Exceptions that count as a clean refusal of a malformed input (DESIGN.md: "Errors,
# never crashes"). Anything else, a crash, a hang or a sanitizer report is a failure.
CLEAN_ERRORS = (TypeError, ValueError, IndexError, OverflowError)

_explicit = os.environ.get("RPFAST_FUZZ_EXAMPLES")
TOTAL = int(_explicit) if _explicit else CI_TOTAL
PROFILE = os.environ.get("RPFAST_FUZZ_PROFILE") or ("campaign" if _explicit else "ci")
if PROFILE not in ("ci", "campaign"):
    raise ValueError(f"RPFAST_FUZZ_PROFILE must be 'ci' or 'campaign', got {PROFILE!r}")
SCALE = TOTAL / CI_TOTAL
# CPU seconds one call may use before it counts as a hang (sanitizer builds run slower). CPU
# time, not wall time: on a machine with busy neighbours a call's wall time stretches while
# its CPU time does not, so the limit cannot misfire under load. A call blocked without
# using CPU (a deadlock) is caught by the wall-clock backstop, CALL_WALL_FACTOR times longer.
CALL_TIMEOUT = float(os.environ.get("RPFAST_FUZZ_CALL_TIMEOUT", "60" if os.environ.get("RPFAST_SANITIZER") else "20"))
CALL_WALL_FACTOR = 10.0


def examples(ci_count: int) -> int:
    """Examples for a target that tries ``ci_count`` inputs under the CI budget."""
    return max(1, round(ci_count * SCALE))


def fuzz_settings(ci_count: int, **overrides) -> settings:
    kwargs = dict(
        max_examples=examples(ci_count),
        deadline=None,
        derandomize=PROFILE == "ci",
        database=None if PROFILE == "ci" else settings.default.database,
        suppress_health_check=list(HealthCheck),
        print_blob=PROFILE == "campaign",
    )
    kwargs.update(overrides)
    return settings(**kwargs)


# ------------------------------------------------------------------------- counters
_lock = threading.Lock()
COUNTS: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
SECONDS: Dict[str, float] = defaultdict(float)


def count(op: str, kind: str, n: int = 1) -> None:
    """Record that ``n`` inputs of ``kind`` ('malformed' or 'reference') reached ``op``."""
    with _lock:
        COUNTS[op][kind] += n


def add_seconds(op: str, kind: str, seconds: float) -> None:
    with _lock:
        SECONDS[op] += seconds


def summary_lines():
    kinds = ("malformed", "reference")
    rows = sorted(COUNTS.items())
    if not rows:
        return []
    width = max(len(op) for op, _ in rows)
    lines = [f"{'op':<{width}}  {'malformed':>9}  {'reference':>9}  {'total':>7}  {'worker s':>8}"]
    grand = 0
    for op, by_kind in rows:
        total = sum(by_kind.values())
        grand += total
        secs = f"{SECONDS[op]:8.1f}" if op in SECONDS else f"{'':>8}"
        lines.append(f"{op:<{width}}  " + "  ".join(f"{by_kind.get(k, 0):>9}" for k in kinds) + f"  {total:>7}  {secs}")
    lines.append(f"{'TOTAL':<{width}}  {'':>9}  {'':>9}  {grand:>7}")
    lines.append(f"profile={PROFILE} budget RPFAST_FUZZ_EXAMPLES={TOTAL}"
                 + (" (random inputs)" if PROFILE == "campaign" else " (derandomized)"))
    return lines


# ------------------------------------------------------------------------- hang watchdog
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _descendants(pid: int):
    """The live descendant processes of ``pid`` (Linux /proc; none elsewhere)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as fh:
                    children = [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def _process_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_seconds() -> float:
    """CPU time of this process (all threads), its finished children and its live descendants
    (a CLI case may train in worker processes)."""
    own = time.process_time()
    times = os.times()
    return own + times.children_user + times.children_system + sum(map(_process_cpu, _descendants(os.getpid())))


@contextmanager
def hang_watchdog(cpu_limit: float = None, wall_limit: float = None, poll: float = 0.25):
    """Ends the process (exit status 1, every thread's traceback on stderr) if the body uses more
    than ``cpu_limit`` CPU seconds (default ``CALL_TIMEOUT``) or runs ``wall_limit`` seconds
    (default ``CALL_WALL_FACTOR * CALL_TIMEOUT``): a busy loop or a deadlock in the call."""
    cpu_limit = CALL_TIMEOUT if cpu_limit is None else cpu_limit
    wall_limit = CALL_WALL_FACTOR * CALL_TIMEOUT if wall_limit is None else wall_limit
    done = threading.Event()
    cpu_start, wall_start = cpu_seconds(), time.monotonic()

    def watch():
        while not done.wait(poll):
            cpu, wall = cpu_seconds() - cpu_start, time.monotonic() - wall_start
            if cpu > cpu_limit or wall > wall_limit:
                sys.stderr.write(f"hang watchdog: the call used {cpu:.1f} CPU s (limit {cpu_limit:g}) in {wall:.1f} s "
                                 f"(limit {wall_limit:g})\n")
                faulthandler.dump_traceback(all_threads=True)
                sys.stderr.flush()
                os._exit(1)

    thread = threading.Thread(target=watch, name="rpfast-fuzz-watchdog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
