"""`rpfast csl`: RP-GIN vs GIN on the CSL graphs (Murphy et al. 2019, Table 1).

Protocol (paper defaults): 5-fold class-balanced cross-validation (3 graphs per class in
every validation fold; ``folds=1``: one class-balanced 80/20 train/validation split, a quick single run), GIN with 5 layers of width 16, RP-GIN with one-hot IDs
(position mod 10), Adam, pi-SGD with one permutation per graph per step, validation
accuracy from 5 averaged inference permutations, several initialisations per fold.
"""
import functools
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from tqdm.auto import tqdm

from rpfast.datasets import PAPER_SKIPS, csl_batch, csl_dataset
from rpfast._options import option
from rpfast.experiments.devices import cuda_graphs_option, device_option, resolve_device, uses_cuda_graphs
from rpfast.experiments.report import format_table, summarise, wall_seconds, write_outputs
from rpfast.experiments import distributed
from rpfast.experiments.shape import Experiment
from rpfast.experiments.workers import default_jobs, run_in_workers
from rpfast.experiments.training import Batches, TrainingDiverged, adam, check_learning_rate, diverged_warning, fit
from rpfast.nn import GIN, RPGIN, PiSGD

MODELS = ("GIN", "RP-GIN")


@dataclass
class CSLConfig:
    """The protocol's settings; ``rpfast csl`` derives its options from these fields."""

    epochs: int = option(400, "training epochs per run")
    folds: int = option(5, "cross-validation folds (1: a single class-balanced train/validation split with a fifth "
                           "of the graphs for validation, as one of the 5 default folds: a quick single run)")
    seeds: int = option(1, "random initialisations per fold")
    id_dim: int = option(10, "one-hot ID width m, IDs = position mod m")
    hidden: int = option(16, "GIN width")
    num_layers: int = option(5, "GIN layers", flag="--layers")
    lr: float = option(0.01, "Adam learning rate, cosine-annealed")
    batch_size: int = option(16, "graphs per step (0: the whole training fold, one step per epoch); with --nproc "
                                 "the global batch, split evenly (rounded up to a multiple of the processes)")
    eval_samples: int = option(5, "relabelings averaged at validation", aliases=("--inference-perms",))
    num_vertices: int = option(41, cli=False)
    data_seed: int = option(0, "seed of the relabelings and folds")
    out_dir: str = option("csl_results", "output directory (written whole under a temporary name beside it, "
                                         "renamed when complete)", flag="--out")
    force: bool = option(False, "replace an existing non-empty --out directory")
    threads: Optional[int] = option(None, "kernel/torch threads in all, shared by --jobs or --nproc processes "
                                          "(default: the cores other processes leave free)")
    jobs: Optional[int] = option(None, "runs trained at once in worker processes (default: one per core, "
                                       "at most the number of runs; 1: all in this process)")
    nproc: int = option(1, "processes that train each run together (DistributedDataParallel, gloo on CPU); "
                           "torchrun sets this itself")
    sync_bn: bool = option(False, "with several processes, synchronise BatchNorm statistics (SyncBatchNorm)")
    device: str = device_option()
    cuda_graphs: bool = cuda_graphs_option(True)

    def resolved_jobs(self) -> int:
        if self.nproc > 1 or distributed.under_launcher() or resolve_device(self.device).type != "cpu":
            return 1  # the processes share every run; a GPU trains the runs one after another
        runs = self.folds * self.seeds * len(MODELS)
        return min(runs, self.jobs or default_jobs())

    def validate(self) -> None:
        positive = ("epochs", "folds", "seeds", "id_dim", "hidden", "num_layers", "eval_samples")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.folds > 15:
            raise ValueError(f"folds must be between 1 and 15 (15 graphs per class; 1: a single train/validation "
                             f"split), got {self.folds}")
        check_learning_rate(self.lr)
        if not isinstance(self.batch_size, int) or self.batch_size < 0:
            raise ValueError(f"batch_size must be >= 0 (0: full batch), got {self.batch_size!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.jobs is not None and (not isinstance(self.jobs, int) or self.jobs < 1):
            raise ValueError(f"jobs must be >= 1, got {self.jobs!r}")
        if not isinstance(self.nproc, int) or isinstance(self.nproc, bool) or self.nproc < 1:
            raise ValueError(f"nproc must be >= 1, got {self.nproc!r}")
        if self.nproc > 1 and self.jobs is not None and self.jobs > 1:
            raise ValueError("--nproc shares each run among processes and --jobs trains runs side by side: "
                             "choose one")
        if resolve_device(self.device).type != "cpu" and self.nproc > 1:
            raise ValueError(f"--device {self.device} trains in one process: --nproc must be 1, got {self.nproc}")


def build_model(name: str, config: CSLConfig, generator: torch.Generator) -> torch.nn.Module:
    """GIN or RP-GIN with all parameters in one flat tensor (one gradient accumulation and one
    optimizer tensor per step; the same initial values and gradients as the default layout), except
    with ``sync_bn`` (SyncBatchNorm needs the per-tensor layout)."""
    num_classes = len(PAPER_SKIPS)
    flat = not config.sync_bn
    if name == "GIN":
        return GIN(1, config.hidden, config.num_layers, num_classes, flat_parameters=flat)
    return RPGIN(1, config.hidden, config.num_layers, num_classes, id_dim=config.id_dim,
                 strategy=PiSGD(train_samples=1, eval_samples=config.eval_samples), generator=generator,
                 flat_parameters=flat)


@functools.lru_cache(maxsize=2)
def _dataset(num_vertices: int, data_seed: int):
    """The CSL graphs and labels, once per process."""
    return csl_dataset(M=num_vertices, seed=data_seed)


#: The validation share of ``folds=1``: that of one fold of the default 5-fold protocol.
SINGLE_SPLIT_VALID = 0.2


def _splits(config: CSLConfig, labels: torch.Tensor) -> List[Tuple[List[int], List[int]]]:
    """``(train, valid)`` graph indices per fold: stratified k-fold, or for ``folds=1`` one
    stratified shuffle split with :data:`SINGLE_SPLIT_VALID` of the graphs for validation."""
    from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit  # 2 s to import: not at start-up

    if config.folds == 1:
        splitter = StratifiedShuffleSplit(1, test_size=SINGLE_SPLIT_VALID, random_state=config.data_seed)
    else:
        splitter = StratifiedKFold(config.folds, shuffle=True, random_state=config.data_seed)
    return [(train.tolist(), val.tolist()) for train, val in splitter.split(np.zeros(len(labels)), labels.numpy())]


def train_run(config: CSLConfig, fold: int, seed: int, name: str, report: Optional[Callable[[int], None]] = None
              ) -> Dict:
    """Train one model on one fold from one initialisation; returns its run record (validation
    accuracy in %, final training loss) and, for fold 0 / seed 0, the graph embeddings of all
    150 graphs. Seeded by (fold, seed) alone, so a run's result does not depend on which
    process trains it. ``report(1)`` is called after every epoch."""
    graphs, labels = _dataset(config.num_vertices, config.data_seed)
    train_idx, val_idx = (torch.as_tensor(i) for i in _splits(config, labels)[fold])
    # Batches are slices of the whole dataset's batch (GraphBatch.select copies CSR slices); the
    # validation and full-batch training batches recur, mini-batches are reshuffled.
    device = resolve_device(config.device)
    dataset = csl_batch(graphs, range(len(graphs)))
    cached_batch = functools.lru_cache(maxsize=8)(lambda key: dataset.select(list(key)).to(device))
    labels = labels.to(device)

    def make_batch(indices: torch.Tensor):
        return cached_batch(tuple(indices.tolist()))

    context = distributed.current()
    run_seed = 1000 * fold + seed
    torch.manual_seed(run_seed)  # the same initialisation on every process
    # relabelings: each process draws from its own stream (rank 0's is the one-process stream)
    generator = torch.Generator().manual_seed(distributed.rank_seed(run_seed, context.rank))
    model = build_model(name, config, generator).to(device)
    batches = Batches(train_idx, lambda chunk: (make_batch(chunk), labels[chunk]),
                      size=config.batch_size or len(train_idx),  # 0: full batch, the paper code's protocol
                      generator=generator, seed=run_seed)
    captured = uses_cuda_graphs(config.cuda_graphs, device, context.distributed)
    try:
        fitted = fit(model, batches, classification_loss, epochs=config.epochs,
                     optimizer=lambda p: adam(p, config.lr, capturable=captured),
                     schedule=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, config.epochs),
                     context=context, sync_bn=config.sync_bn, on_epoch=None if report is None else lambda _: report(1),
                     cuda_graphs=captured)
    except TrainingDiverged as error:
        raise TrainingDiverged(f"{name}, fold {fold}, seed {seed}: {error} (--lr, now {config.lr:g})",
                               error.epoch) from None
    model, loss = fitted.model, fitted.losses[fitted.best_epoch]
    record = {"model": name, "fold": fold, "seed": seed,
              "accuracy": 100 * accuracy(model, make_batch, labels, val_idx, context),
              "final_train_loss": loss, "best_epoch": fitted.best_epoch, "diverged_epoch": fitted.diverged_epoch,
              "divergence": fitted.divergence}
    embeddings = None
    if fold == 0 and seed == 0 and context.main:
        embeddings = _embeddings(model, make_batch(torch.arange(len(labels)))).cpu().numpy()
    return {"record": record, "embeddings": embeddings}


