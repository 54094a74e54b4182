"""`rpfast molecules predict`: score the molecules of a file with checkpoints of
``rpfast molecules train`` (one, or several averaged as an ensemble).

The output CSV has one row per molecule row of the input, in order: the row (0-based, header
not counted), the SMILES and one ``<task>_pred`` column per task (a probability for
classification, label units for regression, every digit of the float64). A SMILES RDKit cannot
parse, or a blank line, keeps its row with empty predictions and is reported by row. Each molecule is scored on its
own, so its prediction does not depend on the other rows of the file: the same molecule gets
the same digits in any file. By default it runs on the thread count the first checkpoint was
trained with: torch's float sums split over threads, so another count changes predictions in
the last bits.
"""
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import torch

from rpfast._io import atomic_path
from rpfast._options import option
from rpfast.datasets.molecule_files import read_smiles_file
from rpfast.experiments.molecules.checkpoints import Predictions, load_checkpoint, predict

CHECKPOINT_NAME = "best.pt"


@dataclass
class PredictConfig:
    """The settings of ``rpfast molecules predict``; its options derive from these fields."""

    checkpoint: List[str] = option(help="checkpoint file(s) (best.pt) or directories: every best.pt under a "
                                        "directory (an rpfast molecules train --out) joins the ensemble",
                                   metavar="PATH")
    data: str = option(help="molecules to score: a CSV (its SMILES column) or a .smi file, optionally .gz")
    out: str = option("predictions.csv", "the output CSV")
    smiles_column: Optional[str] = option(None, "SMILES column of a CSV (default: 'smiles', any case)")
    force: bool = option(False, "replace an existing output file")
    threads: Optional[int] = option(None, "torch/kernel threads (default: the count the first checkpoint was trained "
                                          "with, which reproduces its test predictions bit for bit)")


def checkpoint_files(paths: List[str]) -> List[Path]:
    """The checkpoint files ``paths`` name: a file as it is, a directory as every
    :data:`CHECKPOINT_NAME` below it (sorted); a missing path or a directory without one is a
    ``FileNotFoundError``."""
    files: List[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.rglob(CHECKPOINT_NAME))
            if not found:
                raise FileNotFoundError(f"no {CHECKPOINT_NAME} checkpoint under directory {path}")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"checkpoint {path} does not exist")
    return list(dict.fromkeys(files))


def write_predictions_csv(path: Path, smiles: List[str], predictions: Predictions) -> None:
    """The output CSV (atomically: complete or absent)."""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["row", "smiles"] + [f"{task}_pred" for task in predictions.tasks])
        invalid = set(predictions.invalid)
        for row, (molecule, values) in enumerate(zip(smiles, predictions.values)):
            cells = [""] * len(values) if row in invalid else [repr(float(v)) for v in values]
            writer.writerow([row, molecule] + cells)


def _rows_shown(rows: List[int]) -> str:
    """``"rows 1, 4, ..."`` (the first ten)."""
    return "rows " + ", ".join(map(str, rows[:10])) + (" ..." if len(rows) > 10 else "")


def main(config: PredictConfig, progress: bool = True) -> Predictions:
    """Check the paths, score ``config.data`` and write ``config.out``; prints one summary line
    (and the rows RDKit could not parse, on stderr)."""
    out = Path(config.out)
    if out.is_dir():
        raise IsADirectoryError(f"output {out} is a directory; name a CSV file")
    if out.exists() and not config.force:
        raise FileExistsError(f"output {out} exists; use --force to replace it")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"the directory of output {out} does not exist")
    if config.threads is not None and (isinstance(config.threads, bool) or not isinstance(config.threads, int)
                                       or config.threads < 1):
        raise ValueError(f"threads must be a positive integer, got {config.threads!r}")
    files = checkpoint_files(config.checkpoint)
    smiles = read_smiles_file(config.data, config.smiles_column, keep_blank=True)  # one output row per line
    models = [load_checkpoint(path) for path in files]
    threads = config.threads or models[0].info.get("threads")
    if threads:
        torch.set_num_threads(threads)  # float sums split over threads differ in the last bits
    predictions = predict(models, smiles, progress=progress)
    write_predictions_csv(out, smiles, predictions)
    blank = [row for row in predictions.invalid if not smiles[row]]
    unparsed = [row for row in predictions.invalid if smiles[row]]
    if blank:
        print(f"{len(blank)} row(s) without a SMILES (a blank line or an empty cell), left with empty predictions: "
              f"{_rows_shown(blank)} (counting molecule rows from 0)", file=sys.stderr)
    if unparsed:
        print(f"{len(unparsed)} SMILES RDKit could not parse, left with empty predictions: "
              f"{_rows_shown(unparsed)} (counting molecule rows from 0)", file=sys.stderr)
    ensemble = f"the mean of {len(files)} checkpoints" if len(files) > 1 else "1 checkpoint"
    print(f"predicted {len(smiles) - len(predictions.invalid)} of {len(smiles)} molecules, {len(predictions.tasks)} "
          f"{predictions.task_type} task(s), with {ensemble}; wrote {out}")
    return predictions
