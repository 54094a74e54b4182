"""MoleculeNet datasets: SMILES strings with multi-task labels, read from CSV files.

``read_moleculenet_csv`` reads a MoleculeNet-style CSV (one SMILES column, one column per
task, an empty cell for a missing label), plain or gzip-compressed; ``load_tox21`` reads
the copy of Tox21 shipped in ``rpfast/data/datasets``. There is no RDKit here: turn the
SMILES into graphs with ``rpfast.data.batch_from_smiles``.
"""
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from rpfast._io import read_text

__all__ = ["MoleculeDataset", "read_moleculenet_csv", "load_tox21", "TOX21_TASKS"]

DATASETS = Path(__file__).resolve().parent / "datasets"
TOX21_TASKS = ("NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD", "NR-PPAR-gamma",
               "SR-ARE", "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53")


@dataclass(frozen=True, eq=False)
class MoleculeDataset:
    """Molecules as SMILES strings and their labels.

    ``labels[i, t]`` (float32, shape ``[len(smiles), len(tasks)]``) is molecule ``i``'s label
    for task ``tasks[t]``, NaN where it is missing. ``len(dataset)`` is the number of molecules.
    """

    smiles: List[str]
    labels: torch.Tensor
    tasks: List[str]

    def __post_init__(self):
        shape = (len(self.smiles), len(self.tasks))
        if not (isinstance(self.labels, torch.Tensor) and self.labels.dtype == torch.float32
                and tuple(self.labels.shape) == shape):
            raise ValueError(f"labels must be a torch.float32 tensor of shape {shape} (molecules, tasks)")

    def __len__(self) -> int:
        return len(self.smiles)


def _shown(cell: str) -> str:
    return repr(cell if len(cell) <= 40 else cell[:37] + "...")


def read_moleculenet_csv(path, smiles_column: str = "smiles", tasks: Optional[Sequence[str]] = None
                         ) -> MoleculeDataset:
    """Read a MoleculeNet-style CSV file (UTF-8; gzip-compressed when the name ends in ``.gz``).

    The header names the columns: ``smiles_column`` holds the SMILES strings and ``tasks``
    the label columns, in the order given (default: every other column, in file order).
    A label is a number; an empty cell (or ``nan``) is a missing label and becomes NaN.
    Blank lines are skipped. A missing file raises ``FileNotFoundError`` (a directory
    ``IsADirectoryError``); anything wrong in the file (no such column, a row with the
    wrong number of fields, an empty SMILES, a label that is not a finite number, bad
    CSV, gzip or UTF-8) raises ``ValueError`` naming the file, the line and the column.
    """
    if not isinstance(smiles_column, str):
        raise TypeError(f"smiles_column must be a str, got {type(smiles_column).__name__}")
    if tasks is not None:
        if isinstance(tasks, str):
            raise TypeError(f"tasks must be a sequence of column names, not one string ({tasks!r}); "
                            f"use [{tasks!r}]")
        tasks = list(tasks)
        for i, name in enumerate(tasks):
            if not isinstance(name, str):
                raise TypeError(f"tasks[{i}] must be a column name (str), got {type(name).__name__}")
        if len(set(tasks)) != len(tasks):
            raise ValueError(f"tasks names a column twice: {tasks}")
        if smiles_column in tasks:
            raise ValueError(f"tasks includes the SMILES column {smiles_column!r}")
    path = Path(path)
    text = read_text(path, "MoleculeNet CSV")

    reader = csv.reader(io.StringIO(text, newline=""))
    smiles, labels = [], []
    try:
        header = next(reader, None)
        while header is not None and not header:  # leading blank lines
            header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: the file is empty; expected a CSV header with a {smiles_column!r} column")
        header_line = reader.line_num
        header = [name.strip() for name in header]
        for name in header:
            if header.count(name) > 1:
                raise ValueError(f"{path}:{header_line}: column {name!r} appears twice in the header")
        if smiles_column not in header:
            raise ValueError(f"{path}:{header_line}: no {smiles_column!r} column (smiles_column); "
                             f"the header has {header}")
        if tasks is None:
            tasks = [name for name in header if name != smiles_column]
        for name in tasks:
            if name not in header:
                raise ValueError(f"{path}:{header_line}: no column for task {name!r}; the header has {header}")
        smiles_at = header.index(smiles_column)
        task_at = [header.index(name) for name in tasks]
        for row in reader:
            if not row:
                continue
            line = reader.line_num
            if len(row) != len(header):
                raise ValueError(f"{path}:{line}: {len(row)} fields, but the header has {len(header)} columns")
            molecule = row[smiles_at].strip()
            if not molecule:
                raise ValueError(f"{path}:{line}: column {smiles_column!r}: empty SMILES")
            values = []
            for name, at in zip(tasks, task_at):
                cell = row[at].strip()
                if not cell:
                    values.append(math.nan)
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    raise ValueError(f"{path}:{line}: column {name!r}: label {_shown(cell)} is not a number "
                                     f"(leave the cell empty for a missing label)") from None
                if math.isinf(value):
                    raise ValueError(f"{path}:{line}: column {name!r}: label {_shown(cell)} is not a finite number")
                values.append(value)
            smiles.append(molecule)
            labels.append(values)
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None
    return MoleculeDataset(smiles, torch.tensor(labels, dtype=torch.float32).reshape(len(smiles), len(tasks)),
                           list(tasks))


def load_tox21() -> MoleculeDataset:
    """Tox21 as distributed by MoleculeNet, shipped with rpfast (public domain; provenance in
    ``rpfast/data/datasets/README.md``): 7,831 SMILES and 12 binary toxicity tasks
    (``TOX21_TASKS``), NaN for a missing label. A few SMILES do not parse in RDKit; pass
    ``skip_invalid=True`` to ``batch_from_smiles`` and index the labels with its ``kept``.
    """
    return read_moleculenet_csv(DATASETS / "tox21.csv.gz", tasks=TOX21_TASKS)
