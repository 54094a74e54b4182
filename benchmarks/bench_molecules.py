"""Molecules (issue 11): featurisation of Tox21 against a per-atom Python loop over RDKit, and a
Duvenaud training epoch against the same model written in PyG; RP-Duvenaud's and k-ary
Duvenaud's epochs against rpfast's Duvenaud (the RP overhead, and the k-ary speed-up); RNN-DFS's
epoch against the same model written with dense batches and packed sequences (issue 45)."""
import pytest
import torch

pytest.importorskip("rdkit")
pytest.importorskip("torch_geometric")

from rpfast.datasets import load_tox21  # noqa: E402
from rpfast.datasets.molecules import featurize_smiles  # noqa: E402
from rpfast.experiments.molecules.tasks import Targets  # noqa: E402
from rpfast.datasets.molecules import ATOM_FEATURES, BOND_FEATURES  # noqa: E402
from rpfast.nn import Duvenaud, Oriented, RelationalPooling, RPDuvenaud, SubgraphRP, VecRNN  # noqa: E402

from benchmarks.paired import paired  # noqa: E402

EPOCH_MOLECULES, BATCH = 2048, 128


@pytest.fixture(scope="module")
def tox21():
    data = load_tox21()
    graphs = featurize_smiles(data.smiles)
    return data, graphs, data.labels[graphs.rows]


@pytest.mark.parametrize("impl", ["rpfast", "python loop"])
def test_featurize_tox21(benchmark, impl, tox21):
    from benchmarks.baselines.molecules_loop import featurize_loop

    data = tox21[0]
    run = (lambda: featurize_smiles(data.smiles)) if impl == "rpfast" else (lambda: featurize_loop(data.smiles))
    benchmark.group = f"featurise all of Tox21 ({len(data.smiles)} SMILES, 75 atom + 10 bond features)"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(run, rounds=3, warmup_rounds=0, iterations=1)


def _epoch(model, batches, labels_of, targets):
    """A function running one epoch; its ``model`` and ``first_batch()`` are kept for the
    agreement check."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def run():
        model.train()
        for batch, labels in zip(batches(), labels_of):
            loss = targets.loss(model(batch), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    run.model, run.first_batch = model, lambda: next(iter(batches()))
    return run


def _agree(ours, pyg) -> None:
    """rpfast's Duvenaud and PyG's compute one function: given rpfast's weights, PyG's model gives
    the same logits on the epoch's first batch (eval mode: the running statistics, no batch
    noise). Both then start the timed epochs from the same weights."""
    from benchmarks.baselines.molecules_loop import load_rpfast_weights

    model, theirs = ours.model, pyg.model.inner
    load_rpfast_weights(theirs, model)
    model.eval()
    theirs.eval()
    with torch.no_grad():
        expected, got = model(ours.first_batch()), pyg.model(pyg.first_batch())
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def _duvenaud_epoch(impl, tox21, width=64, dense=128):
    """One training epoch of ``impl`` with convolutions of ``width`` and a dense layer of ``dense``."""
    data, graphs, labels = tox21
    torch.manual_seed(0)
    order = torch.randperm(len(graphs), generator=torch.Generator().manual_seed(0))[:EPOCH_MOLECULES]
    chunks = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]
    labels_of = [labels[c] for c in chunks]
    targets = Targets.fit("classification", labels[order])
    gen = torch.Generator().manual_seed(0)
    sizes = {"conv": (width, width), "dense": dense}
    if impl == "pyg":
        from torch_geometric.loader import DataLoader
        from benchmarks.baselines.molecules_loop import PygDuvenaud

        from torch_geometric.data import Data

        singles = [graphs.batch([int(i)]) for i in order]
        data_list = [Data(x=g.x, edge_index=g.edge_index, edge_attr=g.edge_attr) for g in singles]
        model = PygDuvenaud(75, labels.shape[1], **sizes)
        loader = DataLoader(data_list, batch_size=BATCH, shuffle=False)
        forward = lambda b: model(b.x, b.edge_index, b.batch)  # noqa: E731

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, b):
                return forward(b)
        return _epoch(Wrapped(), lambda: iter(loader), labels_of, targets)
    if impl == "rpfast":
        model = Duvenaud(75, labels.shape[1], **sizes)
    elif impl == "rp-duvenaud":
        model = RPDuvenaud(75, labels.shape[1], id_dim=16, generator=gen, **sizes)
    else:
        k = int(impl.split("=")[1])
        model = SubgraphRP(Duvenaud(75, labels.shape[1], **sizes), Oriented("dfs", k, train_samples=1, eval_samples=20),
                           generator=gen)
    return _epoch(model, lambda: (graphs.batch(c) for c in chunks), labels_of, targets)


@pytest.mark.parametrize("impl", ["rpfast", "pyg", "rp-duvenaud", "kary k=10", "kary k=20", "kary k=30",
                                  "kary k=40", "kary k=50"])
def test_duvenaud_epoch(benchmark, impl, tox21):
    run = _duvenaud_epoch(impl, tox21)
    benchmark.group = f"Duvenaud training epoch: {EPOCH_MOLECULES} Tox21 molecules, batch {BATCH}"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(run, rounds=3, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("impl", ["rpfast", "pyg", "rp-duvenaud"])
@pytest.mark.parametrize("width", [128, 300])
def test_duvenaud_epoch_wide(benchmark, impl, width, tox21):
    """The issue's range of hidden sizes: convolutions of ``width`` and a dense layer of 2 x width."""
    run = _duvenaud_epoch(impl, tox21, width=width, dense=2 * width)
    benchmark.group = (f"Duvenaud training epoch, convolutions of {width}, dense {2 * width}: {EPOCH_MOLECULES} "
                       f"Tox21 molecules, batch {BATCH}")
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(run, rounds=3, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("width", [64, 128, 300])
def test_duvenaud_epoch_alternating(benchmark, width, tox21):
    """rpfast's and PyG's Duvenaud epochs in alternating rounds (paired.py), at each hidden size."""
    ours, pyg = (_duvenaud_epoch(impl, tox21, width=width, dense=2 * width) for impl in ("rpfast", "pyg"))
    benchmark.group = (f"Duvenaud training epoch, convolutions of {width}, dense {2 * width}: {EPOCH_MOLECULES} "
                       f"Tox21 molecules, batch {BATCH} (alternating rounds)")
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, ours, pyg, "pyg", rounds=5, warmup_rounds=1, agree=_agree)


