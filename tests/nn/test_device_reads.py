"""Training steps that never wait for the host (issue 43, part 1).

Two proxies for a GPU, both on the CPU, on both backends:

* the ``meta`` device, where tensors have shapes and no data: any read of the data fails, so a
  layer whose forward + backward completes there computes its sizes from shapes and from
  host-side metadata only;
* :class:`~tests.helpers.device_reads.DeviceReads` on the CPU, which counts the ops that would
  make a GPU step wait (scalar reads, nonzero, unique, bincount, ...) on the step's data: none
  in a steady-state step (the second: a first step may build per-model caches once).

A layer that cannot yet is listed in ``WAITS_FOR_THE_HOST`` with the reason (also in the README);
the test then expects it to fail, so a fix shows up as an unexpected pass. ``HOST_COPY`` lists
the layers the CPU count cannot judge (see there).
"""
import pytest
import torch
from torch import nn

from rpfast.data import GraphBatch
from rpfast.nn import RPDuvenaud, RPGNN, Exact, KAry, PiSGD, RelationalPooling, VecMLP
from tests.helpers.assertions import backend
from tests.helpers.device_reads import BlockingUploads, DeviceReads
from tests.helpers.layer_cases import layer_cases, small_batch

META = torch.device("meta")


class NodeGCN(nn.Module):
    """A user's GNN as RPGNN wraps it: ``relu((A + I) X W)`` per node, a linear head per node
    (node rows, so it needs no graph count that only the data could tell)."""

    def __init__(self, in_dim: int):
        super().__init__()
        self.lin, self.head = nn.Linear(in_dim, 8), nn.Linear(8, 2)

    def forward(self, x, edge_index, batch):
        z = self.lin(x)
        return self.head(torch.relu(z.index_add(0, edge_index[1], z[edge_index[0]])))


def _with_elements(graph: GraphBatch) -> GraphBatch:
    graph.extras["element"] = torch.tensor([0, 1, 0, 0, 1, 0, 2, 0, 2])
    return graph


def _host_sizes(make):
    """A dense case with its sizes given on the host (a list), as a step on a device gives them."""
    def made():
        model, inputs = make()
        adj, x, sizes = inputs
        return model, (adj, x, sizes.tolist())
    return made


def _cases() -> dict:
    cases = {name: _host_sizes(make) if name.startswith("RP-") else make for name, make in layer_cases().items()}
    g = small_batch(torch.float64)
    dense = (g.dense_adj(), g.dense_x(), g.num_nodes)
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    cases.update({
        "RPGNN": lambda: (RPGNN(NodeGCN(3 + 4).double(), 4, strategy=PiSGD(train_samples=2), generator=gen()),
                          (g.x, g)),
        "RPGNN-Exact": lambda: (RPGNN(NodeGCN(3 + 4).double(), 4, strategy=Exact(4), generator=gen()), (g.x, g)),
        "RPDuvenaud": lambda: (RPDuvenaud(3, 2, 3, conv=(8,), dense=8, generator=gen()).double(),
                               (_with_elements(small_batch(torch.float64)),)),
        "RP-KAry-sampled": lambda: (RelationalPooling(VecMLP(2, dense[0].shape[-1], 3, 8, 2).double(),
                                                      KAry(2, subsets="sample", train_samples=3), generator=gen()),
                                    (dense[0], dense[1], dense[2].tolist())),
    })
    return cases


CASES = _cases()

# layer -> why its step still reads the device (README.md, "Devices")
WAITS_FOR_THE_HOST = {
    "RP-Oriented": "orders the vertices by a search over the edges on the host: the dense input is copied there",
}
# layers whose host-side work (traversals, enumerations) reads the batch's host copy
# (GraphBatch.host): on a device that is the CPU batch it was moved from, and the meta test shows
# the step reads nothing else; on the CPU the batch is its own host copy, so the counter sees it
HOST_COPY = {"SubgraphRP": "orders subgraphs on the batch's host copy, which on the CPU is the batch itself",
             "RPGNN-Exact": "inverts its relabelings on the batch's host copy, which on the CPU is the batch itself"}


