"""One epoch of RP-GIN on CSL at the RP paper's protocol, against the paper's own implementation.

The protocol of the paper's code (`Run_Gin_Experiment.py --model-type rpGin`): one fold of 120
training graphs trained full batch (one Adam step per epoch), 5 GIN layers of width 16,
one-hot IDs mod 10, then a validation pass over the 30 held-out graphs averaging 5
relabelings, every epoch. Both sides run the same protocol on the same graphs.
"""
import pytest
import torch

from rpfast.datasets import csl_batch, csl_dataset
from rpfast.experiments.csl.experiment import accuracy, classification_loss
from rpfast.experiments.training import Batches, adam, fit
from rpfast.nn import RPGIN, PiSGD

HIDDEN, LAYERS, ID_DIM, EVAL_SAMPLES = 16, 5, 10, 5
TRAIN, VAL = torch.arange(120), torch.arange(120, 150)


def _rpfast_epoch(graphs, labels):
    torch.manual_seed(0)
    model = RPGIN(1, HIDDEN, LAYERS, 10, id_dim=ID_DIM, strategy=PiSGD(eval_samples=EVAL_SAMPLES),
                  generator=torch.Generator().manual_seed(0), flat_parameters=True)  # as rpfast csl builds it
    optimizer = adam(model.parameters(), 0.01)
    batches = {}

    def make_batch(indices):
        key = tuple(indices.tolist())
        if key not in batches:
            batches[key] = csl_batch(graphs, list(key))
        return batches[key]

    generator = torch.Generator().manual_seed(0)
    train = Batches(TRAIN, lambda chunk: (make_batch(chunk), labels[chunk]), len(TRAIN), generator)

    def epoch():
        fit(model, train, classification_loss, epochs=1, optimizer=lambda _: optimizer)
        return accuracy(model, make_batch, labels, VAL)

    return epoch


def _paper_epoch(graphs, labels):
    from benchmarks.baselines.paper_rpgin import PaperRPGIN, coo_adjmats

    torch.manual_seed(0)
    model = PaperRPGIN(ID_DIM, HIDDEN, LAYERS, 10)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train_mats, val_mats = coo_adjmats(graphs, TRAIN.tolist()), coo_adjmats(graphs, VAL.tolist())
    y_train, y_val = labels[TRAIN], labels[VAL]

    def epoch():
        model.train()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(train_mats), y_train)
        loss.backward()
        optimizer.step()
        model.eval()
        return float((model.inference(val_mats, EVAL_SAMPLES).argmax(-1) == y_val).float().mean())

    return epoch


@pytest.mark.parametrize("impl", ["rpfast", "paper code"])
def test_csl_paper_protocol_epoch(benchmark, impl):
    pytest.importorskip("scipy")
    graphs, labels = csl_dataset()
    epoch = (_rpfast_epoch if impl == "rpfast" else _paper_epoch)(graphs, labels)
    benchmark.group = "RP-GIN epoch at the paper's CSL protocol: 120 graphs full batch + 5-relabeling validation of 30"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(epoch, rounds=30, warmup_rounds=3, iterations=1)
