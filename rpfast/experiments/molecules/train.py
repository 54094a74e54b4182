"""`rpfast molecules train`: RP on MoleculeNet data (Murphy et al. 2019, Table 2 and the k-ary
figure), as a workflow whose models can be reused.

Protocol: molecules featurised with RDKit (75 DeepChem ConvMol atom features, 10 bond
features); random 80/10/10 splits (or scaffold splits, or the rows of a splits file);
classification (class-weighted binary cross-entropy) or regression (MSE on standardised
targets) over the labelled entries of every task (:mod:`rpfast.experiments.molecules.tasks`);
Adam; the epoch with the best validation metric (``--metric``) is kept; its test metrics, mean
and sd over splits, and seconds per training epoch are reported. Each model and split leaves a
checkpoint that ``rpfast molecules predict`` scores new molecules with, and its test predictions.
"""
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from rpfast._memory import release_free_memory
from rpfast._options import option
from rpfast.experiments.devices import cuda_graphs_option, device_option, resolve_device, uses_cuda_graphs
from rpfast.datasets.moleculenet import MoleculeDataset, load_tox21, read_moleculenet_csv
from rpfast.datasets.molecules import MoleculeGraphs
from rpfast.experiments import distributed
from rpfast.experiments.shape import Experiment
from rpfast.experiments.molecules.featurise import featurize_for_group
from rpfast.experiments.molecules.checkpoints import PREDICT_BATCH, MoleculeModel, checkpoint_record
from rpfast.experiments.molecules.models import (MODELS, SUBGRAPH_MODELS, Architecture, averaging, build_model,
                                               max_same_element, model_outputs)
from rpfast.experiments.molecules.splits import SPLITS, make_splits, read_splits_file, splits_record
from rpfast.experiments.molecules.tasks import (DEFAULT_METRIC, METRICS, TASK_TYPES, Targets, check_metric, infer_task_type,
                                               mean_defined, mean_sd, metrics_of, task_scores,
                                               usable_tasks)
from rpfast.experiments.molecules.report import format_table, write_outputs
from rpfast.experiments.report import wall_seconds
from rpfast.experiments.training import (Batches, Epoch, TrainingDiverged, check_learning_rate, diverged_warning,
                                         fit)
from rpfast.experiments.workers import run_in_workers

SWEEP_K = (10, 20, 30, 40, 50)
#: Epochs per run when ``--epochs`` is not given. Measured here (random split, RP-Duvenaud):
#: regression at 10 epochs stays far above MoleculeNet's graph-convolution RMSE (Lipophilicity
#: 0.77, 500 ESOL molecules 1.44), at 60 it is below (0.65 against 0.655; 0.85 against 0.97).
DEFAULT_EPOCHS = {"classification": 10, "regression": 60}


