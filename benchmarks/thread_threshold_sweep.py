"""Kernel thread threshold sweep (a script, not a pytest benchmark).

rpfast's kernels run on one thread below a work threshold (``csrc/rpfast/parallel.hpp``). This
times four workloads at several thresholds, interleaved round by round in one process (this
VM's speed drifts between processes), and prints the median milliseconds per call. Run it once
idle and once beside a busy process (``python -c "while True: pass" &``).

Usage: ``python benchmarks/thread_threshold_sweep.py [rounds]``
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_csl_protocol import _rpfast_epoch  # noqa: E402
from bench_rpgin_epoch import training_epoch  # noqa: E402
from graphs import csl_full_batch, molecule_like  # noqa: E402
from rpfast.data import csl_dataset  # noqa: E402
from rpfast.nn import GINConv  # noqa: E402
from rpfast.ops import _backend  # noqa: E402

THRESHOLDS = [1 << 18, 1 << 19, 1 << 20, 1 << 21, 1 << 40]


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
    times = {(name, t): [] for name in work for t in THRESHOLDS}
    for run, _ in work.values():  # warm-up: caches, workspaces, the optimizer's state
        for _ in range(3):
            run()
    default = _backend._C._serial_work(0)
    try:
        for _ in range(rounds):
            for threshold in THRESHOLDS:
                _backend._C._serial_work(threshold)
                for name, (run, calls) in work.items():
                    start = time.perf_counter()
                    for _ in range(calls):
                        run()
                    times[name, threshold].append((time.perf_counter() - start) / calls * 1e3)
    finally:
        _backend._C._serial_work(default)
    print("threshold  " + "  ".join(f"{name:>16s}" for name in work) + "   (ms, median)")
    for threshold in THRESHOLDS:
        label = f"2^{threshold.bit_length() - 1}" + (" (default)" if threshold == default else "")
        print(f"{label:<11s}" + "  ".join(f"{statistics.median(times[name, threshold]):16.3f}" for name in work))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
