"""Reproduces an open problem (a script, not a pytest benchmark): in some processes the
paper-protocol RP-GIN epoch (`bench_csl_protocol.py`, ~5 ms here) runs ~3x slower on two
threads, while one thread stays at ~5 ms.

Each run is a fresh process that times the epoch on torch's default two threads, then on one
thread (``torch.set_num_threads(1)``), then on two again. On the 2-vCPU development VM about one
process in four measured ~14 ms on two threads, with or without address-space randomisation and
whatever the hash seed, and a process could also switch state midway. Thread start delays
(~1-2 us) and page faults (none) did not grow; both threads ran at full CPU (the OpenMP
worker spins between the network's many small regions). See benchmarks/README.md, "Open
problems".

Usage: ``python benchmarks/process_state_repro.py [runs]``
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


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
    """The measurement inside one fresh process: prints the epoch's ms on 2, 1 and 2 threads."""
    import torch

    sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]
    from bench_csl_protocol import _rpfast_epoch
    from rpfast.data import csl_dataset

    graphs, labels = csl_dataset()
    results = []
    for threads in (2, 1, 2):
        torch.set_num_threads(threads)
        results.append(_epoch_ms(_rpfast_epoch(graphs, labels)))
    print(" ".join(f"{ms:.2f}" for ms in results))


def main(runs: int) -> None:
    for run in range(runs):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], capture_output=True, text=True,
                             check=True).stdout.split()[-3:]
        print(f"process {run + 1}: paper-protocol epoch {out[0]} ms on 2 threads, {out[1]} ms on 1, "
              f"{out[2]} ms on 2 again")


if __name__ == "__main__":
    if "--child" in sys.argv:
        one_process()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