@dataclass
class MoleculesConfig:
    """The protocol's settings; ``rpfast molecules train`` derives its options from these fields."""

    data: str = option("tox21", "'tox21' (shipped) or a MoleculeNet-style CSV / CSV.GZ")
    models: str = option(",".join(MODELS), "comma-separated models: " + ", ".join(MODELS), flag="--model",
                         aliases=("--models",))
    k: int = option(20, "vertices per DFS subgraph (kary, cnn-dfs, rnn-dfs)")
    task_type: str = option("auto", "'classification', 'regression' or 'auto' (classification when every label "
                                    "is 0 or 1)", choices=("auto",) + TASK_TYPES)
    metric: Optional[str] = option(None, "the validation metric that selects the epoch: roc-auc, prc-auc, accuracy "
                                         "(classification; default roc-auc) or rmse, mae, r2 (regression; "
                                         "default rmse)", choices=tuple(METRICS))
    splits: int = option(1, "splits (mean and sd over them)")
    split: str = option("random", "'random' (80/10/10, the paper's), 'scaffold' (DeepChem's rule: largest "
                                  "scaffolds to train) or 'scaffold-balanced' (chemprop's: big scaffolds to "
                                  "train, the rest shuffled by seed)", choices=SPLITS)
    splits_file: Optional[str] = option(None, "reuse the data rows of a splits.json (this command's or "
                                              "chemprop's) instead of --split / --splits")
    epochs: Optional[int] = option(None, "training epochs per model and split (default: 10 for classification, "
                                         "the quick Tox21 run; 60 for regression, which needs more steps on small "
                                         "data sets)")
    patience: Optional[int] = option(None, "early stopping: stop a model after this many epochs in a row without a "
                                           "better validation metric (default: train every epoch); the best epoch "
                                           "is kept either way")
    batch_size: int = option(128, "molecules per step")
    lr: float = option(1e-3, "Adam learning rate")
    eval_samples: int = option(20, "relabelings / subgraphs averaged at evaluation")
    valid_samples: Optional[int] = option(None, "relabelings / subgraphs averaged by the validation metric after "
                                                "each epoch (default: --eval-samples; fewer make every epoch of the "
                                                "RP models cheaper, the test keeps --eval-samples)")
    sweep_k: bool = option(False, "also train kary for k = 10..50 and plot the metric and speed-up against k",
                           flag="--sweep-k")
    sweep_splits: Optional[int] = option(None, "the k sweep's models run on the first this many splits (default: "
                                               "every split)")
    smiles_column: str = option("smiles", "SMILES column of a CSV")
    tasks: Optional[str] = option(None, "comma-separated label columns (default: every numeric column)")
    seed: int = option(0, "seed of the splits, initialisations and relabelings")
    out_dir: str = option("molecules_results", "output directory (written whole under a temporary name beside it, "
                                               "renamed when complete)", flag="--out")
    force: bool = option(False, "replace an existing non-empty --out directory")
    threads: Optional[int] = option(None, "kernel/torch threads in all, shared by --jobs or --nproc processes "
                                          "(default: the cores other processes leave free)")
    jobs: Optional[int] = option(None, "runs (a model on a split) trained at once in worker processes, each with "
                                       "its share of --threads and its own copy of the featurised molecules "
                                       "(about 650 bytes a molecule); 0: one per thread (what --paper sets); "
                                       "default 1: every run in this process")
    nproc: int = option(1, "processes that train each model together (DistributedDataParallel, gloo on CPU); "
                           "torchrun sets this itself")
    sync_bn: bool = option(False, "with several processes, synchronise BatchNorm statistics (SyncBatchNorm)")
    device: str = device_option()
    cuda_graphs: bool = cuda_graphs_option(False)

    def model_list(self) -> List[str]:
        names = [m.strip() for m in self.models.split(",") if m.strip()]
        for name in names:
            if name not in MODELS:
                raise ValueError(f"unknown model {name!r}: choose from {', '.join(MODELS)}")
        if not names:
            raise ValueError("--model names no model")
        return list(dict.fromkeys(names))

    def validate(self) -> None:
        for name in ("k", "splits", "epochs", "patience", "batch_size", "eval_samples", "valid_samples",
                     "sweep_splits"):
            value = getattr(self, name)
            if value is None and name in ("epochs", "patience", "valid_samples", "sweep_splits"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.task_type not in ("auto",) + TASK_TYPES:
            raise ValueError(f"task_type must be 'auto', 'classification' or 'regression', got {self.task_type!r}")
        if self.metric is not None and self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}: choose from {', '.join(METRICS)}")
        if self.metric is not None and self.task_type != "auto":
            check_metric(self.metric, self.task_type)
        check_learning_rate(self.lr)
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not isinstance(self.nproc, int) or isinstance(self.nproc, bool) or self.nproc < 1:
            raise ValueError(f"nproc must be >= 1, got {self.nproc!r}")
        if self.jobs is not None and (not isinstance(self.jobs, int) or isinstance(self.jobs, bool) or self.jobs < 0):
            raise ValueError(f"jobs must be >= 0 (0: one per thread), got {self.jobs!r}")
        if self.nproc > 1 and self.jobs not in (None, 1):
            raise ValueError("--nproc shares each run among processes and --jobs trains runs side by side: "
                             "choose one")
        if resolve_device(self.device).type != "cpu" and self.jobs not in (None, 1):
            raise ValueError(f"--device {self.device} trains the runs one after another: --jobs must be 1, "
                             f"got {self.jobs}")
        if resolve_device(self.device).type != "cpu" and self.nproc > 1:
            raise ValueError(f"--device {self.device} trains in one process: --nproc must be 1, got {self.nproc}")
        if self.splits_file is not None and not Path(self.splits_file).is_file():
            raise FileNotFoundError(f"splits file {self.splits_file} does not exist")
        self.model_list()

    def resolved_jobs(self, runs: int) -> int:
        """Worker processes for ``runs`` runs: ``--jobs`` (0: one per thread of ``--threads``), at
        most ``runs``; 1 (this process) under ``--nproc`` or a launcher."""
        if self.nproc > 1 or distributed.under_launcher() or self.jobs is None:
            return 1
        return max(1, min(runs, self.jobs or self.threads or torch.get_num_threads()))


