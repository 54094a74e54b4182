"""Peak memory of `rpfast molecules train` against the number of molecules: what a molecule costs.

For each size N it writes a library of N molecules (`molecule_library.py`: Tox21's molecules
repeated as random SMILES), then runs, in a fresh process each,

    rpfast molecules train --data LIBRARY --model MODELS --epochs 1 --no-progress --out DIR

with an empty featurisation cache, and reads the process's peak resident memory from the
kernel (``os.wait4``: the largest of the process and the featurisation workers it forked). The
growth per molecule is the slope between consecutive sizes: the constant part (Python, torch,
RDKit, a batch's activations) cancels.

    python benchmarks/molecule_memory.py --sizes 10000,100000,300000 [--models duvenaud,rp-duvenaud]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from molecule_library import library_rows  # noqa: E402 - run from benchmarks/


def write_library(path: Path, molecules: int) -> None:
    import csv

    from rpfast.datasets.moleculenet import TOX21_TASKS

    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smiles", *TOX21_TASKS])
        for smiles, labels in library_rows(molecules):
            writer.writerow([smiles, *labels])


def peak_of(command, env) -> tuple:
    """``(peak RSS in bytes, wall seconds, exit status, output)`` of ``command`` in a new process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        return usage.ru_maxrss * 1024, time.perf_counter() - start, child.returncode, log.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,300000", help="comma-separated molecule counts")
    parser.add_argument("--models", default="duvenaud,rp-duvenaud")
    parser.add_argument("--keep", help="a folder to keep the libraries and outputs in (default: a temporary one)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(s < 10 for s in sizes):
        parser.error("every size must be at least 10 molecules")
    work = Path(args.keep or tempfile.mkdtemp(prefix="rpfast-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for size in sizes:
            library = work / f"library-{size}.csv"
            if not library.exists():
                write_library(library, size)
            cache = work / f"cache-{size}"
            shutil.rmtree(cache, ignore_errors=True)
            env = dict(os.environ, RPFAST_CACHE=str(cache))
            command = [sys.executable, "-m", "rpfast", "molecules", "train", "--data", str(library), "--model",
                       args.models, "--epochs", "1", "--no-progress", "--force", "--out", str(work / f"out-{size}")]
            peak, seconds, code, output = peak_of(command, env)
            if code:
                sys.exit(f"size {size}: the command failed ({code}):\n{output[-2000:]}")
            timing = next((line for line in output.splitlines() if line.startswith("time:")), "")
            rows.append((size, peak, seconds, timing))
            print(f"{size:>9,} molecules: peak {peak / 2**20:,.0f} MiB, {seconds:.0f} s; {timing}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| molecules | peak RSS (MiB) | wall (s) | growth per molecule (bytes) |\n|---:|---:|---:|---:|")
    for i, (size, peak, seconds, _) in enumerate(rows):
        slope = "" if i == 0 else f"{(peak - rows[i - 1][1]) / (size - rows[i - 1][0]):,.0f}"
        print(f"| {size:,} | {peak / 2**20:,.0f} | {seconds:.0f} | {slope} |")


if __name__ == "__main__":
    main()
