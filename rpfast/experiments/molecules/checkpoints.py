"""Trained molecule models on disk, and predictions for new molecules from them.

``rpfast molecules train`` saves each model's best epoch as a checkpoint (:func:`save_checkpoint`):
the weights, the :class:`~rpfast.experiments.molecules.models.Architecture` that rebuilds the model,
the task names and type, the target standardisation, the featuriser's settings, the seed of the
eval-mode relabelings and the run's configuration. :func:`load_checkpoint` reads one back (it
refuses a checkpoint of another featuriser) and :func:`predict` scores SMILES with one or an
ensemble of checkpoints (their predictions averaged).

Predictions are reproducible and a molecule's prediction depends on nothing but the molecule:
every molecule is scored in a forward pass of its own, with the model's relabelings re-seeded
from the checkpoint before it (:func:`~rpfast.experiments.molecules.models.molecule_outputs`), as
the test set was during training. So the same molecule gets the same prediction bit for bit in
any file, at any row, beside any other molecules, and predicting a run's
``test_predictions.csv`` from its checkpoint gives the written predictions bit for bit, on the
same number of threads (torch splits float sums over threads; ``info["threads"]`` records the
training run's and ``rpfast molecules predict`` uses it by default) and the same machine kind.
"""
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Sequence, Union

import numpy as np
import torch
from torch import nn

from rpfast._io import atomic_path
from rpfast.datasets.molecules import FEATURIZER_VERSION, MoleculeGraphs, featurize_smiles, featurizer_settings
from rpfast.experiments.molecules.models import Architecture, build_model, molecule_outputs
from rpfast.experiments.molecules.tasks import Targets

__all__ = ["MoleculeModel", "Predictions", "checkpoint_record", "load_checkpoint", "save_checkpoint", "write_checkpoint",
           "predict", "PREDICT_BATCH"]

CHECKPOINT_FORMAT = "rpfast-molecules-checkpoint/1"
#: Molecules per forward pass of the validation metric during training (predictions score each
#: molecule alone). RP models run their 20 eval relabelings as replicas of the batch in one call,
#: so a batch is 20 times as many graphs: measured here on 1,000 molecules, RP-Duvenaud took
#: 1.02 / 1.05 / 1.40 / 2.19 s in batches of 32 / 64 / 128 / 256, and 2.30 s against 0.71 s
#: for 512 against 64 in one run (the larger replica inputs fall out of the cache), with 0.8 GB
#: more peak memory at 512; Duvenaud took 0.05 to 0.07 s at every size.
PREDICT_BATCH = 64


@dataclass
class MoleculeModel:
    """A trained molecule model: ``model`` (eval mode), the ``generator`` of its relabelings,
    re-seeded to ``eval_seed`` before each prediction, what it predicts (``tasks``, ``targets``:
    task type and standardisation) and ``info`` (the run's configuration, split, epoch, scores,
    featuriser settings)."""

    model: nn.Module
    generator: torch.Generator
    architecture: Architecture
    targets: Targets
    tasks: List[str]
    eval_seed: int
    info: dict = field(default_factory=dict)

    @property
    def task_type(self) -> str:
        return self.targets.task_type

    def predict_graphs(self, graphs: MoleculeGraphs, molecules: torch.Tensor, progress: bool = False) -> np.ndarray:
        """Predictions ``[len(molecules), tasks]`` (float64: probabilities, or label units for
        regression) of ``molecules`` (positions in ``graphs``), each molecule scored on its own
        (see the module docstring)."""
        outputs = molecule_outputs(self.model, graphs, molecules, self.generator, self.eval_seed, progress)
        if not len(molecules):
            return np.zeros((0, len(self.tasks)))
        # row by row: a sigmoid over a longer tensor takes torch's vectorised path for more of it,
        # which differs from the scalar one in the last bits
        return np.concatenate([self.targets.predictions(row) for row in outputs.split(1)])


def checkpoint_record(trained: MoleculeModel) -> dict:
    """What a checkpoint file holds (plain values and tensors: it pickles across processes and
    loads with ``torch.load(weights_only=True)``); a ValueError for weights that are not finite."""
    state = {k: v.detach().clone() for k, v in trained.model.state_dict().items()}
    broken = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if broken:
        raise ValueError(f"refusing to save a checkpoint whose weights are not finite ({', '.join(broken[:3])}): "
                         "the model diverged")
    return {"format": CHECKPOINT_FORMAT, "architecture": trained.architecture.state(),
            "targets": trained.targets.state(), "tasks": list(trained.tasks), "eval_seed": int(trained.eval_seed),
            "featurizer": featurizer_settings(), "info": trained.info, "state_dict": state}


def write_checkpoint(path, record: dict) -> None:
    """Write a :func:`checkpoint_record` to ``path`` atomically (a complete file or none)."""
    with atomic_path(path) as tmp:
        torch.save(record, tmp)