def _rnn_dfs_epoch(impl, tox21, k=20):
    """One training epoch of RNN-DFS (Table 2: an LSTM of 64 over the first k vertices of a DFS
    from a random start, one order per molecule): rpfast's ``RelationalPooling`` or the PyTorch
    baseline (``DenseBlocksPackedRNN``: dense batch, gathered blocks, packed LSTM), from the same
    weights and the same orders."""
    from benchmarks.baselines.torch_rp import DenseBlocksPackedRNN

    data, graphs, labels = tox21
    order = torch.randperm(len(graphs), generator=torch.Generator().manual_seed(0))[:EPOCH_MOLECULES]
    chunks = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]
    torch.manual_seed(0)  # both sides start from these weights (each trains its own copy)
    f = VecRNN(k, 1 + BOND_FEATURES, ATOM_FEATURES, 64, labels.shape[1], cell="lstm")
    strategy, gen = Oriented("dfs", k, train_samples=1, eval_samples=5), torch.Generator().manual_seed(0)
    model = (RelationalPooling(f, strategy, generator=gen) if impl == "rpfast"
             else DenseBlocksPackedRNN(f, strategy, gen))
    run = _epoch(model, lambda: (graphs.batch(c) for c in chunks), [labels[c] for c in chunks],
                 Targets.fit("classification", labels[order]))
    run.generator = gen
    return run


def _rnn_dfs_agree(ours, baseline) -> None:
    """Both RNN-DFS epochs compute one function: the same outputs on the first batch, eval mode
    (5 orders averaged), their order generators seeded alike."""
    outputs = []
    for run in (ours, baseline):
        run.model.eval()
        run.generator.manual_seed(1)
        with torch.no_grad():
            outputs.append(run.model(run.first_batch()))
    torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)


def test_rnn_dfs_epoch_alternating(benchmark, tox21):
    """RNN-DFS's epoch against its PyTorch baseline, alternating rounds (paired.py)."""
    ours, baseline = (_rnn_dfs_epoch(impl, tox21) for impl in ("rpfast", "torch"))
    benchmark.group = (f"RNN-DFS training epoch (k=20, LSTM 64): {EPOCH_MOLECULES} Tox21 molecules, batch {BATCH} "
                       "(alternating rounds)")
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, ours, baseline, "torch (dense batch + packed LSTM)", rounds=5, warmup_rounds=1,
           agree=_rnn_dfs_agree)
