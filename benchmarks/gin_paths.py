"""Which GIN paths pay in the job users run: a CSL training epoch and its validation, per path.

    python benchmarks/gin_paths.py [--threads 1] [--rounds 5]

One process times ``rpfast csl``'s fold 0 (120 training graphs in batches of 16, fused Adam;
validation of 30 graphs) for GIN and RP-GIN in four layouts: the whole model in one C++ call or
layer by layer (``model.fused``), with flat or per-tensor parameters. Prints the best round's
epoch and validation times (ms). The issue-26 rule: a second path stays while it saves at least
20% of such an epoch.
"""
import argparse
import functools
import time

import torch

from rpfast.datasets import csl_batch
from rpfast.experiments.csl.experiment import CSLConfig, _dataset, _splits, accuracy, classification_loss
from rpfast.experiments.training import Batches, adam, fit
from rpfast.nn import GIN, RPGIN, PiSGD


def _model(name: str, flat: bool, whole: bool, generator: torch.Generator) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "GIN":
        model = GIN(1, 16, 5, 10, flat_parameters=flat)
        model.fused = whole
        return model
    model = RPGIN(1, 16, 5, 10, id_dim=10, strategy=PiSGD(eval_samples=5), generator=generator, flat_parameters=flat)
    model.gin.fused = whole
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10, help="epochs timed per round")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    graphs, labels = _dataset(41, 0)
    train, valid = (torch.as_tensor(i) for i in _splits(CSLConfig(), labels)[0])
    dataset = csl_batch(graphs, range(len(graphs)))
    select = functools.lru_cache(maxsize=8)(lambda key: dataset.select(list(key)))

    def make_batch(indices):
        return select(tuple(indices.tolist()))

    best = {}
    for _ in range(args.rounds):
        for name in ("GIN", "RP-GIN"):
            for flat in (True, False):
                for whole in (True, False):
                    generator = torch.Generator().manual_seed(0)
                    model = _model(name, flat, whole, generator)
                    optimizer = adam(model.parameters(), 0.01)
                    batches = Batches(train, lambda chunk: (make_batch(chunk), labels[chunk]), 16, generator)
                    fit(model, batches, classification_loss, epochs=1, optimizer=lambda _: optimizer)  # warm-up
                    start = time.perf_counter()
                    fit(model, batches, classification_loss, epochs=args.epochs, optimizer=lambda _: optimizer)
                    epoch = (time.perf_counter() - start) / args.epochs
                    start = time.perf_counter()
                    for _ in range(args.epochs):
                        accuracy(model, make_batch, labels, valid)
                    validation = (time.perf_counter() - start) / args.epochs
                    key = (name, flat, whole)
                    old = best.get(key, (float("inf"), float("inf")))
                    best[key] = (min(old[0], epoch), min(old[1], validation))
    print(f"| model | parameters | path | epoch (ms) | validation (ms) |  [{args.threads} thread(s)]")
    print("|---|---|---|---:|---:|")
    for (name, flat, whole), (epoch, validation) in best.items():
        print(f"| {name} | {'flat' if flat else 'per-tensor'} | {'whole model' if whole else 'layer by layer'} "
              f"| {1000 * epoch:.2f} | {1000 * validation:.2f} |")


if __name__ == "__main__":
    main()
