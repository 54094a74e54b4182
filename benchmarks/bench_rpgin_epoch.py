"""One RP-GIN training epoch on CSL (120 graphs, batches of 16, Adam) against PyG + plain torch.

Both sides use the same optimizer, in two variants: ``torch.optim.Adam`` as most scripts
write it (on CPU a Python loop over the ~40 parameter tensors, ~1.5 ms a step here, the same
for both models) and ``Adam(fused=True)`` (one kernel for all tensors, what rpfast's
commands use)."""
import pytest
import torch

from rpfast.data import csl_batch, csl_dataset
from rpfast.experiments.training import train_epoch
from rpfast.nn import RPGIN
from paired import paired

HIDDEN, LAYERS, ID_DIM, BATCH = 16, 5, 10, 16


def training_epoch(impl: str, optimizer_kind: str = "Adam"):
    """A function running one training epoch of ``impl`` ("rpfast" or "pyg+torch")."""
    graphs, labels = csl_dataset()
    train = torch.arange(120)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if impl == "rpfast":
        model = RPGIN(1, HIDDEN, LAYERS, 10, id_dim=ID_DIM, generator=gen)
        dataset = csl_batch(graphs, range(len(graphs)))  # the dataset as one batch, sliced per step

        def make_batch(indices):
            return dataset.select(indices)
    else:
        pyg_data = pytest.importorskip("torch_geometric.data")
        from baselines.pyg_rpgin import PygRPGIN

        base = PygRPGIN(1, HIDDEN, LAYERS, 10, ID_DIM)
        datas = [pyg_data.Data(x=torch.ones(n, 1), edge_index=ei, num_nodes=n) for ei, n in graphs]

        class Adapter(torch.nn.Module):  # the training loop calls model(x, batch)
            def __init__(self):
                super().__init__()
                self.base = base

            def forward(self, x, batch):
                return self.base(batch)

        model = Adapter()

        def make_batch(indices):
            return pyg_data.Batch.from_data_list([datas[i] for i in indices])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, fused=optimizer_kind != "Adam")
    return lambda: train_epoch(model, make_batch, labels, train, optimizer, BATCH, gen)


@pytest.mark.parametrize("optimizer_kind", ["Adam", "Adam(fused=True)"])
@pytest.mark.parametrize("impl", ["rpfast", "pyg+torch"])
def test_rpgin_training_epoch(benchmark, impl, optimizer_kind):
    epoch = training_epoch(impl, optimizer_kind)
    benchmark.group = f"RP-GIN training epoch: CSL 120 graphs, batch 16, {optimizer_kind}"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(epoch, rounds=10, warmup_rounds=2, iterations=1)


@pytest.mark.parametrize("optimizer_kind", ["Adam", "Adam(fused=True)"])
def test_rpgin_training_epoch_alternating(benchmark, optimizer_kind):
    """The same epochs, rpfast's and PyG's in alternating rounds (paired.py)."""
    ours, pyg = training_epoch("rpfast", optimizer_kind), training_epoch("pyg+torch", optimizer_kind)
    benchmark.group = f"RP-GIN training epoch: CSL 120 graphs, batch 16, {optimizer_kind} (alternating rounds)"
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, ours, pyg, "pyg+torch", rounds=30, warmup_rounds=3)