def load_dataset(config: MoleculesConfig, warn=lambda line: None) -> MoleculeDataset:
    """The molecules and labels ``config.data`` names (Tox21 or a CSV), ``--tasks`` applied.
    With ``--task-type auto`` and no ``--tasks``, numeric columns that are not 0/1 beside 0/1
    columns (a row number or a count beside binary labels, as in BBBP's ``num``) are left out,
    with a ``warn(line)``."""
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
    if config.task_type == "auto":
        dataset = _binary_beside_continuous(dataset, config.data, tasks is not None, warn)
    if config.task_type == "classification":
        labels = dataset.labels
        bad = ~labels.isnan() & (labels != 0) & (labels != 1)
        if bad.any():
            row, task = (int(v) for v in torch.nonzero(bad)[0])
            raise ValueError(f"{config.data}: task {dataset.tasks[task]!r} has label {float(labels[row, task]):g} "
                             f"(data row {row}): classification labels must be 0 or 1 (--task-type regression "
                             "for continuous labels)")
    if len(dataset) < 10:
        raise ValueError(f"{config.data}: {len(dataset)} molecules are too few for train/valid/test splits")
    return dataset


def _binary_beside_continuous(dataset: MoleculeDataset, where: str, named: bool, warn) -> MoleculeDataset:
    """``dataset`` without its non-0/1 columns when it also has 0/1 columns (see
    :func:`load_dataset`); a ValueError when the user named such a mix with ``--tasks``."""
    labels = dataset.labels
    binary = (labels.isnan() | (labels == 0) | (labels == 1)).all(dim=0).tolist()
    if all(binary) or not any(binary):
        return dataset
    kept = [t for t, b in zip(dataset.tasks, binary) if b]
    left = [t for t, b in zip(dataset.tasks, binary) if not b]
    if named:
        raise ValueError(f"{where}: --tasks mixes 0/1 columns ({', '.join(kept)}) with continuous ones "
                         f"({', '.join(left)}): choose --task-type classification or regression")
    warn(f"warning: {where}: left out the columns that are not 0/1 beside the 0/1 label columns (an id or a "
         f"count?): {', '.join(left)}; name label columns with --tasks, or use --task-type regression")
    columns = [i for i, b in enumerate(binary) if b]
    return MoleculeDataset(dataset.smiles, labels[:, columns].contiguous(), kept)


def resolve_task(config: MoleculesConfig, labels: torch.Tensor) -> tuple:
    """``(task type, selection metric)``: ``--task-type`` (or inferred from the labels) and
    ``--metric`` (or the type's default), refused when they do not fit together."""
    task_type = infer_task_type(labels) if config.task_type == "auto" else config.task_type
    return task_type, check_metric(config.metric, task_type)


