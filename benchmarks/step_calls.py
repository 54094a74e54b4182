"""What one training step asks of the host, counted on the CPU (issue 43's proxy for launches
and synchronisations on a GPU): the aten calls of a forward + backward (each a kernel launch
on a GPU, where it is not fused) and the device reads among them (scalar reads, ops sized by
the data: each a synchronisation), for rpfast's layers on both backends beside the same model
written by a PyG user.

    python -m benchmarks.step_calls          # prints the markdown table of benchmarks/README.md

A step is counted after one step of warm-up (per-model caches are built once) on a CSL batch of
16 graphs (RP-GIN, GIN, GINConv) or 16 Tox21-sized molecules (Duvenaud).
"""
import argparse
from typing import Callable, Dict, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset
from tests.helpers.assertions import backend
from tests.helpers.device_reads import DeviceReads

BATCH, HIDDEN, LAYERS, ID_DIM = 16, 16, 5, 10


# ops that only describe memory (a new view of a tensor): no kernel runs for them on a GPU
METADATA = {"view", "_unsafe_view", "detach", "transpose", "t", "slice", "select", "expand", "unsqueeze", "squeeze",
            "permute", "as_strided", "alias", "lift_fresh", "_reshape_alias", "split", "unbind", "narrow"}


class AtenCalls(TorchDispatchMode):
    """Counts the aten calls made inside the block: ``calls`` in all, ``launches`` those that
    run a kernel (not a view)."""

    def __init__(self):
        super().__init__()
        self.calls = self.launches = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        self.launches += func._opname not in METADATA
        return func(*args, **(kwargs or {}))


def _csl() -> Tuple[GraphBatch, torch.Tensor]:
    graphs, labels = csl_dataset()
    return csl_batch(graphs, range(BATCH)), labels[:BATCH]


def _rpfast_rpgin():
    from rpfast.nn import RPGIN

    graph, labels = _csl()
    model = RPGIN(1, HIDDEN, LAYERS, 10, id_dim=ID_DIM, generator=torch.Generator().manual_seed(0),
                  flat_parameters=True)
    return model, lambda: torch.nn.functional.cross_entropy(model(graph.x, graph), labels), [graph]


def _pyg_rpgin():
    from torch_geometric.data import Batch, Data

    from benchmarks.baselines.pyg_rpgin import PygRPGIN

    graphs, labels = csl_dataset()
    batch = Batch.from_data_list([Data(x=torch.ones(n, 1), edge_index=ei, num_nodes=n) for ei, n in graphs[:BATCH]])
    model = PygRPGIN(1, HIDDEN, LAYERS, 10, ID_DIM)
    return model, lambda: torch.nn.functional.cross_entropy(model(batch), labels[:BATCH]), [
        batch.x, batch.edge_index, batch.batch, batch.ptr]


def _rpfast_gin():
    from rpfast.nn import GIN

    graph, labels = _csl()
    model = GIN(1, HIDDEN, LAYERS, 10)
    return model, lambda: torch.nn.functional.cross_entropy(model(graph.x, graph), labels), [graph]


def _rpfast_duvenaud():
    from rpfast.datasets.moleculenet import load_tox21
    from rpfast.datasets.molecules import featurize_smiles
    from rpfast.nn import Duvenaud

    smiles = load_tox21().smiles[:BATCH]
    graph = featurize_smiles(smiles).batch(torch.arange(BATCH))
    model = Duvenaud(graph.x.shape[1], 12)
    return model, lambda: model(graph).square().mean(), [graph]


CASES: Dict[str, Callable] = {
    "RP-GIN, CSL batch 16 (rpfast, flat parameters)": _rpfast_rpgin,
    "RP-GIN, CSL batch 16 (a PyG user's: PyG GINConv, randperm IDs)": _pyg_rpgin,
    "GIN, CSL batch 16 (rpfast)": _rpfast_gin,
    "Duvenaud, 16 Tox21 molecules (rpfast)": _rpfast_duvenaud,
}


def _device_data(model, inputs):
    data = list(model.parameters()) + list(model.buffers())
    for value in inputs:
        if isinstance(value, GraphBatch):
            data += [t for k, v in value.__dict__.items() if not k.startswith("_lazy_host")
                     for t in (v if isinstance(v, tuple) else [v]) if isinstance(t, torch.Tensor)]
        elif isinstance(value, torch.Tensor):
            data.append(value)
    return data


def count(case: Callable, kind: str) -> Tuple[int, int, int]:
    """``(aten calls, calls that run a kernel, device reads)`` of one training step (forward +
    backward) of ``case``."""
    model, loss, inputs = case()
    with backend(kind):
        loss().backward()  # warm-up: per-model caches
        model.zero_grad()
        with AtenCalls() as calls, DeviceReads(_device_data(model, inputs)) as reads:
            loss().backward()
    return calls.calls, calls.launches, len(reads.waits)


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print("| training step (forward + backward) | backend | aten calls | of which run a kernel | device reads |")
    print("|---|---|---:|---:|---:|")
    for name, case in CASES.items():
        kinds = ("auto",) if "PyG" in name else ("auto", "torch")
        for kind in kinds:
            calls, launches, reads = count(case, kind)
            label = "torch (PyG)" if "PyG" in name else {"auto": "kernels", "torch": "composed"}[kind]
            print(f"| {name} | {label} | {calls} | {launches} | {reads} |")


if __name__ == "__main__":
    main()
