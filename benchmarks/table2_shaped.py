"""A file shaped like HIV or MUV (MoleculeNet) for timing `rpfast molecules --paper` where the real
data sets are not at hand: the same number of molecules, mean heavy-atom count, label columns,
positive rate and, for MUV, missing labels; the molecules are real ones, the labels are not.

Molecules are drawn (with replacement, seed 0) from the shipped Tox21 and any ``--smiles-from``
CSVs, with weights ``exp(t (atoms - mean))`` whose ``t`` brings the mean heavy-atom count to the
data set's, and each is written as one of RDKit's random SMILES. A label is 1 for the top
``rate`` of a random linear score of six standardised counts (aromatic fraction, N, S, halogen,
ring and O counts) plus unit Gaussian noise, so models learn it and early stopping behaves as on
a real task; the scores a run reaches mean nothing.

    python benchmarks/table2_shaped.py hiv.csv --shape hiv --smiles-from lipophilicity.csv
"""
import argparse
import csv
from pathlib import Path

import numpy as np

from rpfast._io import atomic_path
from rpfast.datasets.moleculenet import load_tox21

#: molecules, mean heavy atoms, tasks, positive rate per task and labelled fraction of the
#: negatives (MoleculeNet's files: MUV labels about 15,000 molecules per assay)
SHAPES = {"hiv": (41127, 25.5, 1, 0.035, 1.0), "muv": (93087, 24.2, 17, 0.002, 0.16)}


def _tilted_weights(atoms: np.ndarray, mean: float) -> np.ndarray:
    """Sampling weights ``exp(t (atoms - atoms.mean()))`` normalised, ``t`` found by bisection
    so the weighted mean of ``atoms`` is ``mean``."""
    low, high = -1.0, 1.0
    for _ in range(60):
        t = (low + high) / 2
        weights = np.exp(t * (atoms - atoms.mean()))
        low, high = (t, high) if (weights * atoms).sum() / weights.sum() < mean else (low, t)
    return weights / weights.sum()


def _counts(mol) -> list:
    symbols = [a.GetSymbol() for a in mol.GetAtoms()]
    return [sum(a.GetIsAromatic() for a in mol.GetAtoms()) / len(symbols), symbols.count("N"), symbols.count("S"),
            sum(s in ("Cl", "Br", "I", "F") for s in symbols), mol.GetRingInfo().NumRings(), symbols.count("O")]


def shaped_rows(shape: str, extra_smiles=()):
    """``(smiles, label cells)`` of the file's rows and the label column names."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    molecules, mean_atoms, tasks, rate, labelled = SHAPES[shape]
    mols = [m for m in (Chem.MolFromSmiles(s) for s in [*load_tox21().smiles, *extra_smiles]) if m is not None]
    weights = _tilted_weights(np.array([m.GetNumAtoms() for m in mols], float), mean_atoms)
    rng = np.random.default_rng(0)
    pick = rng.choice(len(mols), size=molecules, p=weights)
    counts = np.array([_counts(m) for m in mols])
    counts = (counts - counts.mean(0)) / (counts.std(0) + 1e-9)
    scores = counts[pick] @ rng.normal(size=(tasks, counts.shape[1])).T + rng.normal(size=(molecules, tasks))
    labels = (scores > np.quantile(scores, 1 - rate, axis=0)).astype(int)
    columns = ["HIV_active"] if shape == "hiv" else [f"MUV-{600 + i}" for i in range(tasks)]

    def rows():
        for i, (p, row) in enumerate(zip(pick, labels)):
            cells = [str(v) for v in row]
            if labelled < 1:
                cells = [c if c == "1" or rng.random() < labelled else "" for c in cells]
            yield Chem.MolToRandomSmilesVect(mols[p], 1, randomSeed=i + 1)[0], cells

    return columns, rows()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the CSV to write")
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--smiles-from", action="append", default=[],
                        help="a CSV whose 'smiles' column (any case) adds molecules to draw from")
    args = parser.parse_args()
    extra = []
    for name in args.smiles_from:
        if not Path(name).is_file():
            parser.error(f"--smiles-from {name}: no such file")
        with open(name, newline="") as handle:
            reader = csv.DictReader(handle)
            column = next((c for c in reader.fieldnames or () if "smiles" in c.lower()), None)
            if column is None:
                parser.error(f"{name} has no smiles column")
            extra += [row[column] for row in reader]
    columns, rows = shaped_rows(args.shape, extra)
    out = Path(args.out)
    with atomic_path(out) as tmp:  # a killed run leaves no file that looks complete
        with open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["smiles", *columns])
            for smiles, cells in rows:
                writer.writerow([smiles, *cells])
    print(f"wrote {SHAPES[args.shape][0]:,} {args.shape.upper()}-shaped molecules to {out}")


if __name__ == "__main__":
    main()