def check_usable_tasks(metric: str, labels: torch.Tensor, tasks: Sequence[str], where: str) -> None:
    """ValueError unless ``metric`` is defined for some task on ``labels`` (NaN = missing):
    without one nothing can be selected or scored."""
    if usable_tasks(metric, labels.numpy()).any():
        return
    described = []
    for t, task in enumerate(tasks[:3]):
        known = labels[:, t][~labels[:, t].isnan()]
        described.append(f"{task!r}: no label" if not len(known) else
                         f"{task!r}: only {known[0].item():g}" if bool((known == known[0]).all()) else
                         f"{task!r}: {len(known)} label(s)")
    more = f", ... ({len(tasks)} tasks)" if len(tasks) > 3 else ""
    other_metric = " or choose another --metric" if metric != DEFAULT_METRIC[METRICS[metric].task_type] else ""
    raise ValueError(f"{where}: no usable label: no task has {METRICS[metric].needs} ({'; '.join(described)}{more}), "
                     f"so {metric} is undefined; name other label columns with --tasks{other_metric}")


def check_splits(splits, labels: torch.Tensor, tasks: Sequence[str], metric: str, where: str, warn) -> None:
    """Before training: every split's test set must have a task ``metric`` is defined on (else a
    ValueError); a task without it in a split's test (or validation) set is reported with
    ``warn(line)`` and left out of that split's mean (validation: the last epoch is kept)."""
    def named(s: int) -> str:
        return f"split {s}" if len(splits) > 1 else "the split"

    usable = [usable_tasks(metric, labels[test].numpy()) for _, _, test in splits]
    for s, ((_, _, test), ok) in enumerate(zip(splits, usable)):
        if not ok.any():
            raise ValueError(f"{where}: no task has {metric} defined in the test set of {named(s)} ({len(test)} test "
                             "molecules: one class only, or too few labels), so nothing can be scored; use more "
                             "molecules, another --split or --seed")
    for s, ((_, valid, _), ok) in enumerate(zip(splits, usable)):
        if not ok.all():
            left = [t for t, fine in zip(tasks, ok) if not fine]
            warn(f"warning: {named(s)}: {len(left)} task(s) have one class only (or too few labels) in the test set "
                 f"and are left out of its mean {metric}: {', '.join(left[:10])}{' ...' if len(left) > 10 else ''}")
        if len(valid) and not usable_tasks(metric, labels[valid].numpy()).any():
            warn(f"warning: {named(s)}: no task has {metric} defined in the validation set: the last epoch is kept")


def _job_name(name: str, k: Optional[int]) -> str:
    return name + ("" if k is None else f" (k={k})")


