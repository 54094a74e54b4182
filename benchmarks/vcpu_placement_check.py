"""Times the paper-protocol RP-GIN epoch (`bench_csl_protocol.py`) in fresh processes next to
the cache-line round trip between two kernel threads (a script, not a pytest benchmark).

On this project's 2-vCPU development VM the host at times places the two vCPUs far apart: for
seconds to minutes the round trip takes ~330 ns instead of ~55 ns, idle or not. With one static
half of every loop per thread, the epoch then took ~14 ms on two threads instead of ~5 ms (one
thread: ~5.4 ms), because every line the two threads share crosses that distance and the other
thread runs small loops at a fraction of the calling thread's speed. parallel_for now deals
chunks out in turn and backs off to serial loops when the other thread runs a quarter of its
share or less, or when its periodic round-trip probe reads far over the process's best
(csrc/cpu/schedule.hpp); this script shows whether that holds: on a far-apart placement the
two-thread epoch should stay near the one-thread one. See benchmarks/README.md,
"Shared machines: threads that wait".

Each run is a fresh process that measures the round trip, then the epoch on torch's default
two threads, on one thread (``torch.set_num_threads(1)``) and on two again.

Usage, from the repository's root: ``python -m benchmarks.vcpu_placement_check [runs]``
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where ``benchmarks`` is a package


def _epoch_ms(epoch, rounds: int = 20) -> float:
    for _ in range(3):
        epoch()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        epoch()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def one_process() -> None:
    """The measurement inside one fresh process: prints the round trip (ns), then the epoch's
    ms on 2, 1 and 2 threads."""
    import torch

    from benchmarks.bench_csl_protocol import _rpfast_epoch
    from rpfast.datasets import csl_dataset
    from rpfast import _testing

    round_trip = _testing.thread_round_trip_ns()
    graphs, labels = csl_dataset()
    results = []
    for threads in (2, 1, 2):
        torch.set_num_threads(threads)
        results.append(_epoch_ms(_rpfast_epoch(graphs, labels)))
    print(f"{round_trip:.0f}", " ".join(f"{ms:.2f}" for ms in results))


def main(runs: int) -> None:
    for run in range(runs):
        out = subprocess.run([sys.executable, "-m", "benchmarks.vcpu_placement_check", "--child"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()[-4:]
        print(f"process {run + 1}: thread round trip {out[0]} ns; paper-protocol epoch {out[1]} ms on 2 threads, "
              f"{out[2]} ms on 1, {out[3]} ms on 2 again", flush=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        one_process()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
