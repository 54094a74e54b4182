"""`rpfast molecules`: RP on MoleculeNet classification (Murphy et al. 2019, Table 2 and the
k-ary figure).

Protocol: molecules featurised with RDKit (75 DeepChem ConvMol atom features, 10 bond
features), random 80/10/10 splits (or scaffold splits), a class-weighted multi-task loss over
the labelled entries, Adam, model selection on the mean validation ROC-AUC over tasks, test
ROC-AUC of the selected epoch; mean and sd over splits; seconds per training epoch.
"""
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn
from tqdm.auto import tqdm

from rpfast._options import option
from rpfast.data.molecules import ATOM_FEATURES, BOND_FEATURES, ELEMENTS, MoleculeGraphs
from rpfast.data.moleculenet import (MoleculeDataset, featurize_dataset, load_tox21, random_split,
                                     read_moleculenet_csv, scaffold_split)
from rpfast.experiments import distributed
from rpfast.experiments.molecules_report import format_table, write_outputs
from rpfast.experiments.training import Batches, Epoch, fit
from rpfast.nn import AdjCNN, Duvenaud, Oriented, PiSGD, RelationalPooling, RPDuvenaud, SubgraphRP, VecRNN

MODELS = ("duvenaud", "rp-duvenaud", "kary", "cnn-dfs", "rnn-dfs")
SWEEP_K = (10, 20, 30, 40, 50)


