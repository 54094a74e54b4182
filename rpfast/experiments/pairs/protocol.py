"""`rpfast pairs`: the RPC protocol of the BREC benchmark (Wang & Zhang 2023) on pairs of
1-WL-equivalent graphs, with RP models.

For each pair (G, H) and seed: Q random relabelings of each graph (a node permutation and a
shuffled edge order), interleaved G_1, H_1, G_2, H_2, ...; a fresh model (initialised from the
pair's seed) trained to push the two apart by the experiments' one loop,
:func:`~rpfast.experiments.training.fit` (``CosineEmbeddingLoss(out[0::2], out[1::2], -1)``,
Adam, up to ``epochs`` full-batch steps, stopping when the loss has not improved for
``patience`` of them, or at the first loss that is not finite, keeping the weights that gave
the last finite one); then, in eval mode, ``D = f(G_q) - f(H_q)`` and the statistics of
:mod:`rpfast.experiments.pairs.statistics`, with the reliability check on 2Q relabelings of one
member (chosen by the seed) split into interleaved halves.

Models: :mod:`rpfast.experiments.pairs.models`.
"""
import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
import torch

from rpfast.data.batch import GraphBatch
from rpfast.datasets.pairs import GraphPair
from rpfast.experiments.pairs.models import (CAPTURABLE_MODELS, MODELS, build_model, check_model_settings,
                                             rooted_hash)
from rpfast.experiments.pairs.stack import shared_hash
from rpfast.experiments.pairs.batched import MIN_DELTA, run_stack, stacks
from rpfast.experiments.pairs.replicas import batch_of, pair_max_degree, pair_row, relabeled, replica_seed
from rpfast.experiments.batches import Batches
from rpfast.experiments.devices import uses_cuda_graphs
from rpfast.experiments.training import TrainingDiverged, check_learning_rate, fit

__all__ = ["PairsSettings", "MODELS", "run_pair", "score", "relabeled", "batch_of", "differences_arrays",
           "pair_row", "replica_seed", "stacks", "pair_max_degree"]


