"""A screening-library-sized molecule file for measuring `rpfast molecules` at scale (memory per
molecule, a million-molecule epoch) without a million-molecule data set on disk.

It writes N rows of Tox21 (the copy shipped with rpfast, 7,831 molecules with 12 binary tasks):
row i is Tox21's molecule ``i mod 7831`` with its labels, written as the canonical SMILES the
first time a molecule appears and as one of RDKit's random SMILES of it (another atom order,
``Chem.MolToRandomSmilesVect`` with a seed of the row) every later time. Every row is therefore a
valid, distinct string of a real molecule, with the atom counts and bond patterns of a real
library; a model sees each molecule relabelled, which is what RP averages over anyway. The
scores of a run on it mean nothing (molecules repeat across the splits); its time and memory do.

    python benchmarks/molecule_library.py library.csv --molecules 1000000
"""
import argparse
import csv
import gzip
import math
from pathlib import Path

from tqdm import tqdm

from rpfast._io import atomic_path
from rpfast.datasets.moleculenet import load_tox21


def library_rows(molecules: int, progress: bool = False):
    """``(smiles, labels)`` of the file's rows in order (module docstring); labels as CSV cells."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    tox21 = load_tox21()
    parsed = [Chem.MolFromSmiles(s) for s in tox21.smiles]
    cells = [["" if math.isnan(v) else str(int(v)) for v in row] for row in tox21.labels.tolist()]
    rows = [i for i, mol in enumerate(parsed) if mol is not None]  # Tox21 has a few RDKit cannot parse
    for i in tqdm(range(molecules), desc="writing molecules", unit="mol", disable=not progress):
        row = rows[i % len(rows)]
        mol = parsed[row]
        if i < len(rows):
            smiles = Chem.MolToSmiles(mol)
        else:
            smiles = Chem.MolToRandomSmilesVect(mol, 1, randomSeed=i + 1)[0]
        yield smiles, cells[row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the CSV (or .csv.gz) to write: a smiles column and Tox21's twelve tasks")
    parser.add_argument("--molecules", type=int, default=1_000_000, help="rows to write (default 1,000,000)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
    if args.molecules < 1:
        parser.error(f"--molecules must be a positive integer, got {args.molecules}")
    out = Path(args.out)
    tasks = load_tox21().tasks
    with atomic_path(out) as tmp:  # a killed run leaves no file that looks complete
        opener = gzip.open if out.suffix == ".gz" else open
        with opener(tmp, "wt", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["smiles", *tasks])
            for smiles, labels in library_rows(args.molecules, progress=not args.no_progress):
                writer.writerow([smiles, *labels])
    print(f"wrote {args.molecules:,} molecules to {out}")


if __name__ == "__main__":
    main()
