"""One RP-GIN training epoch on CSL (120 graphs, batches of 16, Adam) against PyG + plain torch."""
import pytest
import torch

from rpfast.data import csl_batch, csl_dataset
from rpfast.experiments.training import train_epoch
from rpfast.nn import RPGIN

HIDDEN, LAYERS, ID_DIM, BATCH = 16, 5, 10, 16


@pytest.mark.parametrize("impl", ["rpfast", "pyg+torch"])
def test_rpgin_training_epoch(benchmark, impl):
    graphs, labels = csl_dataset()
    train = torch.arange(120)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if impl == "rpfast":
        model = RPGIN(1, HIDDEN, LAYERS, 10, id_dim=ID_DIM, generator=gen)

        def make_batch(indices):
            return csl_batch(graphs, indices)
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
            batch = pyg_data.Batch.from_data_list([datas[i] for i in indices])
            return batch
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    benchmark.group = "RP-GIN training epoch: CSL 120 graphs, batch 16"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(lambda: train_epoch(model, make_batch, labels, train, optimizer, BATCH, gen),
                       rounds=10, warmup_rounds=2, iterations=1)
