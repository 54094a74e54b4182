"""``rpfast subsets``: enumerate or count the k-subsets of one graph, or of every molecule of a
molecule file, streaming the output (the command's module, :mod:`rpfast.commands.subsets`, only
declares its options from :class:`SubsetsConfig` and calls :func:`run_subsets`)."""
import argparse
import contextlib
import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Tuple

import numpy as np
from tqdm.auto import tqdm

from rpfast._io import atomic_path
from rpfast._options import int_range, option
from rpfast.data import GraphBatch, read_edge_list
from rpfast.datasets import graph_from_smiles
from rpfast.datasets.molecule_files import is_molecule_file, read_smiles_file
from rpfast.datasets.molecules import parse_smiles_quietly
from rpfast.ops.subsets import Prune, count_k_subsets, iter_k_subsets

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

    graph: str = option(help="edge-list file ('u v' per line, '#' comments); a molecule file: .csv or .csv.gz "
                        "with a SMILES column, .smi or .smi.gz with one SMILES (and an optional name) per line; "
                        "or, with --smiles, a SMILES string", positional=True)
    k: int = option(help="subset size", type=int_range(1))
    prune: str = option(Prune.NONE.value, "drop subsets with no edge / with an isolated vertex / that are "
                        "disconnected", type=_prune_value, metavar="{" + ",".join(p.value for p in Prune) + "}")
    smiles: bool = option(False, "GRAPH is a SMILES string (needs RDKit)")
    smiles_column: Optional[str] = option(None, "the SMILES column of a CSV molecule file (default: the column "
                                          "named 'smiles', any case)")
    count: bool = option(False, "only print the number of subsets (of a molecule file: a CSV table "
                         "molecule,smiles,atoms,count)")
    out: str = option("-", "'-' (stdout), FILE.csv or FILE.npy (written under a temporary name, renamed "
                      "when complete)")
    force: bool = option(False, "overwrite an existing --out file")
    chunk_size: int = option(1 << 20, "rows per streamed chunk", type=int_range(1))
    max_visits: Optional[int] = option(None, "with --count and a --prune other than none: the most search steps "
                                       "one graph's count may take (default 2^25, about a second; beyond it the "
                                       "count stops with an error naming the graph)", type=int_range(1))
    progress: bool = option(True, "hide the progress bar")


def run_subsets(graph: str, k: int, prune: str = "none", smiles: bool = False, count: bool = False,
                out: str = "-", chunk_size: int = 1 << 20, progress: bool = True, force: bool = False,
                smiles_column: Optional[str] = None, max_visits: Optional[int] = None) -> int:
    """Enumerate (or count) and write; returns the number of subsets. Summary on stderr.

    ``graph`` is an edge-list file, a molecule file (by extension, see
    :func:`rpfast.datasets.molecule_files.read_smiles_file`) or, with ``smiles``, a SMILES
    string. The rows of a molecule file start with the molecule's index (its 0-based row
    in the file); with ``count`` it gives a CSV table ``molecule,smiles,atoms,count``.
    A file output (``.csv`` or ``.npy``) is written under a temporary name next to it and
    renamed when complete, so a failed or interrupted run leaves no output file; an
    existing output is refused unless ``force``. ``max_visits`` bounds each graph's count
    (:func:`rpfast.ops.count_k_subsets`).
    """
    start = time.perf_counter()
    molecules = not smiles and is_molecule_file(graph)
    if smiles_column is not None and not (molecules and graph.endswith((".csv", ".csv.gz"))):
        raise ValueError(f"--smiles-column only applies to a .csv or .csv.gz molecule file, not {graph!r}")
    if not count or molecules:
        _check_output(out, force, npy=not count)
    parsed = ""
    if molecules:  # rows: molecule index, then atom indices
        batch, index, kept_smiles, failed, warned = _read_molecules(graph, smiles_column)
        parsed = f"; RDKit: {failed} failed, {warned} warned (its messages silenced)"
        width, dtype = k + 1, np.dtype(np.int64)

        def to_rows(chunk):
            return np.column_stack([index[chunk.graph.numpy()], chunk.subsets.numpy()])
    else:  # rows: original vertex labels
        batch, labels = graph_from_smiles(graph) if smiles else read_edge_list(graph)
        width, dtype = k, labels.dtype

        def to_rows(chunk):
            return labels[chunk.subsets.numpy()]
    n, m = batch.total_nodes, batch.undirected_csr()[1].numel() // 2
    if count:
        try:
            counts = count_k_subsets(batch, k, prune, max_visits=max_visits).tolist()
        except ValueError as error:  # the library's advice, in the command's spelling
            raise ValueError(str(error).replace("pass a larger max_visits to count_k_subsets",
                                                "pass a larger --max-visits")) from None
        total = sum(counts)
        if molecules:
            with _open_file(out) as fh:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(["molecule", "smiles", "atoms", "count"])
                writer.writerows(zip(index.tolist(), kept_smiles, batch.num_nodes.tolist(), counts))
        else:
            print(total)
    else:
        stream = iter_k_subsets(batch, k, prune, chunk_size=chunk_size)
        total = stream.total
        with _open_output(out, total, width, dtype) as write, tqdm(
                total=total, unit="subset", unit_scale=True, disable=not progress, file=sys.stderr) as bar:
            for chunk in stream:
                write(to_rows(chunk))
                bar.update(len(chunk.subsets))
    elapsed = time.perf_counter() - start
    what = f"{batch.num_graphs} molecules, {n} atoms, {m} bonds" if molecules else f"graph: {n} vertices, {m} edges"
    print(f"{what}; k={k}, prune={prune}: {total} subsets in {elapsed:.2f} s{parsed}", file=sys.stderr)
    return total


