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
import os
import threading
from collections import defaultdict
from typing import Dict

from hypothesis import HealthCheck, settings

CI_TOTAL = 11_270  # the sum of the per-target counts (malformed.GROUPS + test_fuzz_reference.py)

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
# Seconds one call may take before it counts as a hang (sanitizer builds run slower).
CALL_TIMEOUT = float(os.environ.get("RPFAST_FUZZ_CALL_TIMEOUT", "60" if os.environ.get("RPFAST_SANITIZER") else "20"))


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
