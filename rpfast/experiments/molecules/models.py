"""The models of `rpfast molecules` (paper Table 2 and the k-ary figure), built from a name and
the few numbers a checkpoint keeps to rebuild them."""
import contextlib
from dataclasses import asdict, dataclass
from typing import Iterator, Optional

import torch
from torch import nn
from tqdm.auto import tqdm

from rpfast._memory import release_free_memory
from rpfast.data.segments import ranges, repeat
from rpfast.datasets.molecules import ATOM_FEATURES, BOND_FEATURES, ELEMENTS, MoleculeGraphs
from rpfast.nn import AdjCNN, Duvenaud, Oriented, PiSGD, RelationalPooling, RPDuvenaud, SubgraphRP, VecRNN

MODELS = ("duvenaud", "rp-duvenaud", "kary", "cnn-dfs", "rnn-dfs")
#: The models that read k-vertex DFS subgraphs.
SUBGRAPH_MODELS = ("kary", "cnn-dfs", "rnn-dfs")


@dataclass(frozen=True)
class Architecture:
    """Everything that shapes a model: its name (:data:`MODELS`), ``k`` (vertices per DFS
    subgraph; None for the full-graph models), the output width ``num_tasks``, the one-hot ID
    width ``id_dim`` (RP-Duvenaud) and the relabelings / subgraphs averaged in eval mode."""

    model: str
    num_tasks: int
    k: Optional[int] = None
    id_dim: int = 1
    eval_samples: int = 1

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}: choose from {', '.join(MODELS)}")
        if (self.k is None) != (self.model not in SUBGRAPH_MODELS):
            raise ValueError(f"k must be {'given' if self.model in SUBGRAPH_MODELS else 'None'} for {self.model}")

    def state(self) -> dict:
        return asdict(self)


def build_model(arch: Architecture, generator: torch.Generator) -> nn.Module:
    """The model ``arch`` describes (paper widths: convolutions of 64, dense 128); its random
    relabelings or subgraphs are drawn from ``generator``."""
    if arch.model == "duvenaud":
        return Duvenaud(ATOM_FEATURES, arch.num_tasks)
    if arch.model == "rp-duvenaud":
        return RPDuvenaud(ATOM_FEATURES, arch.num_tasks, id_dim=arch.id_dim,
                          strategy=PiSGD(train_samples=1, eval_samples=arch.eval_samples), generator=generator)
    # k-ary models: the first k vertices of a DFS from a random start, one order per molecule in
    # training, eval_samples averaged in eval mode
    strategy = Oriented("dfs", arch.k, train_samples=1, eval_samples=arch.eval_samples)
    if arch.model == "kary":
        return SubgraphRP(Duvenaud(ATOM_FEATURES, arch.num_tasks), strategy, generator=generator)
    encoder = (AdjCNN(arch.k, 1 + BOND_FEATURES, ATOM_FEATURES, 64, arch.num_tasks) if arch.model == "cnn-dfs"
               else VecRNN(arch.k, 1 + BOND_FEATURES, ATOM_FEATURES, 64, arch.num_tasks, cell="lstm"))
    return RelationalPooling(encoder, strategy, generator=generator)


def max_same_element(graphs: MoleculeGraphs, molecules: torch.Tensor) -> int:
    """The most atoms of one element in one molecule among ``molecules``: the ID width that makes
    every atom of an element unique (RP-Duvenaud). Read from the stored element codes,
    :data:`COUNT_CHUNK` molecules at a time (no features are expanded)."""
    molecules = torch.as_tensor(molecules, dtype=torch.int64).reshape(-1)
    most = 1
    for chunk in molecules.split(COUNT_CHUNK):
        atoms = graphs.atom_ptr[chunk + 1] - graphs.atom_ptr[chunk]
        total = int(atoms.sum())
        if not total:
            continue
        element = graphs.atoms[ranges(graphs.atom_ptr[chunk], atoms), 0].long()
        molecule = repeat(torch.arange(chunk.numel()), atoms, total)
        most = max(most, int(torch.bincount(molecule * len(ELEMENTS) + element).max()))
    release_free_memory()  # the chunks' indices (80 MB at 300,000 molecules) stay in glibc's heap otherwise
    return most


