"""Whole commands on a loaded machine (issue 28): a Tox21 Duvenaud epoch and a CSL run with 0-3
busy neighbour processes, under each thread setting a user might pick.

Each neighbour is a Python process spinning on one core (a second job, a DataLoader worker).
Settings: ``default`` (no option: the commands' own choice), ``all cores`` (``--threads`` set to
the core count: the default before the commands looked at the load), ``--threads 1`` and
``OMP_WAIT_POLICY=PASSIVE`` (OpenMP threads sleep instead of spinning while they wait; with
``--threads`` at the core count, so that it is the old default made passive).
The Duvenaud cell is the training epoch's seconds (the mean of ``--epochs`` epochs, from
results.json); the CSL cell is the whole command's wall time. Run from the repository root::

    python benchmarks/load_table.py [--neighbours 0,1,2,3] [--repeats 1] [--workloads duvenaud,csl]
                                    [--settings 'default,all cores,--threads 1,OMP_WAIT_POLICY=PASSIVE']

It prints one table per workload, with each setting's ratio to the best setting in its row.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

SETTINGS = ("default", "all cores", "--threads 1", "OMP_WAIT_POLICY=PASSIVE")
SPIN = "while True: pass"


def _command(workload: str, out: Path, setting: str) -> List[str]:
    base = [sys.executable, "-m", "rpfast"]
    if workload == "duvenaud":
        base += ["molecules", "--model", "duvenaud", "--epochs", "2", "--no-progress", "--out", str(out)]
    else:
        base += ["csl", "--folds", "2", "--epochs", "40", "--no-progress", "--out", str(out)]
    if setting in ("all cores", "OMP_WAIT_POLICY=PASSIVE"):
        base += ["--threads", str(os.cpu_count())]
    elif setting == "--threads 1":
        base += ["--threads", "1"]
    return base


def _run(workload: str, setting: str) -> float:
    """Seconds: the Duvenaud training epoch (mean over the run's epochs) or the CSL command."""
    env = dict(os.environ)
    if setting == "OMP_WAIT_POLICY=PASSIVE":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        start = time.perf_counter()
        subprocess.run(_command(workload, out, setting), env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        if workload == "csl":
            return wall
        runs = json.loads((out / "results.json").read_text())["runs"]
        return sum(r["seconds_per_epoch"] for r in runs) / len(runs)


def _spinners(count: int) -> List[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    time.sleep(1.0)  # running before the command starts, as a neighbour that was there first
    return procs


def measure(neighbours: List[int], repeats: int, workloads: List[str], settings=SETTINGS) -> Dict:
    table: Dict = {}
    for workload in workloads:
        _run(workload, "--threads 1")  # warm the featurisation cache and the file cache
        for count in neighbours:
            procs = _spinners(count)
            try:
                for setting in settings:
                    times = [_run(workload, setting) for _ in range(repeats)]
                    table[(workload, count, setting)] = min(times)
                    print(f"{workload:9} neighbours={count} {setting:24} {min(times):8.2f} s", flush=True)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
    return table


def format_markdown(table: Dict, workload: str, neighbours: List[int], title: str) -> str:
    lines = [f"**{title}**", "", "| busy neighbours | " + " | ".join(SETTINGS) + " | default / best |",
             "|---" * (len(SETTINGS) + 2) + "|"]
    for count in neighbours:
        cells = [table[(workload, count, s)] for s in SETTINGS]
        best = min(cells)
        shown = [f"{c:.2f} s ({c / best:.2f}x)" for c in cells]
        lines.append(f"| {count} | " + " | ".join(shown) + f" | {cells[0] / best:.2f}x |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neighbours", default="0,1,2,3")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workloads", default="duvenaud,csl")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    args = parser.parse_args(argv)
    neighbours = [int(n) for n in args.neighbours.split(",")]
    workloads = args.workloads.split(",")
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting {unknown[0]!r}: choose from {', '.join(SETTINGS)}")
    table = measure(neighbours, args.repeats, workloads, settings)
    if settings != list(SETTINGS):
        return  # a partial table: the lines above
    titles = {"duvenaud": "Tox21 Duvenaud training epoch (s)", "csl": "rpfast csl --folds 2 --epochs 40, whole command (s)"}
    for workload in workloads:
        print()
        print(format_markdown(table, workload, neighbours, titles[workload]))


if __name__ == "__main__":
    main()
