"""Kernel thread threshold sweep (a script, not a pytest benchmark).

rpfast's kernels run on one thread below a work threshold (``csrc/cpu/schedule.hpp``), and
for a while below a larger one after a thread started its share late. This times four
workloads at fixed thresholds and with the default adaptive scheme, interleaved round by round
in one process (this VM's speed drifts between processes), and prints the median milliseconds
per call. Run it once
idle and once beside a busy process (``python -c "while True: pass" &``).

Usage, from the repository's root: ``python -m benchmarks.thread_threshold_sweep [rounds]``
"""
import statistics
import sys
import time

import torch

from benchmarks.bench_csl_protocol import _rpfast_epoch
from benchmarks.bench_rpgin_epoch import training_epoch
from benchmarks.graphs import csl_full_batch, molecule_like
from rpfast.datasets import csl_dataset
from rpfast.nn import GINConv
from rpfast import _testing

# fixed thresholds, then the default: 2^18 with the back-off on lagging threads (parallel.hpp)
CASES = [(1 << 18, False), (1 << 19, False), (1 << 20, False), (1 << 21, False), (1 << 40, False), (1 << 18, True)]


def conv_step(graph, width):
    """GINConv(Identity) forward + backward on ``graph`` with ``width`` features."""
    edge_index = graph.edge_index
    x = torch.randn(graph.total_nodes, width).requires_grad_()
    conv = GINConv(torch.nn.Identity(), train_eps=True)
    grad = torch.ones(graph.total_nodes, width)

    def step():
        x.grad = None
        conv(x, edge_index).backward(grad)

    return step


def main(rounds: int) -> None:
    torch.set_num_threads(2)
    graphs, labels = csl_dataset()
    work = {"conv tox21 F64": (conv_step(molecule_like(96), 64), 50),
            "conv csl F16": (conv_step(csl_full_batch(), 16), 50),
            "protocol epoch": (_rpfast_epoch(graphs, labels), 10),
            "rpgin b16 epoch": (training_epoch("rpfast", "Adam(fused=True)"), 2)}
    times = {(name, case): [] for name in work for case in CASES}
    for run, _ in work.values():  # warm-up: caches, workspaces, the optimizer's state
        for _ in range(3):
            run()
    default = _testing.serial_work(0)
    try:
        for _ in range(rounds):
            for threshold, adaptive in CASES:
                _testing.serial_work(threshold, adaptive=adaptive)
                for name, (run, calls) in work.items():
                    start = time.perf_counter()
                    for _ in range(calls):
                        run()
                    times[name, (threshold, adaptive)].append((time.perf_counter() - start) / calls * 1e3)
    finally:
        _testing.serial_work(default, adaptive=True)
    print("threshold        " + "  ".join(f"{name:>16s}" for name in work) + "   (ms, median)")
    for case in CASES:
        threshold, adaptive = case
        label = f"2^{threshold.bit_length() - 1}" + (" adaptive" if adaptive else "")
        print(f"{label:<17s}" + "  ".join(f"{statistics.median(times[name, case]):16.3f}" for name in work))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
