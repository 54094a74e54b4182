"""MoleculeNet datasets: SMILES strings with multi-task labels, read from CSV files.

``read_moleculenet_csv`` reads a MoleculeNet-style CSV (one SMILES column, one column per
task, an empty cell for a missing label), plain or gzip-compressed; ``load_tox21`` reads
the copy of Tox21 shipped in ``rpfast/data/datasets``; ``featurize_dataset`` featurises a
dataset once and caches the result on disk; ``random_split`` and ``scaffold_split`` make the
train / validation / test splits. RDKit work is delegated to ``rpfast.data.molecules``.
"""
import csv
import hashlib
import os
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from rpfast._io import atomic_path, read_text
from rpfast._validation import check_count
from rpfast.data.molecules import FEATURIZER_VERSION, MoleculeGraphs, featurize_smiles, scaffold_groups

__all__ = ["MoleculeDataset", "read_moleculenet_csv", "load_tox21", "TOX21_TASKS", "featurize_dataset",
           "random_split", "scaffold_split"]

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


def _label_column(rows, at: int) -> bool:
    """True unless column ``at`` of the ``(line, row)`` pairs holds text and no number at all (an
    id or name column). A label column with a bad cell stays a label column, so the cell is
    reported with its line."""
    text = False
    for _, row in rows:
        if len(row) > at and row[at].strip():
            try:
                float(row[at])
                return True
            except ValueError:
                text = True
    return not text


def _shown(cell: str) -> str:
    return repr(cell if len(cell) <= 40 else cell[:37] + "...")


def read_moleculenet_csv(path, smiles_column: str = "smiles", tasks: Optional[Sequence[str]] = None
                         ) -> MoleculeDataset:
    """Read a MoleculeNet-style CSV file (UTF-8; gzip-compressed when the name ends in ``.gz``).

    The header names the columns: ``smiles_column`` holds the SMILES strings (matched without
    regard to case) and ``tasks`` the label columns, in the order given (default: every other
    column that holds a number, in file order, so an id or name column is left out).
    A label is a number; an empty cell (or ``nan``) is a missing label and becomes NaN.
    Blank lines are skipped. A missing file raises ``FileNotFoundError`` (a directory
    ``IsADirectoryError``); anything wrong in the file (no such column, a row with the
    wrong number of fields, a label that is not a finite number, bad
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
    return parse_moleculenet_csv(read_text(path, "MoleculeNet CSV"), path, smiles_column, tasks)


def parse_moleculenet_csv(text: str, path: Path, smiles_column: str = "smiles",
                          tasks: Optional[Sequence[str]] = None) -> MoleculeDataset:
    """:func:`read_moleculenet_csv` on the file's text (``path`` names it in messages);
    ``tasks=[]`` reads only the SMILES column."""
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
            matches = [name for name in header if name.lower() == smiles_column.lower()]
            if len(matches) != 1:
                raise ValueError(f"{path}:{header_line}: no {smiles_column!r} column (smiles_column); "
                                 f"the header has {header}")
            smiles_column = matches[0]
        rows = [(reader.line_num, row) for row in reader]
        if tasks is None:
            tasks = [name for at, name in enumerate(header) if name != smiles_column and _label_column(rows, at)]
        for name in tasks:
            if name not in header:
                raise ValueError(f"{path}:{header_line}: no column for task {name!r}; the header has {header}")
        smiles_at = header.index(smiles_column)
        task_at = [header.index(name) for name in tasks]
        for line, row in rows:
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{line}: {len(row)} fields, but the header has {len(header)} columns")
            molecule = row[smiles_at].strip()  # an empty one is kept: featurisation skips it as invalid
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


def default_cache_dir() -> Path:
    """``$RPFAST_CACHE``, else ``$XDG_CACHE_HOME/rpfast``, else ``~/.cache/rpfast``."""
    if os.environ.get("RPFAST_CACHE"):
        return Path(os.environ["RPFAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rpfast"


def featurize_dataset(dataset: MoleculeDataset, cache_dir=None, progress: bool = False) -> MoleculeGraphs:
    """Featurise every molecule of ``dataset`` (:func:`rpfast.data.molecules.featurize_smiles`),
    reading the result from ``cache_dir`` when the same SMILES were featurised before by the same
    featuriser version (the key is a SHA-256 of both). ``cache_dir=False`` disables the cache. A
    cache file is written atomically; an unreadable one is ignored and rewritten."""
    if not isinstance(dataset, MoleculeDataset):
        raise TypeError(f"dataset must be a MoleculeDataset, got {type(dataset).__name__}")
    key = hashlib.sha256("\n".join([FEATURIZER_VERSION, *dataset.smiles]).encode()).hexdigest()[:32]
    path = None
    if cache_dir is not False:
        path = Path(default_cache_dir() if cache_dir is None else cache_dir) / f"molecules-{key}.pt"
        if path.is_file():
            try:
                return MoleculeGraphs(**torch.load(path, weights_only=True))
            except Exception:  # noqa: BLE001 - a damaged cache is recomputed, never fatal
                pass
    graphs = featurize_smiles(dataset.smiles, progress=progress)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                torch.save(graphs.state(), tmp)
        except OSError:  # a read-only or full disk costs the cache, not the run
            pass
    return graphs


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
    order = torch.randperm(int(num_molecules), generator=torch.Generator().manual_seed(int(seed)))
    n_train = int(round(train_f * num_molecules))
    n_valid = int(round(valid_f * num_molecules))
    return order[:n_train], order[n_train:n_train + n_valid], order[n_train + n_valid:]


def scaffold_split(smiles: Sequence[str], fractions=(0.8, 0.1, 0.1)):
    """``(train, valid, test)`` index tensors with every Bemis-Murcko scaffold in one split:
    scaffold groups, largest first, fill train, then valid, then test (DeepChem's rule; the
    split is deterministic)."""
    train_f, valid_f, _ = _check_fractions(fractions)
    if isinstance(smiles, str) or not all(isinstance(item, str) for item in smiles):
        raise TypeError("smiles must be a sequence of SMILES strings")
    groups = {}
    for i, scaffold in enumerate(scaffold_groups(smiles)):
        groups.setdefault(scaffold, []).append(i)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0]))
    n = len(smiles)
    splits = ([], [], [])
    for group in ordered:
        if len(splits[0]) + len(group) <= train_f * n:
            splits[0].extend(group)
        elif len(splits[1]) + len(group) <= valid_f * n:
            splits[1].extend(group)
        else:
            splits[2].extend(group)
    return tuple(torch.tensor(sorted(s), dtype=torch.int64) for s in splits)