@dataclass
class MoleculesConfig:
    """The protocol's settings; ``rpfast molecules`` derives its options from these fields."""

    data: str = option("tox21", "'tox21' (shipped) or a MoleculeNet-style CSV / CSV.GZ")
    models: str = option(",".join(MODELS), "comma-separated models: " + ", ".join(MODELS), flag="--model",
                         aliases=("--models",))
    k: int = option(20, "vertices per DFS subgraph (kary, cnn-dfs, rnn-dfs)")
    splits: int = option(1, "random splits (mean and sd over them)")
    split: str = option("random", "'random' (80/10/10, the paper's) or 'scaffold'")
    epochs: int = option(10, "training epochs per model and split")
    batch_size: int = option(128, "molecules per step")
    lr: float = option(1e-3, "Adam learning rate")
    eval_samples: int = option(20, "relabelings / subgraphs averaged at evaluation")
    sweep_k: bool = option(False, "also train kary for k = 10..50 and plot AUC and speed-up against k",
                           flag="--sweep-k")
    smiles_column: str = option("smiles", "SMILES column of a CSV")
    tasks: Optional[str] = option(None, "comma-separated label columns (default: every numeric column)")
    seed: int = option(0, "seed of the splits, initialisations and relabelings")
    out_dir: str = option("molecules_results", "output directory (written whole under a temporary name beside it, "
                                               "renamed when complete)", flag="--out")
    force: bool = option(False, "replace an existing non-empty --out directory")
    threads: Optional[int] = option(None, "kernel/torch threads in all, shared by --nproc processes (default: torch's)")
    nproc: int = option(1, "processes that train each model together (DistributedDataParallel, gloo on CPU); "
                           "torchrun sets this itself")
    sync_bn: bool = option(False, "with several processes, synchronise BatchNorm statistics (SyncBatchNorm)")

    def model_list(self) -> List[str]:
        names = [m.strip() for m in self.models.split(",") if m.strip()]
        for name in names:
            if name not in MODELS:
                raise ValueError(f"unknown model {name!r}: choose from {', '.join(MODELS)}")
        if not names:
            raise ValueError("--model names no model")
        return list(dict.fromkeys(names))

    def validate(self) -> None:
        for name in ("k", "splits", "epochs", "batch_size", "eval_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.split not in ("random", "scaffold"):
            raise ValueError(f"split must be 'random' or 'scaffold', got {self.split!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be positive and finite, got {self.lr!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not isinstance(self.nproc, int) or isinstance(self.nproc, bool) or self.nproc < 1:
            raise ValueError(f"nproc must be >= 1, got {self.nproc!r}")
        self.model_list()


def load_dataset(config: MoleculesConfig) -> MoleculeDataset:
    """The molecules and binary labels ``config.data`` names (Tox21 or a CSV), ``--tasks`` applied."""
    tasks = None if config.tasks is None else [t.strip() for t in config.tasks.split(",") if t.strip()]
    if config.data == "tox21":
        dataset = load_tox21()
        if tasks is not None:
            unknown = [t for t in tasks if t not in dataset.tasks]
            if unknown:
                raise ValueError(f"Tox21 has no task {unknown[0]!r}; its tasks are {', '.join(dataset.tasks)}")
            columns = [dataset.tasks.index(t) for t in tasks]
            dataset = MoleculeDataset(dataset.smiles, dataset.labels[:, columns].contiguous(), tasks)
    else:
        dataset = read_moleculenet_csv(config.data, smiles_column=config.smiles_column, tasks=tasks)
    if not dataset.tasks:
        raise ValueError(f"{config.data}: no label column found; name them with --tasks")
    labels = dataset.labels
    bad = ~labels.isnan() & (labels != 0) & (labels != 1)
    if bad.any():
        row, task = (int(v) for v in torch.nonzero(bad)[0])
        raise ValueError(f"{config.data}: task {dataset.tasks[task]!r} has label {float(labels[row, task]):g} "
                         f"(data row {row}): rpfast molecules does binary classification, labels must be 0 or 1")
    if len(dataset) < 10:
        raise ValueError(f"{config.data}: {len(dataset)} molecules are too few for train/valid/test splits")
    check_usable_tasks(labels, dataset.tasks, config.data)
    return dataset


def two_classes(labels: torch.Tensor) -> torch.Tensor:
    """Per task (column): whether its labelled entries hold both 0 and 1, so ROC-AUC is defined."""
    return (labels == 0).any(dim=0) & (labels == 1).any(dim=0)


def check_usable_tasks(labels: torch.Tensor, tasks: Sequence[str], where: str) -> None:
    """ValueError unless some task has both classes among ``labels`` (NaN = missing): without
    one, no ROC-AUC (validation or test) is defined and nothing can be trained or scored."""
    if two_classes(labels).any():
        return
    described = []
    for t, task in enumerate(tasks[:3]):
        known = labels[:, t][~labels[:, t].isnan()]
        described.append(f"{task!r}: no label" if not len(known) else f"{task!r}: only {int(known[0])}")
    more = f", ... ({len(tasks)} tasks)" if len(tasks) > 3 else ""
    raise ValueError(f"{where}: no usable label: no task has both classes 0 and 1 ({'; '.join(described)}{more}), "
                     "so ROC-AUC is undefined; name label columns with both classes with --tasks")


def build_model(name: str, k: int, num_tasks: int, id_dim: int, eval_samples: int,
                generator: torch.Generator) -> nn.Module:
    """One of :data:`MODELS` (paper widths: convolutions of 64, dense 128)."""
    if name == "duvenaud":
        return Duvenaud(ATOM_FEATURES, num_tasks)
    if name == "rp-duvenaud":
        return RPDuvenaud(ATOM_FEATURES, num_tasks, id_dim=id_dim,
                          strategy=PiSGD(train_samples=1, eval_samples=eval_samples), generator=generator)
    # k-ary models: the first k vertices of a DFS from a random start, one order per molecule in
    # training, eval_samples averaged in eval mode
    strategy = Oriented("dfs", k, train_samples=1, eval_samples=eval_samples)
    if name == "kary":
        return SubgraphRP(Duvenaud(ATOM_FEATURES, num_tasks), strategy, generator=generator)
    encoder = (AdjCNN(k, 1 + BOND_FEATURES, ATOM_FEATURES, 64, num_tasks) if name == "cnn-dfs"
               else VecRNN(k, 1 + BOND_FEATURES, ATOM_FEATURES, 64, num_tasks, cell="lstm"))
    return RelationalPooling(encoder, strategy, generator=generator)


def max_same_element(graphs: MoleculeGraphs, molecules: torch.Tensor) -> int:
    """The most atoms of one element in one molecule among ``molecules``: the ID width that makes
    every atom of an element unique (RP-Duvenaud)."""
    batch = graphs.batch(molecules)
    if batch.total_nodes == 0:
        return 1
    counts = torch.bincount(batch.batch * len(ELEMENTS) + batch.element)
    return max(1, int(counts.max()))


def class_weights(labels: torch.Tensor) -> torch.Tensor:
    """Per task ``n_negative / n_positive`` over the labelled entries (1 where undefined)."""
    known = ~labels.isnan()
    positive = ((labels == 1) & known).sum(dim=0).float()
    negative = ((labels == 0) & known).sum(dim=0).float()
    return torch.where(positive > 0, negative / positive.clamp(min=1), torch.ones_like(positive))


def masked_loss(logits: torch.Tensor, labels: torch.Tensor, pos_weight: torch.Tensor) -> torch.Tensor:
    """Class-weighted binary cross-entropy averaged over the labelled entries (NaN = missing)."""
    known = ~labels.isnan()
    losses = nn.functional.binary_cross_entropy_with_logits(logits, labels.nan_to_num(0), pos_weight=pos_weight,
                                                            reduction="none")
    return (losses * known).sum() / known.sum().clamp(min=1)


def task_aucs(scores: np.ndarray, labels: np.ndarray) -> List[Optional[float]]:
    """ROC-AUC per task over the labelled molecules; None where a task has one class only."""
    out = []
    for t in range(labels.shape[1]):
        known = ~np.isnan(labels[:, t])
        y = labels[known, t]
        out.append(float(roc_auc_score(y, scores[known, t])) if len(np.unique(y)) == 2 else None)
    return out


@torch.no_grad()
def predict(model: nn.Module, graphs: MoleculeGraphs, molecules: torch.Tensor, batch_size: int) -> np.ndarray:
    model.eval()
    outs = [model(graphs.batch(molecules[i:i + batch_size])) for i in range(0, len(molecules), batch_size)]
    return torch.sigmoid(torch.cat(outs)).numpy() if outs else np.zeros((0, 0))


def _mean_defined(values: Sequence[Optional[float]]) -> Optional[float]:
    """The mean of the values that are defined (an AUC per task, per split); None (null in
    results.json) if none is."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def train_model(name: str, k: int, config: MoleculesConfig, graphs: MoleculeGraphs, labels: torch.Tensor,
                split, split_seed: int, bar) -> Dict:
    """Train one model on one split; returns test AUCs of the best-validation epoch and timings."""
    train, valid, test = split
    context = distributed.current()
    torch.manual_seed(split_seed)  # the same initialisation on every process
    # relabelings and subgraphs: each process draws from its own stream (rank 0's is the one-process one)
    generator = torch.Generator().manual_seed(distributed.rank_seed(split_seed, context.rank))
    model = build_model(name, k, labels.shape[1], max_same_element(graphs, train), config.eval_samples, generator)
    pos_weight = class_weights(labels[train])
    batches = Batches(train, lambda chunk: (graphs.batch(chunk), labels[chunk]), size=config.batch_size,
                      generator=generator, seed=split_seed, min_size=2,  # BatchNorm needs two rows
                      shuffle_full_batch=True)

    def loss(module: nn.Module, batch) -> torch.Tensor:
        graph, targets = batch
        return masked_loss(module(graph), targets, pos_weight)

    def valid_auc(module: nn.Module) -> Optional[float]:
        # None (no task with both classes in the validation set): no selection, the last epoch is tested
        return _mean_defined(task_aucs(predict(module, graphs, valid, 512), labels[valid].numpy()))

    def show(epoch: Epoch) -> None:
        bar.set_postfix(model=name, k=k, epoch=epoch.index, loss=f"{epoch.loss:.3f}",
                        valid="n/a" if epoch.metric is None else f"{epoch.metric:.3f}")
        bar.update()

    fitted = fit(model, batches, loss, epochs=config.epochs,
                 optimizer=lambda parameters: torch.optim.Adam(parameters, lr=config.lr), metric=valid_auc,
                 context=context, sync_bn=config.sync_bn,
                 find_unused_parameters=True,  # a shard may miss an element's or a degree's weights
                 on_epoch=show)
    test_aucs = task_aucs(predict(fitted.model, graphs, test, 512), labels[test].numpy())
    return {"model": name, "k": k if name in ("kary", "cnn-dfs", "rnn-dfs") else None,
            "valid_auc": fitted.best_metric, "best_epoch": fitted.best_epoch, "test_auc": _mean_defined(test_aucs),
            "task_aucs": test_aucs, "seconds_per_epoch": float(np.mean(fitted.seconds))}


def run_molecules(config: MoleculesConfig, progress: bool = True) -> Dict:
    """Featurise (cached), split, train every model on every split; returns runs and summary."""
    config.validate()
    if config.threads and not distributed.current().distributed:
        torch.set_num_threads(config.threads)
    progress = progress and distributed.current().main
    dataset = load_dataset(config)
    graphs = featurize_dataset(dataset, progress=progress)
    if graphs.invalid and distributed.current().main:
        shown = ", ".join(str(r) for r in graphs.invalid[:5]) + (" ..." if len(graphs.invalid) > 5 else "")
        print(f"skipped {len(graphs.invalid)} of {len(dataset)} SMILES that RDKit could not parse "
              f"(data rows {shown}, counting from 0)")
    if len(graphs) < 10:
        raise ValueError(f"only {len(graphs)} molecules parse: too few for train/valid/test splits")
    labels = dataset.labels[graphs.rows]
    check_usable_tasks(labels, dataset.tasks, f"{config.data} (the {len(graphs)} molecules that parse)")
    splits = [random_split(len(graphs), config.seed + s) if config.split == "random" else scaffold_split(graphs.smiles)
              for s in range(config.splits)]
    unscored = [s for s, (_, _, test) in enumerate(splits) if not two_classes(labels[test]).any()]
    if len(unscored) == len(splits):
        raise ValueError(f"{config.data}: no task has both classes 0 and 1 in the test set of "
                         f"{'the' if len(splits) == 1 else 'any'} {config.split} split "
                         f"({len(splits[0][2])} test molecules), so test ROC-AUC is undefined; "
                         "use more molecules" + (" or another --seed" if config.split == "random" else ""))
    jobs = [(name, config.k) for name in config.model_list()]
    if config.sweep_k:
        jobs += [("kary", k) for k in SWEEP_K if ("kary", k) not in jobs]
        if ("duvenaud", config.k) not in jobs:
            jobs.insert(0, ("duvenaud", config.k))
    bar = tqdm(total=len(jobs) * config.splits * config.epochs, desc="molecules", unit="epoch", disable=not progress)
    runs, skipped = [], set()
    start = time.perf_counter()
    for s, split in enumerate(splits):
        split_seed = config.seed + s
        for name, k in jobs:
            run = train_model(name, k, config, graphs, labels, split, split_seed, bar)
            run["split"] = s
            skipped.update(t for t, a in zip(dataset.tasks, run["task_aucs"]) if a is None)
            runs.append(run)
    bar.close()
    return {"config": asdict(config), "tasks": list(dataset.tasks), "molecules": len(graphs),
            "invalid_rows": graphs.invalid, "runs": runs, "skipped_tasks": sorted(skipped),
            "unscored_splits": unscored, "summary": summarise(runs), "seconds": time.perf_counter() - start}


def summarise(runs: List[Dict]) -> List[Dict]:
    """Per (model, k): mean and sd of the test ROC-AUC over the splits where it is defined (None
    where it is defined in none), validation AUC, seconds/epoch, and the splits counted."""
    rows = []
    for key in dict.fromkeys((r["model"], r["k"]) for r in runs):
        group = [r for r in runs if (r["model"], r["k"]) == key]
        tests = [r["test_auc"] for r in group if r["test_auc"] is not None]
        sd = (float(np.std(tests, ddof=1)) if len(tests) > 1 else 0.0) if tests else None
        rows.append({"model": key[0] + ("" if key[1] is None else f" (k={key[1]})"), "name": key[0], "k": key[1],
                     "test_auc": _mean_defined(tests), "test_sd": sd,
                     "valid_auc": _mean_defined([r["valid_auc"] for r in group]),
                     "seconds_per_epoch": float(np.mean([r["seconds_per_epoch"] for r in group])),
                     "splits": len(tests)})
    return rows


def main(config: MoleculesConfig, progress: bool = True) -> Dict:
    """Run the experiment, print the Table-2-style summary, write CSV, JSON and figures. The
    options and the output directory are checked before any work; the directory is written whole
    and renamed into place when complete."""
    config.validate()
    results, writes = distributed.run_experiment(run_molecules, config, progress)
    if not writes:
        return results
    name = "Tox21" if config.data == "tox21" else Path(config.data).name
    print(format_table(results, f"{name}: test ROC-AUC (mean over tasks), {config.splits} {config.split} split(s)"))
    if results["skipped_tasks"]:
        print("tasks left out of a mean (one class only in a split's test set; AUC null in results.json): "
              + ", ".join(results["skipped_tasks"]))
    if results["unscored_splits"]:
        print("splits without a test ROC-AUC (no task with both classes in the test set; null in results.json, "
              "not counted in 'splits'): " + ", ".join(map(str, results["unscored_splits"])))
    paths = write_outputs(results, Path(config.out_dir), force=config.force)
    print(f"finished in {results['seconds']:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return results
