"""``rpfast subsets``: enumerate or count the k-subsets of one graph, streaming the output."""
import argparse
import contextlib
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from tqdm.auto import tqdm

from rpfast._io import atomic_path
from rpfast._options import add_dataclass_options, config_from_args, int_range, option
from rpfast.data import graph_from_smiles, read_edge_list
from rpfast.ops.subsets import Prune, count_k_subsets, iter_k_subsets

HELP = "enumerate or count the k-vertex subsets of a graph"


def _prune_value(text: str) -> str:
    """``--prune`` value; the old ``connected`` (renamed ``disconnected``) still works, with a note."""
    if text == "connected":
        print("rpfast subsets: note: --prune connected is now spelled --prune disconnected", file=sys.stderr)
        return Prune.DISCONNECTED.value
    if text not in {p.value for p in Prune}:
        raise argparse.ArgumentTypeError(f"invalid choice {text!r} (choose from "
                                         f"{', '.join(p.value for p in Prune)})")
    return text


@dataclass
class SubsetsConfig:
    """What ``rpfast subsets`` does; its options are derived from these fields."""

    graph: str = option(help="edge-list file ('u v' per line, '#' comments) or, with --smiles, a SMILES string",
                        positional=True)
    k: int = option(help="subset size", type=int_range(1))
    prune: str = option(Prune.NONE.value, "drop subsets with no edge / with an isolated vertex / that are "
                        "disconnected", type=_prune_value, metavar="{" + ",".join(p.value for p in Prune) + "}")
    smiles: bool = option(False, "GRAPH is a SMILES string (needs RDKit)")
    count: bool = option(False, "only print the number of subsets")
    out: str = option("-", "'-' (stdout), FILE.csv or FILE.npy (written under a temporary name, renamed "
                      "when complete)")
    force: bool = option(False, "overwrite an existing --out file")
    chunk_size: int = option(1 << 20, "rows per streamed chunk", type=int_range(1))
    progress: bool = option(True, "hide the progress bar")


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Enumerate the k-subsets of a graph's vertices (k-ary RP), optionally pruned, streaming "
                          "rows of original vertex labels to stdout, a .csv or a .npy file.")
    add_dataclass_options(parser, SubsetsConfig)


def run(args: argparse.Namespace) -> int:
    run_subsets(**asdict(config_from_args(SubsetsConfig, args)))
    return 0


def run_subsets(graph: str, k: int, prune: str = "none", smiles: bool = False, count: bool = False,
                out: str = "-", chunk_size: int = 1 << 20, progress: bool = True, force: bool = False) -> int:
    """Enumerate (or count) and write; returns the number of subsets. Summary on stderr.

    A file output (``.csv`` or ``.npy``) is written under a temporary name next to it and
    renamed when complete, so a failed or interrupted run leaves no output file; an
    existing output is refused unless ``force``.
    """
    start = time.perf_counter()
    if not count:
        _check_output(out, force)
    batch, labels = graph_from_smiles(graph) if smiles else read_edge_list(graph)
    n, m = batch.total_nodes, batch.undirected_csr()[1].numel() // 2
    if count:
        total = int(count_k_subsets(batch, k, prune)[0])
        print(total)
    else:
        stream = iter_k_subsets(batch, k, prune, chunk_size=chunk_size)
        total = stream.total
        with _open_output(out, total, k, labels.dtype) as write, tqdm(
                total=total, unit="subset", unit_scale=True, disable=not progress, file=sys.stderr) as bar:
            for chunk in stream:
                write(labels[chunk.subsets.numpy()])
                bar.update(len(chunk.subsets))
    elapsed = time.perf_counter() - start
    print(f"graph: {n} vertices, {m} edges; k={k}, prune={prune}: {total} subsets "
          f"in {elapsed:.2f} s", file=sys.stderr)
    return total


def _check_output(out: str, force: bool) -> None:
    """Reject a bad ``--out`` before any work: wrong extension, missing directory, existing file."""
    if out == "-":
        return
    if not out.endswith((".csv", ".npy")):
        raise ValueError(f"--out must be '-', a .csv or a .npy path, got {out!r}")
    path = Path(out)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory {path.parent} does not exist")
    if path.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force to overwrite it")


@contextlib.contextmanager
def _open_output(out: str, total: int, k: int, dtype: np.dtype) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield ``write(rows)`` for '-' (stdout, CSV text), FILE.csv or FILE.npy (``[total, k]``).

    Files are streamed with ordinary writes (so a full disk is an ``OSError``, never a
    crash in a memory map) into a temporary file that replaces ``out`` only on success.
    """
    if out == "-":
        yield lambda rows: np.savetxt(sys.stdout, rows, fmt="%d", delimiter=",")
        return
    npy = out.endswith(".npy")
    with atomic_path(out) as tmp, open(tmp, "wb" if npy else "w") as fh:
        if npy:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                      "shape": (total, k)}
            np.lib.format.write_array_header_1_0(fh, header)
            yield lambda rows: fh.write(np.ascontiguousarray(rows, dtype=dtype).tobytes())
        else:
            yield lambda rows: np.savetxt(fh, rows, fmt="%d", delimiter=",")