#: molecules :func:`max_same_element` reads at a time (a few MB of indices)
COUNT_CHUNK = 1 << 16


@contextlib.contextmanager
def averaging(model: nn.Module, samples: Optional[int]) -> Iterator[nn.Module]:
    """``model`` with every RP strategy in it averaging ``samples`` relabelings / subgraphs in
    eval mode (its ``eval_samples``), restored on leaving; unchanged when ``samples`` is None.
    The validation metric's cheaper pass (``--valid-samples``): checkpoints and test predictions
    keep the architecture's count."""
    strategies = [m.strategy for m in model.modules()
                  if getattr(getattr(m, "strategy", None), "eval_samples", None) is not None]
    saved = [s.eval_samples for s in strategies]
    try:
        if samples is not None:
            for strategy in strategies:
                strategy.eval_samples = samples
        yield model
    finally:
        for strategy, count in zip(strategies, saved):
            strategy.eval_samples = count


@torch.no_grad()
def model_outputs(model: nn.Module, graphs: MoleculeGraphs, molecules: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The eval-mode outputs ``[len(molecules), tasks]`` of ``molecules`` (positions in
    ``graphs``), in batches of ``batch_size`` in the given order (fast; a molecule's output
    depends on its batch: see :func:`molecule_outputs`), run on the model's device and returned
    on the CPU. The validation metric's outputs."""
    model.eval()
    device = next(model.parameters()).device
    outputs = _Outputs(len(molecules))
    for i in range(0, len(molecules), batch_size):
        outputs.put(i, model(graphs.batch(molecules[i:i + batch_size]).to(device)).cpu())
    return outputs.result()


class _Outputs:
    """A pass's outputs ``[n, tasks]`` written into one tensor allocated at the first batch. (A list
    of per-batch outputs to concatenate at the end keeps thousands of small blocks alive between
    the batches' large freed ones, so glibc cannot reuse or return that memory: at 1,000,000
    molecules RP-Duvenaud's epoch and validation pass peaked 1.3 GB above its start.)"""

    def __init__(self, rows: int):
        self.rows, self.out = rows, None

    def put(self, start: int, values: torch.Tensor) -> None:
        if self.out is None:
            self.out = torch.empty((self.rows, *values.shape[1:]), dtype=values.dtype)
        self.out[start:start + len(values)] = values

    def result(self) -> torch.Tensor:
        return self.out if self.out is not None else torch.zeros(0, 0)


@torch.no_grad()
def molecule_outputs(model: nn.Module, graphs: MoleculeGraphs, molecules: torch.Tensor, generator: torch.Generator,
                     seed: int, progress: bool = False) -> torch.Tensor:
    """The eval-mode outputs ``[len(molecules), tasks]`` of ``molecules``, each molecule in a
    forward pass of its own, with ``generator`` (the model's relabelings) re-seeded to ``seed``
    before each: a molecule's output depends on the molecule, the model, ``seed`` and the thread
    count only, never on the other molecules scored with it. (In a batch both would: RP models
    draw a batch's relabelings in one stream, and BLAS multiplies a block of fewer than four rows,
    such as the atoms of a rare degree, in another summation order than a larger block.) The
    one-molecule batches are cut from batches of 256 (:meth:`MoleculeGraphs.singles`, the same
    tensors bit for bit). Costs about 1 ms per molecule for Duvenaud, 2-3 for the RP models."""
    model.eval()
    outputs = _Outputs(len(molecules))
    singles = graphs.singles(molecules)
    for i in tqdm(range(len(molecules)), desc="predict", unit="molecule", disable=not progress, leave=False):
        generator.manual_seed(seed)
        outputs.put(i, model(next(singles)))
    return outputs.result()
