"""Time rpfast and its baseline in alternating rounds of one benchmark.

On a shared virtual machine the speed drifts by up to 2x between minutes, so two benchmarks run
one after the other can disagree on a ratio by more than the ratio itself. Here every timed
round of rpfast follows one round of the baseline (run as pytest-benchmark's untimed ``setup``
and timed here), so both sides see the same machine; the ratio of the two medians is stored
in ``extra_info`` and printed by ``report.py`` in its "alternating rounds" table.
"""
import statistics
import time
from typing import Callable, Optional


def paired(benchmark, ours: Callable[[], object], baseline: Callable[[], object], baseline_name: str,
           rounds: int, warmup_rounds: int = 1,
           agree: Optional[Callable[[Callable[[], object], Callable[[], object]], None]] = None) -> float:
    """Benchmark ``ours`` with a round of ``baseline`` before each of its rounds; returns the
    speed-up (baseline median / ours median) and records both medians in ``extra_info``.

    ``agree(ours, baseline)``, when given, runs before any timing: it calls both (seeding what
    they draw alike) and must raise if they disagree (two computations that differ are not a
    benchmark of one against the other)."""
    if rounds < 1 or warmup_rounds < 0:
        raise ValueError(f"rounds must be >= 1 and warmup_rounds >= 0, got {rounds} and {warmup_rounds}")
    if agree is not None:
        agree(ours, baseline)
    ours_times, baseline_times = [], []

    def run_baseline():
        start = time.perf_counter()
        baseline()
        baseline_times.append(time.perf_counter() - start)

    def run_ours():
        start = time.perf_counter()
        ours()
        ours_times.append(time.perf_counter() - start)

    benchmark.pedantic(run_ours, setup=run_baseline, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1)
    # with --benchmark-disable pytest-benchmark runs one untimed round and no warm-up
    ours_median = statistics.median(ours_times[warmup_rounds:] or ours_times)
    baseline_median = statistics.median(baseline_times[warmup_rounds:] or baseline_times)
    speedup = baseline_median / ours_median
    benchmark.extra_info.update(paired_baseline=baseline_name, paired_baseline_median=baseline_median,
                                paired_median=ours_median, paired_speedup=speedup)
    return speedup
