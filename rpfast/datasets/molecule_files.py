"""Molecule files: the SMILES strings of a CSV or ``.smi`` file, in file order.

No RDKit here: parsing the SMILES into graphs is :mod:`rpfast.datasets.molecules`' work.
"""
from pathlib import Path
from typing import List, Optional

from rpfast._io import read_text
from rpfast.datasets.moleculenet import parse_moleculenet_csv

__all__ = ["MOLECULE_SUFFIXES", "is_molecule_file", "read_smiles_file"]

#: File names read as molecules (a ``.gz`` one is decompressed first).
MOLECULE_SUFFIXES = (".csv", ".csv.gz", ".smi", ".smi.gz")


def is_molecule_file(path) -> bool:
    """True if ``path`` names a molecule file by its extension (:data:`MOLECULE_SUFFIXES`)."""
    return str(path).endswith(MOLECULE_SUFFIXES)


def read_smiles_file(path, smiles_column: Optional[str] = None, keep_blank: bool = False) -> List[str]:
    """The SMILES strings of a molecule file (UTF-8, gzip-compressed when the name ends in ``.gz``).

    A CSV file starts with a header; the SMILES are in column ``smiles_column`` (default
    ``"smiles"``), matched ignoring case when no column has exactly that name. A ``.smi``
    file holds one SMILES per line, optionally followed by whitespace and a name (ignored);
    a first line whose first field is ``smiles`` (any case) is a header and lines starting
    with ``#`` are comments. Blank lines are skipped, so entry ``i`` is the file's ``i``-th
    molecule row (0-based, header not counted), or with ``keep_blank`` kept as ``""`` entries, so
    entry ``i`` is the file's ``i``-th line after the header (comments not counted), and a
    caller that writes one output row per entry keeps every line. Cells are stripped; an empty
    SMILES cell is kept as ``""`` for the caller to report with its row.

    A missing path raises ``FileNotFoundError`` (a directory ``IsADirectoryError``); an empty
    file, no molecule rows, a missing column (the message lists the header), a CSV row with
    the wrong number of fields, or bad CSV, gzip or UTF-8 raise ``ValueError`` naming the file
    (and the line).
    """
    path = Path(path)
    if not is_molecule_file(path):
        raise ValueError(f"{path}: a molecule file must end in {', '.join(MOLECULE_SUFFIXES)}")
    csv_file = path.name.endswith((".csv", ".csv.gz"))
    if smiles_column is not None and not isinstance(smiles_column, str):
        raise TypeError(f"smiles_column must be a str, got {type(smiles_column).__name__}")
    if smiles_column is not None and not csv_file:
        raise ValueError(f"{path}: a SMILES column is only chosen in a CSV file; a .smi file has no columns")
    text = read_text(path, "molecule file", "SMILES strings")
    if csv_file:
        smiles = _read_csv(path, text, smiles_column, keep_blank)
    else:
        if not text.strip():
            raise ValueError(f"{path}: the file is empty; expected one SMILES per line")
        smiles = _read_smi(text, keep_blank)
    if not smiles or (keep_blank and not any(smiles)):
        raise ValueError(f"{path}: no molecules in the file")
    return smiles


def _read_smi(text: str, keep_blank: bool) -> List[str]:
    """The first field of every non-comment line of a ``.smi`` file (a blank line: "" with
    ``keep_blank``, else skipped), the header dropped."""
    lines = [line.strip() for line in text.splitlines()]
    fields = [line.split(None, 1)[0] if line else "" for line in lines
              if not line.startswith("#") and (line or keep_blank)]
    if fields and fields[0].lower() == "smiles":
        fields = fields[1:]
    return fields


def _read_csv(path: Path, text: str, smiles_column: Optional[str], keep_blank: bool) -> List[str]:
    """Column ``smiles_column`` (default ``smiles``, any case) of every row of a CSV file (a
    blank line: "" with ``keep_blank``, else skipped), read by the MoleculeNet reader with no
    label columns."""
    return parse_moleculenet_csv(text, path, "smiles" if smiles_column is None else smiles_column, tasks=[],
                                 keep_blank=keep_blank).smiles