def save_checkpoint(path, trained: MoleculeModel) -> None:
    """Write ``trained`` to ``path`` (atomically: a complete file or none)."""
    write_checkpoint(path, checkpoint_record(trained))


def load_checkpoint(path) -> MoleculeModel:
    """The :class:`MoleculeModel` saved at ``path`` by ``rpfast molecules train``.

    Refused with a clear error: a missing file (``FileNotFoundError``), a file that is not such
    a checkpoint, or one whose features another featuriser version computed (``ValueError``). A
    checkpoint featurised under another RDKit release loads with a ``RuntimeWarning`` (its
    aromaticity and valence perception may differ)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"checkpoint {path} is a directory; name a best.pt file in it")
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        record = torch.load(path, weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same one-line message
        raise ValueError(f"{path}: not an rpfast molecules checkpoint ({type(error).__name__})") from None
    if not isinstance(record, dict) or record.get("format") != CHECKPOINT_FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"{path}: not an rpfast molecules checkpoint (format {found!r}, expected "
                         f"{CHECKPOINT_FORMAT!r})")
    missing = [key for key in ("architecture", "targets", "tasks", "eval_seed", "featurizer", "state_dict")
               if key not in record]
    if missing:
        raise ValueError(f"{path}: an incomplete rpfast molecules checkpoint (no {', '.join(missing)})")
    features = record["featurizer"]
    if features.get("version") != FEATURIZER_VERSION:
        raise ValueError(f"{path}: the model was trained on features {features.get('version')!r}, but this rpfast "
                         f"computes {FEATURIZER_VERSION!r}: retrain it with this version")
    now = featurizer_settings()
    if features.get("rdkit") != now["rdkit"]:
        warnings.warn(f"{path}: trained with RDKit {features.get('rdkit')}, now {now['rdkit']}: predictions may "
                      "differ slightly where the releases perceive molecules differently", RuntimeWarning,
                      stacklevel=2)
    try:
        arch = Architecture(**record["architecture"])
        generator = torch.Generator()
        model = build_model(arch, generator)
        model.load_state_dict(record["state_dict"])
    except (TypeError, KeyError, RuntimeError) as error:  # edited or damaged: one line, not a traceback
        first = (str(error).splitlines() or [""])[0][:200]
        raise ValueError(f"{path}: the checkpoint's model cannot be rebuilt ({type(error).__name__}: {first})") from None
    model.eval()
    return MoleculeModel(model, generator, arch, Targets.from_state(record["targets"]), list(record["tasks"]),
                         int(record["eval_seed"]), record.get("info", {}))


@dataclass(frozen=True)
class Predictions:
    """Per-molecule predictions: ``values[i, t]`` (float64) for input ``i`` and task ``tasks[t]``,
    a probability (classification) or in label units (regression); NaN for the inputs RDKit
    cannot parse, listed in ``invalid`` (positions in the input)."""

    tasks: List[str]
    task_type: str
    values: np.ndarray
    invalid: List[int]


def predict(checkpoints: Union[str, Path, MoleculeModel, Sequence], smiles: Sequence[str],
            progress: bool = False) -> Predictions:
    """Score SMILES strings with one checkpoint or the average of several (an ensemble: each a
    path or a :class:`MoleculeModel`; they must predict the same tasks of the same type).
    Featurisation is :func:`rpfast.datasets.molecules.featurize_smiles`; unparsable SMILES keep their
    row with NaN predictions. Each molecule is scored on its own, so its prediction does not
    depend on the other entries of ``smiles`` (see the module docstring)."""
    if isinstance(checkpoints, (str, Path, MoleculeModel)):
        checkpoints = [checkpoints]
    if not isinstance(checkpoints, (list, tuple)):
        raise TypeError(f"checkpoints must be a path, a MoleculeModel or a list of them, got "
                        f"{type(checkpoints).__name__}")
    models = [c if isinstance(c, MoleculeModel) else load_checkpoint(c) for c in checkpoints]
    if not models:
        raise ValueError("predict needs at least one checkpoint")
    first = models[0]
    for other in models[1:]:
        if (other.tasks, other.task_type) != (first.tasks, first.task_type):
            raise ValueError(f"the checkpoints of an ensemble must predict the same tasks: {first.task_type} "
                             f"{first.tasks} and {other.task_type} {other.tasks}")
    if isinstance(smiles, str):
        raise TypeError("smiles must be a sequence of SMILES strings, not one string; use [smiles]")
    smiles = list(smiles)
    graphs = featurize_smiles(smiles, progress=progress)
    scored = torch.arange(len(graphs))
    total = sum(m.predict_graphs(graphs, scored, progress) for m in models)
    values = np.full((len(smiles), len(first.tasks)), np.nan)
    values[graphs.rows.numpy()] = total / len(models)
    return Predictions(list(first.tasks), first.task_type, values, list(graphs.invalid))
