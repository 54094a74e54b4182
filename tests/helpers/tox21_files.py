"""Small MoleculeNet-style CSV files cut from the shipped Tox21, for the command tests."""
import csv
from typing import Dict, Optional

from rpfast.datasets import load_tox21


def write_tox21_subset(path, count: int, tasks: Dict[str, int], smiles_header: str = "smiles",
                       ids: bool = False, replace: Optional[Dict[int, str]] = None):
    """Write Tox21's first ``count`` molecules to ``path`` with label columns ``tasks`` (written
    name -> Tox21 task index; a missing label is an empty cell), an id column first with
    ``ids``, and the SMILES of rows ``replace`` swapped (an invalid one, say). Returns ``path``."""
    data, replace = load_tox21(), replace or {}
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow((["mol_id"] if ids else []) + [smiles_header, *tasks])
        for i in range(count):
            labels = ["" if v != v else int(v) for v in data.labels[i, list(tasks.values())].tolist()]
            writer.writerow(([f"TOX{i}"] if ids else []) + [replace.get(i, data.smiles[i]), *labels])
    return path
