"""One RP-GIN training epoch on CSL (120 graphs, batches of 16, Adam) against PyG + plain torch.

Both sides use the same optimizer, in two variants: ``torch.optim.Adam`` as most scripts
write it (on CPU a Python loop over the parameter tensors) and ``Adam(fused=True)`` (one
kernel for all tensors, what rpfast's commands use). rpfast's model runs in both parameter
layouts: ``flat`` (``flat_parameters=True``, as ``rpfast csl`` builds it: one tensor for
autograd and the optimizer) and ``per-tensor`` (the default, the ~40 tensors PyG's model has
too, each paying torch's per-tensor costs)."""
import pytest
import torch

from rpfast.datasets import csl_batch, csl_dataset
from rpfast.experiments.csl.experiment import classification_loss
from rpfast.experiments.training import Batches, fit
from rpfast.nn import RPGIN
from benchmarks.paired import paired

HIDDEN, LAYERS, ID_DIM, BATCH = 16, 5, 10, 16


def training_epoch(impl: str, optimizer_kind: str = "Adam", layout: str = "flat"):
    """A function running one training epoch of ``impl`` ("rpfast" or "pyg+torch"; ``layout``:
    rpfast's parameters, "flat" or "per-tensor")."""
    graphs, labels = csl_dataset()
    train = torch.arange(120)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if impl == "rpfast":
        model = RPGIN(1, HIDDEN, LAYERS, 10, id_dim=ID_DIM, generator=gen, flat_parameters=layout == "flat")
        dataset = csl_batch(graphs, range(len(graphs)))  # the dataset as one batch, sliced per step

        def make_batch(indices):
            return dataset.select(indices.tolist())
    else:
        pyg_data = pytest.importorskip("torch_geometric.data")
        from benchmarks.baselines.pyg_rpgin import PygRPGIN

        base = PygRPGIN(1, HIDDEN, LAYERS, 10, ID_DIM)
        datas = [pyg_data.Data(x=torch.ones(n, 1), edge_index=ei, num_nodes=n) for ei, n in graphs]

        class Adapter(torch.nn.Module):  # the loss calls model(x, batch)
            def __init__(self):
                super().__init__()
                self.base = base

            def forward(self, x, batch):
                return self.base(batch)

        model = Adapter()

        def make_batch(indices):
            return pyg_data.Batch.from_data_list([datas[i] for i in indices.tolist()])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, fused=optimizer_kind != "Adam")
    batches = Batches(train, lambda chunk: (make_batch(chunk), labels[chunk]), BATCH, gen)

    def epoch():
        fit(model, batches, classification_loss, epochs=1, optimizer=lambda _: optimizer)
    epoch.model, epoch.make_batch = model, make_batch  # for the agreement check
    return epoch


def _agree(ours, pyg) -> None:
    """rpfast's RP-GIN and PyG's compute one function: given rpfast's weights and the same IDs,
    PyG's model gives rpfast's GIN logits on the first 16 graphs (eval mode: the running
    statistics). Both then start the timed epochs from the same weights."""
    from benchmarks.baselines.pyg_rpgin import load_rpfast_weights

    model, base = ours.model, pyg.model.base
    load_rpfast_weights(base, model.gin)
    chunk = torch.arange(BATCH)
    graph, data = ours.make_batch(chunk), pyg.make_batch(chunk)
    gen = torch.Generator().manual_seed(1)
    ids = torch.cat([torch.randperm(int(n), generator=gen) % ID_DIM for n in graph.num_nodes])
    model.eval()
    base.eval()
    with torch.no_grad():
        expected = model.gin(graph.x, graph, ids=ids.unsqueeze(0)).squeeze(0)
        got = base(data, ids=ids)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["flat", "per-tensor"])
@pytest.mark.parametrize("optimizer_kind", ["Adam", "Adam(fused=True)"])
@pytest.mark.parametrize("impl", ["rpfast", "pyg+torch"])
def test_rpgin_training_epoch(benchmark, impl, optimizer_kind, layout):
    epoch = training_epoch(impl, optimizer_kind, layout)
    benchmark.group = f"RP-GIN training epoch: CSL 120 graphs, batch 16, {optimizer_kind}, rpfast {layout} parameters"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(epoch, rounds=10, warmup_rounds=2, iterations=1)


@pytest.mark.parametrize("layout", ["flat", "per-tensor"])
@pytest.mark.parametrize("optimizer_kind", ["Adam", "Adam(fused=True)"])
def test_rpgin_training_epoch_alternating(benchmark, optimizer_kind, layout):
    """The same epochs, rpfast's and PyG's in alternating rounds (paired.py)."""
    ours, pyg = training_epoch("rpfast", optimizer_kind, layout), training_epoch("pyg+torch", optimizer_kind)
    benchmark.group = (f"RP-GIN training epoch: CSL 120 graphs, batch 16, {optimizer_kind}, rpfast {layout} "
                       f"parameters (alternating rounds)")
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, ours, pyg, "pyg+torch", rounds=30, warmup_rounds=3, agree=_agree)
