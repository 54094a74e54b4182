"""MoleculeNet datasets: SMILES strings with multi-task labels, read from CSV files.

``read_moleculenet_csv`` reads a MoleculeNet-style CSV (one SMILES column, one column per
task, an empty cell for a missing label), plain or gzip-compressed; ``load_tox21`` reads
the copy of Tox21 shipped beside this module; ``random_split``, ``scaffold_split`` and
``balanced_scaffold_split`` make the train / validation / test splits. RDKit work is delegated to
``rpfast.datasets.molecules``; featurising a data set once and caching it is
``rpfast.datasets.molecule_cache``'s ``featurize_dataset``.
"""
import array
import contextlib
import csv
import io
import math
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

from rpfast._io import read_text
from rpfast._validation import check_count
from rpfast.datasets.molecules import scaffold_groups

__all__ = ["MoleculeDataset", "read_moleculenet_csv", "load_tox21", "TOX21_TASKS",
           "random_split", "scaffold_split", "balanced_scaffold_split"]

DATASETS = Path(__file__).resolve().parent  # tox21.csv.gz ships beside this module
#: Tox21's twelve binary toxicity tasks, in the file's column order.
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


def _label_columns(rows, columns: Sequence[int]) -> List[int]:
    """The ``columns`` that hold a number in some row of ``rows`` (``(first line, last line, row)``
    triples), or hold no text at all: a column of text and no number (an id or a name) is left
    out. A label column with a bad cell stays a label column, so the cell is reported with its
    line."""
    undecided, text = set(columns), set()
    for *_, row in rows:
        for at in list(undecided):
            if len(row) > at and row[at].strip():
                try:
                    float(row[at])
                except ValueError:
                    text.add(at)
                else:
                    undecided.discard(at)  # a number: a label column
        if not undecided:
            break
    return [at for at in columns if at not in undecided or at not in text]


def _shown(cell: str) -> str:
    return repr(cell if len(cell) <= 40 else cell[:37] + "...")