def _read_molecules(path: str, smiles_column: Optional[str]) -> Tuple[GraphBatch, np.ndarray, List[str], int, int]:
    """The molecules of a molecule file that RDKit parses: ``(batch, index, smiles, failed, warned)``.

    ``index[b]`` is molecule b's 0-based row in the file. RDKit's own messages are silenced
    (:func:`~rpfast.datasets.molecules.parse_smiles_quietly`): ``failed`` counts the rows that do
    not parse (or hold an empty SMILES), which are skipped and reported in one line on stderr,
    and ``warned`` the parsed molecules RDKit logged a message for. ValueError if none parses.
    """
    smiles = read_smiles_file(path, smiles_column)
    candidates = np.array([i for i, s in enumerate(smiles) if s], dtype=np.int64)
    batch, kept, warned = parse_smiles_quietly([smiles[i] for i in candidates])
    index = candidates[kept.numpy()]
    invalid = np.setdiff1d(np.arange(len(smiles)), index).tolist()
    rows = ", ".join(map(str, invalid[:5])) + (", ..." if len(invalid) > 5 else "")
    if not len(index):
        raise ValueError(f"{path}: none of the {len(smiles)} molecules has a valid SMILES (invalid rows: {rows})")
    if invalid:
        print(f"rpfast subsets: warning: skipped {len(invalid)} of {len(smiles)} molecules with invalid SMILES "
              f"(rows {rows}; 0-based, header not counted)", file=sys.stderr)
    return batch, index, [smiles[i] for i in index], len(invalid), len(warned)


def _check_output(out: str, force: bool, npy: bool = True) -> None:
    """Reject a bad ``--out`` before any work: wrong extension, missing directory, a directory,
    an existing file (unless ``force``).

    ``npy=False`` (a molecule file's count table) allows only '-' or a ``.csv`` path.
    """
    if out == "-":
        return
    if not out.endswith((".csv", ".npy") if npy else ".csv"):
        raise ValueError(f"--out must be '-', a .csv or a .npy path, got {out!r}" if npy else
                         f"--out must be '-' or a .csv path for the count table of a molecule file, got {out!r}")
    path = Path(out)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory {path.parent} does not exist")
    if path.is_dir():
        raise IsADirectoryError(f"--out {out} is a directory, not a file")
    if path.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force to overwrite it")


@contextlib.contextmanager
def _open_output(out: str, total: int, k: int, dtype: np.dtype) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield ``write(rows)`` for '-' (stdout, CSV text), FILE.csv or FILE.npy (``[total, k]``).

    Files are streamed with ordinary writes (so a full disk is an ``OSError``, never a
    crash in a memory map) into a temporary file that replaces ``out`` only on success.
    """
    npy = out.endswith(".npy")
    with _open_file(out, binary=npy) as fh:
        if npy:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                      "shape": (total, k)}
            np.lib.format.write_array_header_1_0(fh, header)
            yield lambda rows: fh.write(np.ascontiguousarray(rows, dtype=dtype).tobytes())
        else:
            yield lambda rows: np.savetxt(fh, rows, fmt="%d", delimiter=",")


@contextlib.contextmanager
def _open_file(out: str, binary: bool = False) -> Iterator[IO]:
    """Yield stdout for '-', else a text (or ``binary``) file opened under a temporary name
    (:func:`atomic_path`) that replaces ``out`` only when the block succeeds."""
    if out == "-":
        yield sys.stdout
        return
    with atomic_path(out) as tmp, open(tmp, "wb" if binary else "w") as fh:
        yield fh