def train_model(name: str, k: int, config: MoleculesConfig, graphs: MoleculeGraphs, labels: torch.Tensor,
                tasks: Sequence[str], task_type: str, metric: str, epochs: int, split, split_seed: int, bar) -> Dict:
    """Train one model on one split; returns the run record (selected epoch, test metrics of
    every kind, per-epoch history, timings), its checkpoint record and its test predictions."""
    train, valid, test = split
    context = distributed.current()
    torch.manual_seed(split_seed)  # the same initialisation on every process
    # relabelings and subgraphs: each process draws from its own stream (rank 0's is the one-process one)
    generator = torch.Generator().manual_seed(distributed.rank_seed(split_seed, context.rank))
    arch = Architecture(name, labels.shape[1], k if name in SUBGRAPH_MODELS else None,
                        max_same_element(graphs, train), config.eval_samples)
    targets = Targets.fit(task_type, labels[train])
    device = resolve_device(config.device)  # training runs there; scoring and checkpoints on the CPU
    model = build_model(arch, generator).to(device)
    trained = MoleculeModel(model, generator, arch, targets, list(tasks), eval_seed=split_seed)
    batches = Batches(train, lambda chunk: (graphs.batch(chunk).to(device), labels[chunk].to(device)),
                      size=config.batch_size, generator=generator, seed=split_seed,
                      min_size=2,  # BatchNorm needs two rows
                      shuffle_full_batch=True)
    device_targets = targets.to(device)

    def loss(module: nn.Module, batch) -> torch.Tensor:
        graph, batch_labels = batch
        return device_targets.loss(module(graph), batch_labels)

    valid_seconds = []

    def valid_score(module: nn.Module) -> Optional[float]:
        # None (no task with the metric defined in the validation set): the last epoch is kept
        if not len(valid):
            return None
        start = time.perf_counter()
        # no re-seeding here: the generator's stream carries on into the next epoch's relabelings
        with averaging(module, config.valid_samples):
            predictions = targets.predictions(model_outputs(module, graphs, valid, PREDICT_BATCH))
        score = mean_defined(task_scores(metric, predictions, labels[valid].numpy()))
        release_free_memory()  # the pass's replica batches stay in glibc's heap otherwise
        valid_seconds.append(time.perf_counter() - start)
        return score

    def show(epoch: Epoch) -> None:
        bar.set_postfix(model=name, k=k, epoch=epoch.index, loss=f"{epoch.loss:.3f}",
                        valid="n/a" if epoch.metric is None else f"{epoch.metric:.3f}")
        bar.update()

    captured = uses_cuda_graphs(config.cuda_graphs, device, context.distributed)
    lr = torch.tensor(config.lr, device=device) if captured else config.lr  # a replayed step reads it on the device
    try:
        fitted = fit(model, batches, loss, epochs=epochs,
                     optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr, capturable=captured),
                     metric=valid_score, maximize=METRICS[metric].higher_is_better, context=context,
                     patience=config.patience,
                     sync_bn=config.sync_bn, find_unused_parameters=True,  # a shard may miss an element's weights
                     on_epoch=show, cuda_graphs=captured)
    except TrainingDiverged as error:
        raise TrainingDiverged(f"{_job_name(name, arch.k)}, split {split_seed - config.seed}: {error} (--lr, now "
                               f"{config.lr:g})", error.epoch) from None
    bar.update(epochs - len(fitted.losses))  # the epochs a divergence or early stopping skipped
    if fitted.diverged_epoch is not None and context.main:
        tqdm.write(diverged_warning(f"{_job_name(name, arch.k)}, split {split_seed - config.seed}",
                                    fitted.diverged_epoch, fitted.divergence, fitted.best_epoch, epochs),
                   file=sys.stderr)
    trained.model = fitted.model.cpu()
    start = time.perf_counter()
    predictions = trained.predict_graphs(graphs, test)
    test_seconds = time.perf_counter() - start
    test_labels = labels[test].numpy()
    scores = {m: task_scores(m, predictions, test_labels) for m in metrics_of(task_type)}
    trained.info = {"data": config.data, "split_seed": split_seed, "best_epoch": fitted.best_epoch,
                    "metric": metric, "valid_score": fitted.best_metric, "test_score": mean_defined(scores[metric]),
                    "threads": torch.get_num_threads()}  # what reproduces the test predictions bit for bit
    record = {"model": name, "k": arch.k, "metric": metric, "valid_score": fitted.best_metric,
              "best_epoch": fitted.best_epoch, "diverged_epoch": fitted.diverged_epoch, "divergence": fitted.divergence,
              "stopped_early": fitted.stopped_early,
              "test_score": mean_defined(scores[metric]),
              "task_scores": scores[metric],
              "test_metrics": {m: {"mean": mean_defined(v), "tasks": v} for m, v in scores.items()},
              "seconds_per_epoch": float(np.mean(fitted.seconds)),
              "seconds": {"train": float(np.sum(fitted.seconds)), "validate": float(np.sum(valid_seconds)),
                          "test": test_seconds},
              "history": {"train_loss": [_finite(v) for v in fitted.losses], "valid_score": list(fitted.metrics)}}
    return {"record": record, "checkpoint": checkpoint_record(trained), "test": test, "predictions": predictions}


def train_in_worker(*run, report) -> Dict:
    """:func:`train_model` in a worker process of
    :func:`~rpfast.experiments.workers.run_in_workers`: ``report(n)`` advances the parent's bar."""
    return train_model(*run, _Reporting(report))


class _Reporting:
    """The part of a progress bar :func:`train_model` uses, sending each finished epoch to the
    parent process (the bar's text, which names the model and epoch, stays the parent's)."""

    def __init__(self, report):
        self.report = report

    def update(self, n: int = 1) -> None:
        if n:
            self.report(n)

    def set_postfix(self, **values) -> None:
        pass


def _finite(value: float) -> Optional[float]:
    """A float for results.json: None (null) for NaN or infinity (a diverged loss)."""
    return value if math.isfinite(value) else None