def read_moleculenet_csv(path, smiles_column: str = "smiles", tasks: Optional[Sequence[str]] = None
                         ) -> MoleculeDataset:
    """Read a MoleculeNet-style CSV file (UTF-8; gzip-compressed when the name ends in ``.gz``).

    The header names the columns: ``smiles_column`` holds the SMILES strings (matched without
    regard to case) and ``tasks`` the label columns, in the order given (default: every other
    column that holds a number, in file order, so an id or name column is left out).
    A label is a number; an empty cell (or ``nan``) is a missing label and becomes NaN.
    Blank lines are skipped; a field may be of any length (no csv field size limit). A missing
    file raises ``FileNotFoundError`` (a directory ``IsADirectoryError``); anything wrong in the
    file (no such column, a row with the wrong number of fields, a label that is not a finite
    number, a SMILES cell over several lines, bad CSV, gzip or UTF-8) raises ``ValueError``
    naming the file, the line and the column (and a likely unclosed quote when a quoted field
    runs on over lines).
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
    return parse_moleculenet_csv(read_text(path, "MoleculeNet CSV"), path, smiles_column, tasks)


#: Serialises the raising and restoring of the csv module's (process-wide) field size limit.
_FIELD_LIMIT_LOCK = threading.Lock()
#: The largest field size limit the csv module takes (a C long).
_MAX_FIELD_LIMIT = 2 ** 31 - 1 if sys.platform == "win32" else sys.maxsize


@contextlib.contextmanager
def _csv_fields_up_to(size: int):
    """The csv module's field size limit (131,072 characters by default, so a valid file with a
    long SMILES or name failed as "field larger than field limit") raised to ``size`` while the
    block runs, then restored. ``size`` is the text's length: the text is in memory already and no
    field can be longer, so the limit stays bounded and guards nothing the text does not."""
    with _FIELD_LIMIT_LOCK:
        old = csv.field_size_limit()
        csv.field_size_limit(max(old, min(size + 1, _MAX_FIELD_LIMIT)))
        try:
            yield
        finally:
            csv.field_size_limit(old)


def parse_moleculenet_csv(text: str, path: Path, smiles_column: str = "smiles",
                          tasks: Optional[Sequence[str]] = None, keep_blank: bool = False) -> MoleculeDataset:
    """:func:`read_moleculenet_csv` on the file's text (``path`` names it in messages);
    ``tasks=[]`` reads only the SMILES column. Blank lines after the header are skipped, or with
    ``keep_blank`` kept as molecules with an empty SMILES and missing labels, so molecule ``i`` is
    the ``i``-th line after the header. A field may be as long as the text (the csv
    module's field size limit is lifted for the read); a quoted field that runs on over several
    lines in the SMILES column, or whose row ends up with the wrong number of fields, is reported
    with the lines it spans as a likely unclosed quote."""
    def records():
        """The rows after the header as ``(first line, last line, fields)`` (a quoted field may
        span lines), read from the text again at each call (rows are not held in memory)."""
        reader = csv.reader(io.StringIO(text, newline=""))
        with _csv_fields_up_to(len(text)):
            try:
                for _ in range(header_records):
                    next(reader)
                last = header_line
                for row in reader:
                    yield last + 1, reader.line_num, row
                    last = reader.line_num
            except csv.Error as error:
                raise ValueError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None

    reader = csv.reader(io.StringIO(text, newline=""))
    with _csv_fields_up_to(len(text)):
        try:
            header, header_records = next(reader, None), 1
            while header is not None and not header:  # leading blank lines
                header, header_records = next(reader, None), header_records + 1
        except csv.Error as error:
            raise ValueError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None
    header_line = reader.line_num
    if header is None:
        raise ValueError(f"{path}: the file is empty; expected a CSV header with a {smiles_column!r} column")
    header = [name.strip() for name in header]
    column_of = {}  # name -> position (a dict: files with thousands of columns stay linear)
    for at, name in enumerate(header):
        if name in column_of:
            raise ValueError(f"{path}:{header_line}: column {name!r} appears twice in the header")
        column_of[name] = at
    if smiles_column not in column_of:
        matches = [name for name in header if name.lower() == smiles_column.lower()]
        if len(matches) != 1:
            raise ValueError(f"{path}:{header_line}: no {smiles_column!r} column (smiles_column); "
                             f"the header has {header}")
        smiles_column = matches[0]
    if tasks is None:
        candidates = [at for at, name in enumerate(header) if name != smiles_column]
        tasks = [header[at] for at in _label_columns(records(), candidates)]
    for name in tasks:
        if name not in column_of:
            raise ValueError(f"{path}:{header_line}: no column for task {name!r}; the header has {header}")
    smiles_at = column_of[smiles_column]
    task_at = [column_of[name] for name in tasks]
    smiles, labels = [], array.array("f")  # 4 bytes a label: a million molecules' rows are not kept as lists
    for line, last, row in records():
        if not row:
            if keep_blank:
                smiles.append("")
                labels.extend([math.nan] * len(tasks))
            continue
        spans = "" if last == line else f" (a quoted field runs on to line {last}: an unclosed quote?)"
        if len(row) != len(header):
            raise ValueError(f"{path}:{line}: {len(row)} fields, but the header has {len(header)} columns{spans}")
        molecule = row[smiles_at].strip()  # an empty one is kept: featurisation skips it as invalid
        if "\n" in molecule or "\r" in molecule:
            raise ValueError(f"{path}:{line}: column {smiles_column!r}: the SMILES {_shown(molecule)} spans "
                             f"lines {line}..{last} (an unclosed quote?)")
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
                                 f"(leave the cell empty for a missing label){spans}") from None
            if math.isinf(value):
                raise ValueError(f"{path}:{line}: column {name!r}: label {_shown(cell)} is not a finite number")
            values.append(value)
        smiles.append(molecule)
        labels.extend(values)
    values = torch.from_numpy(np.frombuffer(labels, dtype=np.float32).copy()) if labels else torch.zeros(0, dtype=torch.float32)
    return MoleculeDataset(smiles, values.reshape(len(smiles), len(tasks)), list(tasks))


def load_tox21() -> MoleculeDataset:
    """Tox21 as distributed by MoleculeNet, shipped with rpfast (public domain; provenance in
    ``rpfast/datasets/README.md``): 7,831 SMILES and 12 binary toxicity tasks
    (``TOX21_TASKS``), NaN for a missing label. A few SMILES do not parse in RDKit; pass
    ``skip_invalid=True`` to ``batch_from_smiles`` and index the labels with its ``kept``.
    """
    return read_moleculenet_csv(DATASETS / "tox21.csv.gz", tasks=TOX21_TASKS)


def _check_fractions(fractions) -> tuple:
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be three non-negative numbers (train, valid, test) summing to 1, "
                         f"got {fractions}")
    return fractions


def random_split(num_molecules: int, seed: int, fractions=(0.8, 0.1, 0.1)):
    """``(train, valid, test)`` index tensors: a uniformly random partition of
    ``range(num_molecules)`` in the given proportions (the paper's 80/10/10), from ``seed``."""
    train_f, valid_f, _ = _check_fractions(fractions)
    num_molecules = check_count(num_molecules, "num_molecules")
    seed = check_count(seed, "seed")
    order = torch.randperm(int(num_molecules), generator=torch.Generator().manual_seed(int(seed)), dtype=torch.int64)
    n_train = int(round(train_f * num_molecules))
    n_valid = int(round(valid_f * num_molecules))
    return order[:n_train], order[n_train:n_train + n_valid], order[n_train + n_valid:]


def _scaffold_sets(smiles: Sequence[str]) -> List[List[int]]:
    """The molecules' positions grouped by Bemis-Murcko scaffold, in order of first appearance."""
    if isinstance(smiles, str) or not all(isinstance(item, str) for item in smiles):
        raise TypeError("smiles must be a sequence of SMILES strings")
    groups = {}
    for i, scaffold in enumerate(scaffold_groups(smiles)):
        groups.setdefault(scaffold, []).append(i)
    return list(groups.values())


def _fill_in_order(groups: Sequence[List[int]], n: int, fractions):
    """Each group, in order, to train while train stays within ``train_fraction * n``, else to
    valid while train and valid together stay within ``(train_fraction + valid_fraction) * n``,
    else to test; the three sorted index tensors."""
    train_f, valid_f, _ = fractions
    train_cutoff, valid_cutoff = train_f * n, (train_f + valid_f) * n
    train, valid, test = [], [], []
    for group in groups:
        if len(train) + len(group) <= train_cutoff:
            train.extend(group)
        elif len(train) + len(valid) + len(group) <= valid_cutoff:
            valid.extend(group)
        else:
            test.extend(group)
    return tuple(torch.tensor(sorted(s), dtype=torch.int64) for s in (train, valid, test))


def scaffold_split(smiles: Sequence[str], fractions=(0.8, 0.1, 0.1)):
    """``(train, valid, test)`` index tensors with every Bemis-Murcko scaffold in one split, by
    DeepChem's ``ScaffoldSplitter`` rule: scaffold groups sorted by (size, first index), both
    descending (equal sizes: the group seen last comes first); each group goes to train while
    train stays within ``train_fraction * n``, else to valid while train and valid together stay
    within ``(train_fraction + valid_fraction) * n``, else to test. Deterministic."""
    fractions = _check_fractions(fractions)
    ordered = sorted(_scaffold_sets(smiles), key=lambda g: (len(g), g[0]), reverse=True)
    return _fill_in_order(ordered, len(smiles), fractions)


def balanced_scaffold_split(smiles: Sequence[str], seed: int, fractions=(0.8, 0.1, 0.1)):
    """``(train, valid, test)`` index tensors with every Bemis-Murcko scaffold in one split, by
    chemprop's balanced rule: the scaffold groups too big for half the validation or the test
    share (more than ``fraction * n / 2`` molecules for either) come first, the others after them, each part in an
    order shuffled by ``seed``; groups are then filled in as :func:`scaffold_split` does. Big
    scaffolds land in train, and the small ones spread over the three splits at random, so
    valid and test see a mix of scaffolds (and of labels) and every seed gives another split."""
    fractions = _check_fractions(fractions)
    seed = check_count(seed, "seed")
    n = len(smiles)
    limit = min(fractions[1], fractions[2]) * n / 2
    groups = _scaffold_sets(smiles)
    big = [g for g in groups if len(g) > limit]
    small = [g for g in groups if len(g) <= limit]
    rng = np.random.default_rng(seed)
    ordered = [big[i] for i in rng.permutation(len(big))] + [small[i] for i in rng.permutation(len(small))]
    return _fill_in_order(ordered, n, fractions)