def classification_loss(module: torch.nn.Module, batch) -> torch.Tensor:
    """The cross-entropy of one training batch ``(graph batch of B graphs, labels [B])``."""
    graph, targets = batch
    return torch.nn.functional.cross_entropy(module(graph.x, graph), targets)


@torch.no_grad()
def accuracy(model: torch.nn.Module, make_batch: Callable[[torch.Tensor], object], labels: torch.Tensor,
             indices: torch.Tensor, context: Optional[distributed.Context] = None) -> float:
    """The fraction of ``indices`` (int64 ``[b]``) whose graphs ``model`` classifies correctly
    (``labels [N]``), in eval mode (an RP model averages its ``eval_samples`` relabelings);
    ``make_batch(indices)`` builds their graph batch. In a process group (``context``, default
    :func:`~rpfast.experiments.distributed.current`) every process scores its share of
    ``indices`` and the counts are summed."""
    context = context if context is not None else distributed.current()
    model.eval()
    if context.distributed:
        indices = indices[context.rank::context.world_size]
    correct = 0.0
    if len(indices):
        graph = make_batch(indices)
        correct = float((model(graph.x, graph).argmax(dim=-1) == labels[indices]).sum())
    if context.distributed:
        counts = context.all_reduce_sum(torch.tensor([correct, float(len(indices))]))
        return float(counts[0] / counts[1])
    return correct / max(len(indices), 1)