@dataclass
class PairsSettings:
    """The protocol's constants (BREC's defaults: Q = 32 relabelings, output dimension 16,
    Adam lr 1e-4, up to 20 epochs stopping after 5 without improvement) and the model's shape
    (:mod:`~rpfast.experiments.pairs.models`; ``layers`` and ``train_samples`` None take the
    model's defaults)."""

    model: str = "oriented"
    relabelings: int = 32  # Q
    output_dim: int = 16
    hidden: int = 64
    layers: Optional[int] = None
    epochs: int = 20
    patience: int = 5
    lr: float = 1e-4
    k: int = 32
    min_k: Optional[int] = None
    orientation: str = "bfs"
    train_samples: Optional[int] = None
    eval_samples: int = 256
    ridge: float = 0.0

    def validate(self) -> None:
        for name in ("relabelings", "output_dim", "hidden", "epochs", "patience", "eval_samples", "layers",
                     "train_samples"):
            value = getattr(self, name)
            if value is None and name in ("layers", "train_samples"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.relabelings < 2:
            raise ValueError(f"relabelings must be >= 2 (a covariance needs two rows), got {self.relabelings}")
        check_learning_rate(self.lr)
        if not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be >= 0, got {self.ridge!r}")
        check_model_settings(self.model, self.k, self.orientation, self.ridge, self.min_k)


def _embed(model: torch.nn.Module, graph: GraphBatch) -> torch.Tensor:
    return model(graph.x, graph)


def run_pair(pair: GraphPair, seed: int, settings: PairsSettings, device: torch.device = torch.device("cpu"),
             cuda_graphs: bool = False, stacked: Optional[bool] = None) -> Dict:
    """The protocol on one pair and seed: the row of the per-pair CSV (statistics, decision,
    epochs, final loss) and the D matrices (``differences``, ``reliability``). The model trains
    and embeds on ``device``; relabelings are drawn, and statistics computed, on the CPU.
    ``cuda_graphs`` (on a CUDA device, for the models that allow it, ``CAPTURABLE_MODELS``): the
    training step is captured once and replayed.

    ``stacked`` (None: :func:`stacks`, True for the oriented model) runs the pair as a stack of
    one (:func:`~rpfast.experiments.pairs.batched.run_stack`, which is how ``rpfast pairs`` runs
    many pairs and seeds at once); False trains its model alone through
    :func:`~rpfast.experiments.training.fit`. Both compute the same row, to float32 rounding: the
    same draws, initial weights (the oriented model's rooted rounds are the seed's,
    :func:`~rpfast.experiments.pairs.models.rooted_hash`) and stopping rule."""
    if stacked is None:
        stacked = stacks(settings)
    if stacked:  # run_stack refuses a model that does not stack
        return run_stack([(pair, seed)], settings, device)[0]
    n, max_degree = pair.n, pair_max_degree(pair)
    generator = torch.Generator().manual_seed(replica_seed(pair, seed))
    torch.manual_seed(replica_seed(pair, seed))
    q = settings.relabelings
    g_views = relabeled(pair.g, n, q, generator)
    h_views = relabeled(pair.h, n, q, generator)
    train = batch_of([view for both in zip(g_views, h_views) for view in both], n).to(device)
    model = build_model(settings, n, generator, max_degree=max_degree)
    if stacks(settings):  # the oriented model's rooted rounds: the seed's, as in a stack
        shared_hash([model], rooted_hash(seed))
    model = model.to(device)
    loss_fn = torch.nn.CosineEmbeddingLoss()
    target = -torch.ones(q, device=device)

    def loss(module: torch.nn.Module, graph: GraphBatch) -> torch.Tensor:
        out = _embed(module, graph)
        return loss_fn(out[0::2], out[1::2], target)

    steps = Batches(torch.arange(2 * q), lambda chunk: train, 2 * q, generator)  # one full-batch step an epoch
    try:
        captured = uses_cuda_graphs(cuda_graphs, device) and settings.model in CAPTURABLE_MODELS
        lr = torch.tensor(settings.lr, device=device) if captured else settings.lr  # a replay reads it on the device
        result = fit(model, steps, loss, epochs=settings.epochs, patience=settings.patience, min_delta=MIN_DELTA,
                     optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr, capturable=captured),
                     cuda_graphs=captured)
        epochs = result.finite_epochs
        loss_value = result.losses[epochs - 1]
    except TrainingDiverged:  # the first loss is not finite: the initial weights, untouched
        epochs, loss_value = 0, math.nan
    model.eval()
    with torch.no_grad():
        g_out = _embed(model, batch_of(g_views, n).to(device)).double().cpu()
        h_out = _embed(model, batch_of(h_views, n).to(device)).double().cpu()
        member = pair.g if torch.randint(2, (1,), generator=generator).item() == 0 else pair.h
        twice = _embed(model, batch_of(relabeled(member, n, 2 * q, generator), n).to(device)).double().cpu()
    return pair_row(pair, seed, epochs, loss_value, g_out, h_out, twice, settings.ridge)


def score(rows: List[Dict]) -> Dict[str, Dict[str, int]]:
    """Per category and in total: pairs, distinguished (on every seed), unreliable (on any seed),
    the protocol's score = distinguished - unreliable, and ``any_seed``: pairs distinguished on
    at least one seed (what one seed might have claimed)."""
    by_pair: Dict = {}
    for row in rows:
        by_pair.setdefault((row["category"], row["index"]), []).append(row)
    table: Dict[str, Dict[str, int]] = {}
    for (category, _), group in by_pair.items():
        for key in (category, "total"):
            entry = table.setdefault(key, {"pairs": 0, "distinguished": 0, "unreliable": 0, "any_seed": 0})
            entry["pairs"] += 1
            entry["distinguished"] += all(r["distinguished"] for r in group)
            entry["unreliable"] += not all(r["reliable"] for r in group)
            entry["any_seed"] += any(r["distinguished"] for r in group)
    for entry in table.values():
        entry["score"] = entry["distinguished"] - entry["unreliable"]
        entry["any_seed"] = entry.pop("any_seed")  # after the score: the table's columns in order
    total = table.pop("total", None)
    if total is not None:
        table["total"] = total
    return table


def differences_arrays(rows: List[Dict]) -> Dict[str, np.ndarray]:
    """The D matrices by pair, for ``--save-embeddings`` (``<category>_<index>_seed<s>`` and
    ``..._reliability``)."""
    out = {}
    for row in rows:
        key = f"{row['category']}_{row['index']}_seed{row['seed']}"
        out[key] = row["differences"]
        out[key + "_reliability"] = row["reliability"]
    return out