def run_molecules(config: MoleculesConfig, progress: bool = True) -> Dict:
    """Featurise (cached), split, train every model on every split; returns runs and summary.
    ``config`` as :func:`main` prepared it (validated; the threads chosen)."""
    if config.threads and not distributed.current().distributed:
        torch.set_num_threads(config.threads)
    main = distributed.current().main
    progress = progress and main
    warn = (lambda line: print(line, file=sys.stderr)) if main else (lambda line: None)
    start = time.perf_counter()
    dataset = load_dataset(config, warn)
    task_type, metric = resolve_task(config, dataset.labels)
    check_usable_tasks(metric, dataset.labels, dataset.tasks, config.data)  # before featurising
    read_seconds = time.perf_counter() - start
    graphs = featurize_for_group(dataset, distributed.current(), progress=progress)
    featurise_seconds = time.perf_counter() - start - read_seconds
    if graphs.invalid and main:
        shown = ", ".join(str(r) for r in graphs.invalid[:5]) + (" ..." if len(graphs.invalid) > 5 else "")
        print(f"skipped {len(graphs.invalid)} of {len(dataset)} SMILES that RDKit could not parse "
              f"(data rows {shown}, counting from 0)")
    if len(graphs) < 10:
        raise ValueError(f"only {len(graphs)} molecules parse: too few for train/valid/test splits")
    labels = dataset.labels[graphs.rows]
    check_usable_tasks(metric, labels, dataset.tasks, f"{config.data} (the {len(graphs)} molecules that parse)")
    if config.splits_file is not None:
        splits = read_splits_file(config.splits_file, graphs, len(dataset))
    else:
        splits = make_splits(config.split, graphs, config.splits, config.seed)
    check_splits(splits, labels, dataset.tasks, metric, config.data, warn=warn)
    split_jobs = jobs_of(config, len(splits))
    epochs = config.epochs or DEFAULT_EPOCHS[task_type]
    plan = [(name, k, config, graphs, labels, dataset.tasks, task_type, metric, epochs, split, config.seed + s)
            for s, (split, jobs) in enumerate(zip(splits, split_jobs)) for name, k in jobs]
    workers = config.resolved_jobs(len(plan))
    bar = tqdm(total=len(plan) * epochs, desc="molecules", unit="epoch", disable=not progress)
    start = time.perf_counter()
    try:
        if workers == 1:
            outs = [train_model(*run, bar) for run in plan]
        else:  # each worker gets its share of the threads; a run's result is the same as in one process of as many
            threads = config.threads or torch.get_num_threads()
            outs = run_in_workers(train_in_worker, plan, workers, max(1, threads // workers), bar)
    finally:
        bar.close()
    runs, checkpoints, predictions, skipped = [], [], [], set()
    for run, out in zip(plan, outs):
        out["record"]["split"] = run[-1] - config.seed
        skipped.update(t for t, a in zip(dataset.tasks, out["record"]["task_scores"]) if a is None)
        runs.append(out["record"])
        checkpoints.append(out["checkpoint"])
        predictions.append({"test": out["test"], "values": out["predictions"]})
    return {"config": asdict(config), "task_type": task_type, "metric": metric, "epochs": epochs,
            "tasks": list(dataset.tasks),
            "molecules": len(graphs), "invalid_rows": graphs.invalid, "runs": runs, "skipped_tasks": sorted(skipped),
            "summary": summarise(runs), "seconds": time.perf_counter() - start,
            "timing": timing(read_seconds, featurise_seconds, runs),
            "splits": splits_record(splits, graphs, "file" if config.splits_file else config.split, config.seed),
            # written as files, not into results.json
            "files": {"checkpoints": checkpoints, "predictions": predictions, "smiles": graphs.smiles,
                      "rows": graphs.rows.tolist(), "labels": labels.numpy()}}


def jobs_of(config: MoleculesConfig, splits: int) -> List[List[tuple]]:
    """Per split, the ``(model, k)`` runs in order: ``--model`` at ``--k``; with ``--sweep-k``
    also k-ary at every k of :data:`SWEEP_K` and Duvenaud (the speed-up's baseline), the sweep's
    extra k-ary runs on the first ``--sweep-splits`` splits only."""
    jobs = [(name, config.k) for name in config.model_list()]
    sweep = []
    if config.sweep_k:
        sweep = [("kary", k) for k in SWEEP_K if ("kary", k) not in jobs]
        if ("duvenaud", config.k) not in jobs:
            jobs.insert(0, ("duvenaud", config.k))
    swept = splits if config.sweep_splits is None else config.sweep_splits
    return [jobs + (sweep if s < swept else []) for s in range(splits)]


def timing(read: float, featurise: float, runs: List[Dict]) -> Dict[str, float]:
    """Where a run's seconds went: reading the file, featurising (or reading the cache), and,
    summed over every model and split, the training epochs, the validation metric after each
    epoch and the test predictions."""
    total = {"read": read, "featurise": featurise}
    for part in ("train", "validate", "test"):
        total[part] = float(sum(r["seconds"][part] for r in runs))
    return total


def format_timing(seconds: Dict[str, float]) -> str:
    """One line of :func:`timing`'s seconds."""
    evaluate = seconds["validate"] + seconds["test"]
    return (f"time: read {seconds['read']:.1f} s, featurise {seconds['featurise']:.1f} s, train {seconds['train']:.1f} s, "
            f"evaluate {evaluate:.1f} s (validation {seconds['validate']:.1f} s, test {seconds['test']:.1f} s)")


def summarise(runs: List[Dict]) -> List[Dict]:
    """Per (model, k): mean and sd (over splits; None with one split) of the selected test
    metric over the splits where it is defined, the same of every test metric
    (``test_metrics``), the validation metric, seconds/epoch, epochs trained, and the splits
    counted."""
    rows = []
    for key in dict.fromkeys((r["model"], r["k"]) for r in runs):
        group = [r for r in runs if (r["model"], r["k"]) == key]
        mean, sd, count = mean_sd([r["test_score"] for r in group])
        others = {}
        for name in group[0].get("test_metrics", {}):
            other_mean, other_sd, _ = mean_sd([r["test_metrics"][name]["mean"] for r in group])
            others[name] = {"mean": other_mean, "sd": other_sd}
        rows.append({"model": _job_name(*key), "name": key[0], "k": key[1], "metric": group[0]["metric"],
                     "test_score": mean, "test_sd": sd, "test_metrics": others,
                     "valid_score": mean_defined([r["valid_score"] for r in group]),
                     "seconds_per_epoch": float(np.mean([r["seconds_per_epoch"] for r in group])),
                     "epochs": mean_defined([len(r["history"]["train_loss"]) for r in group if "history" in r]),
                     "splits": count})
    return rows


def main(config: MoleculesConfig, progress: bool = True) -> Dict:
    """Run the experiment (:class:`~rpfast.experiments.shape.Experiment`: the preamble, the runs
    of :func:`run_molecules`, :func:`report`). The options, the output directory and the
    threads are checked and set once before any work; the directory is written whole and
    renamed into place when complete."""
    return Experiment("rpfast molecules", run_molecules, report).main(config, progress)


def report(results: Dict, config: MoleculesConfig) -> None:
    """Print the Table-2-style summary; write the tables, checkpoints, predictions, splits and
    figures."""
    name = "Tox21" if config.data == "tox21" else Path(config.data).name
    count = len(results["splits"]["splits"])
    how = f"the {count} split(s) of {Path(config.splits_file).name}" if config.splits_file else \
        f"{count} {config.split} split(s)"
    print(format_table(results, f"{name}: test {results['metric']} (mean over tasks), {how}"))
    print(format_timing(results["timing"]))
    if results["skipped_tasks"]:
        print(f"tasks left out of a mean ({results['metric']} undefined in a split's test set; null in "
              "results.json): " + ", ".join(results["skipped_tasks"]))
    paths = write_outputs(results, Path(config.out_dir), force=config.force)
    print(f"finished in {wall_seconds():.0f} s; wrote " + ", ".join(str(p) for p in paths))