def _marks(name: str, counted: bool = False):
    reason = WAITS_FOR_THE_HOST.get(name)
    if counted and name in HOST_COPY:
        return [pytest.mark.skip(reason=HOST_COPY[name] + " (the meta test covers it)")]
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


PARAMS = [pytest.param(name, marks=_marks(name)) for name in sorted(CASES)]
COUNTED = [pytest.param(name, marks=_marks(name, counted=True)) for name in sorted(CASES)]


def _step(model, inputs):
    """A training step's forward and backward, or in eval mode a forward (no gradients)."""
    if not model.training:
        with torch.no_grad():
            return model(*inputs)
    out = model(*inputs)
    out.square().sum().backward()
    return out


def _moved(value, device):
    return value.to(device) if isinstance(value, (torch.Tensor, GraphBatch)) else value


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["auto", "torch"])
@pytest.mark.parametrize("name", PARAMS)
def test_a_step_runs_on_meta(name, kind, mode):
    """Forward + backward (eval: forward) with every tensor on ``meta``: shapes only, nothing to read."""
    model, inputs = CASES[name]()
    model = model.to(META).train(mode == "train")
    with backend(kind):
        out = _step(model, [_moved(v, META) for v in inputs])
    assert out.device == META
    if mode == "train":
        grads = [p.grad for p in model.parameters() if p.grad is not None]  # a degree absent from the batch has none
        assert grads and all(g.device == META for g in grads)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["auto", "torch"])
@pytest.mark.parametrize("name", PARAMS)
def test_a_step_never_waits_for_an_upload(name, kind, mode):
    """What a step computes on the host (relabelings, groups, orders) reaches the device without
    a blocking copy: on ``meta``, no move of host data without ``non_blocking`` and no op mixing
    host and device tensors (on a GPU each is a copy that waits, and an error under
    ``torch.cuda.set_sync_debug_mode("error")``)."""
    model, inputs = CASES[name]()
    model = model.to(META).train(mode == "train")
    inputs = [_moved(v, META) for v in inputs]
    with backend(kind):
        _step(model, inputs)  # per-model caches are built once, here
        model.zero_grad()
        with BlockingUploads() as watch:
            _step(model, inputs)
    assert watch.uploads == []


def _device_data(model, inputs):
    """The tensors a step on a device would hold there: the model's parameters and buffers, the
    input tensors and every tensor of the input batches but their host-side views."""
    data = list(model.parameters()) + list(model.buffers())
    for value in inputs:
        if isinstance(value, torch.Tensor):
            data.append(value)
        elif isinstance(value, GraphBatch):
            for key, item in value.__dict__.items():
                items = item.values() if isinstance(item, dict) else item if isinstance(item, tuple) else [item]
                data += [t for t in items if isinstance(t, torch.Tensor) and not key.startswith("_lazy_host")]
    return data


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["auto", "torch"])
@pytest.mark.parametrize("name", COUNTED)
def test_a_step_never_waits_for_the_device(name, kind, mode):
    model, inputs = CASES[name]()
    model.train(mode == "train")
    with backend(kind):
        _step(model, inputs)  # per-model caches are built once, here
        model.zero_grad()
        with DeviceReads(_device_data(model, inputs)) as reads:
            _step(model, inputs)
    assert reads.waits == []


def test_the_counter_sees_reads_of_device_data_only():
    """DeviceReads itself: a scalar read and a bincount of device data count, and so does a read
    of what was computed from it; the same on host views, on data made on the host and on draws
    from a CPU generator do not."""
    g = small_batch()
    g.host_ptr  # noqa: B018 (built before the block, as a step would)
    with DeviceReads(_device_data(torch.nn.Linear(1, 1), [g])) as reads:
        int(g.ptr[-1])
        torch.bincount(g.batch)
        bool((g.x * 2).sum() > 0)
        int(g.host_ptr[-1])
        int(torch.tensor([3, 4]).max())
        int(torch.randint(0, 9, (1,), generator=torch.Generator().manual_seed(0))[0])
    assert reads.waits == ["_local_scalar_dense.default", "bincount.default", "_local_scalar_dense.default"]