@torch.no_grad()
def _embeddings(model: torch.nn.Module, graph) -> torch.Tensor:
    """The model's graph embeddings ``[B, D]`` of a graph batch, in eval mode."""
    model.eval()
    return model.graph_embedding(graph.x, graph)


def run_csl(config: CSLConfig, progress: bool = True) -> Dict:
    """Cross-validate GIN and RP-GIN; returns per-run accuracies, the summary and embeddings.
    ``config`` as :func:`main` prepared it (validated; the threads chosen).

    The ``folds x seeds x 2`` runs are independent: with ``config.jobs > 1`` they train in
    that many worker processes (each with its share of the threads), and the results are
    the same as in one process.
    """
    threads = config.threads or torch.get_num_threads()
    jobs = config.resolved_jobs()
    if not distributed.current().distributed:
        torch.set_num_threads(threads)
    _, labels = _dataset(config.num_vertices, config.data_seed)
    plan = [(fold, seed, name) for fold in range(config.folds) for seed in range(config.seeds) for name in MODELS]
    progress = progress and distributed.current().main
    bar = tqdm(total=len(plan) * config.epochs, desc="csl", unit="epoch", disable=not progress)
    start = time.perf_counter()
    try:
        if jobs == 1:
            results = [train_run(config, *run, report=bar.update) for run in plan]
        else:
            results = run_in_workers(train_run, [(config, *run) for run in plan], jobs, max(1, threads // jobs), bar)
    finally:
        bar.close()
    runs = [r["record"] for r in results]
    if distributed.current().main:
        for run in runs:
            if run["diverged_epoch"] is not None:
                print(diverged_warning(f"{run['model']}, fold {run['fold']}, seed {run['seed']}", run["diverged_epoch"],
                                       run["divergence"], run["best_epoch"], config.epochs), file=sys.stderr)
    embeddings = {r["record"]["model"]: r["embeddings"] for r in results if r["embeddings"] is not None}
    return {
        "config": asdict(config),
        "runs": runs,
        "summary": summarise(runs, MODELS),
        "embeddings": embeddings,
        "labels": labels.numpy(),
        "seconds": time.perf_counter() - start,
    }


def main(config: CSLConfig, progress: bool = True) -> Dict:
    """Run the experiment (:class:`~rpfast.experiments.shape.Experiment`: the preamble, the
    runs of :func:`run_csl`, :func:`report`). The options, the output directory and the threads
    are checked and set once, before any training: a bad ``out_dir`` (an existing file, a
    non-empty directory without ``force``) raises its ``OSError`` at once. The directory is
    written whole and renamed into place when complete."""
    return Experiment("rpfast csl", run_csl, report).main(config, progress)


def report(results: Dict, config: CSLConfig) -> None:
    """Print the paper-style table and write CSV, JSON and the figure; the closing line's
    "finished in" is this process's whole wall time
    (:func:`~rpfast.experiments.report.wall_seconds`: start-up, ``--nproc`` processes, writing)."""
    print(format_table(results["summary"], "CSL validation accuracy (%)"))
    paths = write_outputs(results, Path(config.out_dir), class_names=[f"R={r}" for r in PAPER_SKIPS],
                          force=config.force)
    print(f"finished in {wall_seconds():.0f} s; wrote " + ", ".join(str(p) for p in paths))
