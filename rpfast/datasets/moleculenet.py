"""MoleculeNet datasets: SMILES strings with multi-task labels, read from CSV files.

``read_moleculenet_csv`` reads a MoleculeNet-style CSV (one SMILES column, one column per
task, an empty cell for a missing label), plain or gzip-compressed; ``load_tox21`` reads
the copy of Tox21 shipped in ``rpfast/data/datasets``; ``featurize_dataset`` featurises a
dataset once and caches the result on disk; ``random_split`` and ``scaffold_split`` make the
train / validation / test splits. RDKit work is delegated to ``rpfast.datasets.molecules``.
"""
import array
import contextlib
import csv
import hashlib
import io
import json
import math
import os
import pickle
import sys
import threading
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

from rpfast._io import atomic_path, read_text
from rpfast._validation import check_count
from rpfast.datasets.molecule_graphs import ATOM_CODES, BOND_CODES, CODE_DTYPE
from rpfast.datasets.molecules import (ELEMENTS, FEATURIZER_VERSION, MoleculeGraphs, atom_count_bounds, featurize_smiles,
                                   featurizer_settings, scaffold_groups)

__all__ = ["MoleculeDataset", "read_moleculenet_csv", "load_tox21", "TOX21_TASKS", "featurize_dataset",
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


def default_cache_dir() -> Path:
    """``$RPFAST_CACHE``, else ``$XDG_CACHE_HOME/rpfast``, else ``~/.cache/rpfast``."""
    if os.environ.get("RPFAST_CACHE"):
        return Path(os.environ["RPFAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rpfast"


#: The cache file's layout; a file of another layout (older rpfast) is featurised again.
CACHE_FORMAT = "rpfast-featurised-molecules/3"
#: the stored tensors (MoleculeGraphs' codes; its SMILES are the data set's at its rows): dtype, shape
#: with N atoms, B bonds, M molecules
_TENSORS = {"atoms": (CODE_DTYPE, ("N", len(ATOM_CODES))), "bonds": (CODE_DTYPE, ("B", len(BOND_CODES))),
            "pairs": (torch.int32, ("B", 2)), "atom_ptr": (torch.int64, ("M+1",)), "bond_ptr": (torch.int64, ("M+1",)),
            "rows": (torch.int64, ("M",)), "atom_counts": (torch.int64, ("M",))}
#: what the cache stores of a MoleculeGraphs (its smiles are the data set's at its rows)
_STORED = tuple(k for k in MoleculeGraphs.STATE if k != "smiles")


def _smiles_digest(smiles: Sequence[str]) -> str:
    """SHA-256 of a SMILES list, each string length-prefixed (no two lists share an encoding)."""
    digest = hashlib.sha256(len(smiles).to_bytes(8, "little"))
    for item in smiles:
        data = item.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _content_digest(record: dict) -> str:
    """SHA-256 over everything a cache record holds but this digest: each array's name, dtype,
    shape and bytes, and the lists and settings as JSON."""
    digest = hashlib.sha256()
    for name in sorted(record):
        if name == "content_sha256":
            continue
        value = record[name]
        digest.update(name.encode())
        if isinstance(value, torch.Tensor):
            digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
            digest.update(value.detach().contiguous().numpy().reshape(-1).view(np.uint8))  # no copy
        else:
            digest.update(json.dumps(value, sort_keys=True).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _cache_record(graphs: MoleculeGraphs, smiles: Sequence[str], settings: dict) -> dict:
    stored = {k: v for k, v in graphs.state().items() if k in _STORED}
    record = dict(stored, format=CACHE_FORMAT, featurizer=settings, smiles_sha256=_smiles_digest(smiles),
                  num_smiles=len(smiles), atom_counts=graphs.atom_ptr.diff())
    record["content_sha256"] = _content_digest(record)
    return record


def _cache_problem(record, smiles: Sequence[str], settings: dict) -> Optional[str]:
    """Why ``record`` (a loaded cache file) is not the featurisation of ``smiles`` by the featuriser
    ``settings`` describe, or None when every check passes: the format, the settings, the SMILES
    list, a content hash over every stored value (bit flips, edited arrays), the structure (shapes,
    offsets, rows), the atom counts against RDKit's parse of the SMILES, and the element and degree
    one-hot blocks against ``element`` and the bonds."""
    if not isinstance(record, dict) or record.get("format") != CACHE_FORMAT:
        found = record.get("format") if isinstance(record, dict) else None
        return (f"it has format {found!r}, not {CACHE_FORMAT!r} (written by another rpfast version, or not a "
                f"featurisation cache)")
    stored = record.get("featurizer")
    if stored != settings:
        if not isinstance(stored, dict):
            return f"its featuriser settings are {type(stored).__name__}, not a dict"
        differ = sorted(set(stored) | set(settings), key=str)
        shown = "; ".join(f"{key} {stored.get(key)!r}, now {settings.get(key)!r}" for key in differ
                          if stored.get(key) != settings.get(key))
        return f"it was featurised with other settings ({shown[:300]})"
    if record.get("num_smiles") != len(smiles) or record.get("smiles_sha256") != _smiles_digest(smiles):
        return (f"it holds the features of other SMILES ({record.get('num_smiles')!r} molecules with another "
                f"hash, this data set {len(smiles)}: another data set's cache under this name?)")
    for name, (dtype, shape) in _TENSORS.items():
        value = record.get(name)
        if not (isinstance(value, torch.Tensor) and value.dtype == dtype and value.dim() == len(shape)
                and value.layout == torch.strided):
            shown = (f"{value.dtype} of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor)
                     else type(value).__name__)
            return f"its {name} is {shown}, not a {len(shape)}-D {dtype} tensor"
    invalid = record.get("invalid")
    if not (isinstance(invalid, list) and all(type(i) is int for i in invalid)):
        return "its invalid entry is not a list of ints"
    if record.get("content_sha256") != _content_digest(record):
        return "its content hash does not match what it holds (damaged: bit flips or edited values)"
    problem = _structure_problem(record, smiles, invalid)
    if problem is not None:
        return problem
    return _feature_problem(record, smiles)


def _structure_problem(record: dict, smiles: Sequence[str], invalid: list) -> Optional[str]:
    atom_ptr, bond_ptr, rows, counts = (record[k] for k in ("atom_ptr", "bond_ptr", "rows", "atom_counts"))
    sizes = {"N": record["atoms"].shape[0], "B": record["bonds"].shape[0], "M": rows.numel()}
    sizes["M+1"] = sizes["M"] + 1
    for name, (_, shape) in _TENSORS.items():
        expected = tuple(sizes[d] if isinstance(d, str) else d for d in shape)
        if tuple(record[name].shape) != expected:
            return f"its {name} has shape {tuple(record[name].shape)}, expected {expected}"
    for name, ptr, total in (("atom_ptr", atom_ptr, sizes["N"]), ("bond_ptr", bond_ptr, sizes["B"])):
        if int(ptr[0]) != 0 or int(ptr[-1]) != total or bool((ptr.diff() < 0).any()):
            return f"its {name} does not run from 0 up to {total}"
    if not torch.equal(counts, atom_ptr.diff()):
        return "its atom counts disagree with its offsets"
    if sorted(rows.tolist() + invalid) != list(range(len(smiles))) or bool((rows.diff() <= 0).any()) \
            or invalid != sorted(invalid):
        return "its rows and invalid rows do not split the data set's rows"
    pairs = record["pairs"]
    if pairs.numel():
        per_bond = counts.repeat_interleave(bond_ptr.diff())  # each bond's molecule's atom count
        if bool(((pairs < 0) | (pairs >= per_bond.unsqueeze(1))).any()):
            return "its pairs name atoms outside their molecules"
    return None


def _feature_problem(record: dict, smiles: Sequence[str]) -> Optional[str]:
    """The stored codes against what this call computes without featurising: atom counts within
    RDKit's unsanitised parse of the SMILES, element codes in range, degree codes = bonds."""
    atoms, pairs, rows, counts, atom_ptr, bond_ptr = (record[k] for k in ("atoms", "pairs", "rows", "atom_counts",
                                                                          "atom_ptr", "bond_ptr"))
    if rows.numel():
        low, high = atom_count_bounds([smiles[i] for i in rows.tolist()])
        outside = (counts < torch.from_numpy(low)) | (counts > torch.from_numpy(high))
        if bool(outside.any()):
            m = int(torch.nonzero(outside)[0, 0])
            return (f"molecule at row {int(rows[m])} has {int(counts[m])} atoms, but its SMILES has "
                    f"{int(low[m])}..{int(high[m])}")
    N = atoms.shape[0]
    if N:
        element = atoms[:, ATOM_CODES.index("element")]
        if int(element.min()) < 0 or int(element.max()) >= len(ELEMENTS):
            return f"its element codes hold an index outside 0..{len(ELEMENTS) - 1}"
        ends = pairs.long() + atom_ptr[:-1].repeat_interleave(bond_ptr.diff()).unsqueeze(1)  # global atom ids
        degree = torch.bincount(ends.flatten(), minlength=N)
        if not torch.equal(atoms[:, ATOM_CODES.index("degree")].long(), degree):
            return "its degree codes disagree with its bonds"
    return None


def featurize_dataset(dataset: MoleculeDataset, cache_dir=None, progress: bool = False) -> MoleculeGraphs:
    """Featurise every molecule of ``dataset`` (:func:`rpfast.datasets.molecules.featurize_smiles`),
    reading the result from ``cache_dir`` when the same SMILES were featurised before by the same
    featuriser (its settings and the RDKit release, :func:`rpfast.datasets.molecules.featurizer_settings`).
    ``cache_dir=False`` disables the cache.

    The file's name is a SHA-256 of the featuriser version and the SMILES; the file also holds the
    featuriser settings, a hash of the SMILES list, the atom counts and a SHA-256 over everything it
    holds. A file is used only when all of them match this call (and the atom counts match RDKit's
    quick parse of the SMILES, the element and degree features the bonds); otherwise (another data
    set's cache under the name, bit flips, edited arrays, an older format, an unreadable file) a
    ``RuntimeWarning`` says why and the molecules are featurised again and the file rewritten.
    The checks catch accidents, not a forger who recomputes the hashes. A cache file is written
    atomically; a read-only or full disk costs the cache, not the run."""
    if not isinstance(dataset, MoleculeDataset):
        raise TypeError(f"dataset must be a MoleculeDataset, got {type(dataset).__name__}")
    key = hashlib.sha256("\n".join([FEATURIZER_VERSION, *dataset.smiles]).encode()).hexdigest()[:32]
    path = None
    if cache_dir is not False:
        path = Path(default_cache_dir() if cache_dir is None else cache_dir) / f"molecules-{key}.pt"
        settings = featurizer_settings()
        if path.is_file():
            problem = _read_cache(path, dataset.smiles, settings)
            if isinstance(problem, MoleculeGraphs):
                return problem
            warnings.warn(f"featurisation cache {path} is not used: {problem}; featurising the molecules "
                          f"again and rewriting it", RuntimeWarning, stacklevel=2)
    graphs = featurize_smiles(dataset.smiles, progress=progress)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                torch.save(_cache_record(graphs, dataset.smiles, settings), tmp)
        except OSError:  # a read-only or full disk costs the cache, not the run
            pass
    return graphs


def _read_cache(path: Path, smiles: List[str], settings: dict):
    """The :class:`MoleculeGraphs` the cache file at ``path`` holds for ``smiles``, or why it cannot
    be used (a string)."""
    if not zipfile.is_zipfile(path):  # torch's own message would speak of torch.save's options
        return "it cannot be read as a cache file (not a zip archive, the format torch.save writes)"
    try:
        record = torch.load(path, weights_only=True, mmap=True)  # pages in as it is read
    except Exception as error:  # noqa: BLE001 - a damaged cache is recomputed, never fatal
        # torch's unpickling message suggests weights_only=False: never for a file found on disk
        first = "" if isinstance(error, pickle.UnpicklingError) else (str(error).splitlines() or [""])[0]
        return f"it cannot be read as a cache file ({type(error).__name__}{': ' * bool(first)}{first[:200]})"
    problem = _cache_problem(record, smiles, settings)
    if problem is not None:
        return problem
    return MoleculeGraphs(**{k: record[k] for k in _STORED}, smiles=[smiles[i] for i in record["rows"].tolist()])


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
