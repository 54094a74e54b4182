"""Train / validation / test splits of `rpfast molecules`, and the ``splits.json`` that records
them so that another run (``--splits-file``) or another tool can reuse them.

Splits index the molecules that parse (positions in :class:`~rpfast.datasets.molecules.MoleculeGraphs`);
``splits.json`` holds data-file rows instead (0-based, header not counted, unparsable rows
included in the count), which is what a user can look up in the file::

    {"format": "rpfast-splits/1", "split": "scaffold", "seed": 0,
     "splits": [{"train": [rows], "valid": [rows], "test": [rows]}, ...]}

A reused file may also be chemprop's layout (a list of ``{"train", "val", "test"}`` dicts).
"""
import json
from pathlib import Path
from typing import List, Sequence, Tuple

import torch

from rpfast._io import read_text
from rpfast.datasets.moleculenet import balanced_scaffold_split, random_split, scaffold_split
from rpfast.datasets.molecules import MoleculeGraphs

SPLITS = ("random", "scaffold", "scaffold-balanced")
SPLITS_FORMAT = "rpfast-splits/1"
Split = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]
PARTS = ("train", "valid", "test")


def make_splits(kind: str, graphs: MoleculeGraphs, count: int, seed: int) -> List[Split]:
    """``count`` splits of ``graphs`` by rule ``kind`` (:data:`SPLITS`); split ``s`` uses seed
    ``seed + s`` (the deterministic scaffold rule gives the same split for every seed)."""
    if kind == "random":
        return [random_split(len(graphs), seed + s) for s in range(count)]
    if kind == "scaffold":
        return [scaffold_split(graphs.smiles)] * count
    if kind == "scaffold-balanced":
        return [balanced_scaffold_split(graphs.smiles, seed + s) for s in range(count)]
    raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {kind!r}")


def splits_record(splits: Sequence[Split], graphs: MoleculeGraphs, kind: str, seed: int) -> dict:
    """The ``splits.json`` content of ``splits``: data-file rows per part."""
    rows = graphs.rows
    return {"format": SPLITS_FORMAT, "split": kind, "seed": seed,
            "splits": [{part: rows[index].tolist() for part, index in zip(PARTS, split)} for split in splits]}


def read_splits_file(path, graphs: MoleculeGraphs, num_rows: int) -> List[Split]:
    """The splits a ``splits.json`` (rpfast's or chemprop's layout) records, as positions in
    ``graphs`` (a data file of ``num_rows`` molecule rows). Every problem is a ValueError naming
    the file, the split and the row: not JSON, a missing part, a row that is not an integer in
    ``[0, num_rows)``, a row RDKit cannot parse, a row in two parts or twice, an empty train or
    test part."""
    path = Path(path)
    try:
        record = json.loads(read_text(path, "splits file"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    entries = record.get("splits") if isinstance(record, dict) else record
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected {{\"splits\": [{{\"train\": [...], \"valid\": [...], \"test\": [...]}}, "
                         "...]}} (rpfast) or a list of {\"train\", \"val\", \"test\"} (chemprop)")
    position = torch.full((num_rows,), -1, dtype=torch.int64)
    position[graphs.rows] = torch.arange(len(graphs))
    invalid = set(graphs.invalid)
    return [_read_split(path, s, entry, position, invalid, num_rows) for s, entry in enumerate(entries)]


def _read_split(path: Path, s: int, entry, position: torch.Tensor, invalid: set, num_rows: int) -> Split:
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: split {s} is a {type(entry).__name__}, not an object with train/valid/test rows")
    seen = {}
    parts = []
    for part in PARTS:
        rows = entry.get(part, entry.get("val") if part == "valid" else None)
        if not isinstance(rows, list):
            raise ValueError(f"{path}: split {s} has no {part!r} list of rows")
        for row in rows:
            if type(row) is not int or not 0 <= row < num_rows:
                raise ValueError(f"{path}: split {s}, {part}: row {row!r} is not a row of the data "
                                 f"(0..{num_rows - 1}, counting molecule rows from 0)")
            if row in invalid:
                raise ValueError(f"{path}: split {s}, {part}: row {row} holds a SMILES RDKit cannot parse")
            if row in seen:
                where = f"twice in {part}" if seen[row] == part else f"in {seen[row]} and in {part}"
                raise ValueError(f"{path}: split {s}: row {row} is {where}")
            seen[row] = part
        parts.append(position[torch.tensor(rows, dtype=torch.int64)])
    for part, index in zip(PARTS, parts):
        if part != "valid" and not len(index):
            raise ValueError(f"{path}: split {s} has an empty {part} part")
    return tuple(parts)
