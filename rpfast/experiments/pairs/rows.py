"""``pairs.csv``, the per-pair rows of ``rpfast pairs``: created with its header, appended one
flushed row at a time, and read back by ``--resume``.

The file never exists without its header: :func:`create_rows_file` writes the header under a
temporary name and renames it into place, so a run killed at any moment (``kill -9`` included)
leaves either no ``pairs.csv`` or one whose first line is the header. :func:`read_rows` takes
back what a killed run left: a last line cut short is dropped, a file that lost its header (an
earlier rpfast wrote it lazily) gets it back, and a file it cannot read is refused with one line
naming the file and the line.
"""
import csv
from pathlib import Path
from typing import Dict, List

from rpfast._io import atomic_path

__all__ = ["COLUMNS", "create_rows_file", "read_rows"]

COLUMNS = ("category", "index", "n", "seed", "t2", "t2_reliability", "p_value", "distinguished", "reliable",
           "epochs", "final_loss", "seconds")
_HEADER = ",".join(COLUMNS)
_INTEGERS = ("index", "n", "seed", "epochs")
_FLOATS = ("t2", "t2_reliability", "p_value", "final_loss", "seconds")
_FLAGS = ("distinguished", "reliable")


def create_rows_file(path: Path) -> None:
    """Create ``path`` holding only the header line (atomically: the header or no file)."""
    with atomic_path(path) as tmp:
        tmp.write_text(_HEADER + "\n")


def read_rows(path: Path) -> List[Dict]:
    """The complete rows of the ``pairs.csv`` at ``path`` (an empty list, and a new file with
    its header, when there is none), with their values typed.

    Repaired in place (atomically), once every row has been read: a last line without its
    newline (the run was killed while writing it; that pair runs again) and a missing header
    (the first line is a row). Refused with a ``ValueError`` naming the file and the line, the
    file untouched: another header, a row with the wrong number of fields, a value that is not
    of its column's type.
    """
    if not path.is_file():
        create_rows_file(path)
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--resume: {path} is not a pairs.csv of rpfast pairs (not UTF-8 text); move it away "
                         "to run those pairs again") from None
    lines = text.splitlines(keepends=True)
    repaired = False
    if lines and not lines[-1].endswith("\n"):
        lines, repaired = lines[:-1], True
    if not lines or lines[0].rstrip("\r\n") != _HEADER:
        if lines and not _looks_like_a_row(lines[0]):
            raise ValueError(f"--resume: {path}:1: not the header of rpfast pairs' pairs.csv ({_HEADER}); move the "
                             "file away to run those pairs again")
        lines, repaired = [_HEADER + "\n"] + lines, True
    rows = [_typed(row, path, number) for number, row in enumerate(csv.DictReader(lines, restval=None), start=2)]
    if repaired:
        with atomic_path(path) as tmp:
            tmp.write_text("".join(lines))
    return rows


def _looks_like_a_row(line: str) -> bool:
    fields = next(csv.reader([line]), [])
    return len(fields) == len(COLUMNS) and fields[1].isdigit()


def _typed(row: Dict, path: Path, number: int) -> Dict:
    """``row`` with numbers and flags parsed; ValueError naming ``path:number`` otherwise."""
    if None in row or any(value is None for value in row.values()):
        raise ValueError(f"--resume: {path}:{number}: expected {len(COLUMNS)} fields ({_HEADER}); the file is "
                         "damaged: move it away to run those pairs again")
    typed = dict(row)
    try:
        for name in _INTEGERS:
            typed[name] = int(row[name])
        for name in _FLOATS:
            typed[name] = float(row[name])
        for name in _FLAGS:
            if row[name] not in ("True", "False"):
                raise ValueError(f"{name} {row[name]!r} is not True or False")
            typed[name] = row[name] == "True"
    except ValueError as error:
        raise ValueError(f"--resume: {path}:{number}: {error}; the file is damaged: move it away to run those pairs "
                         "again") from None
    if not row["category"] or typed["index"] < 0 or typed["seed"] < 0:
        raise ValueError(f"--resume: {path}:{number}: not a row rpfast pairs writes; the file is damaged: move it "
                         "away to run those pairs again")
    return typed
