"""fit's cuda_graphs mode (issue 43, part 3), checked on the CPU.

A CUDA graph cannot be captured here, so :class:`RerunGraph` stands in: its capture runs the step,
and each replay runs the step's Python again on the static batch, as a CUDA replay runs the
recorded kernels on it. Everything else is the mode itself: the batch signatures, the copies
into the static batch, the seed tape (relabelings drawn from a buffer, refilled before each
replay), the guard that sends host-side grouping to eager steps, and the undo of a failed
capture. The same training must give the same losses, bit for bit, as without the mode.
"""
import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.experiments.step_graphs import StepGraphs, signature
from rpfast.experiments.training import Batches, adam, fit
from rpfast.nn import GIN, RPGIN, RPDuvenaud, RootedRP
from rpfast.ops.seed_tape import SeedTape
from rpfast.ops.random import seed_from_generator
from tests.helpers.assertions import backend


class RerunGraph:
    """A CPU stand-in for ``torch.cuda.CUDAGraph``: a CUDA capture records the step and its first
    replay runs it, so here the capture runs it and the first replay does nothing; later replays
    run the step again and write its loss into the captured loss tensor."""

    def capture(self, step):
        self.step, self.fresh = step, True
        self.loss = step()
        return self.loss

    def replay(self):
        if self.fresh:
            self.fresh = False
            return
        self.loss.copy_(self.step())


def _circulants(count: int, n: int = 9, seed: int = 0):
    """``count`` 4-regular circulant graphs C_n(1, s), s in {2, 3, 4}, randomly relabeled: one
    shape (n nodes, 4n directed edges), different edges; labels s - 2."""
    gen = torch.Generator().manual_seed(seed)
    graphs, labels = [], []
    for i in range(count):
        s = 2 + i % 3
        relabel = torch.randperm(n, generator=gen)
        edges = [(v, (v + d) % n) for v in range(n) for d in (1, s)]
        ei = relabel[torch.tensor(edges).t()]
        graphs.append((torch.cat([ei, ei.flip(0)], 1), n))
        labels.append(s - 2)
    x = [torch.ones(n, 2, dtype=torch.float64) for _ in range(count)]
    return GraphBatch.from_edge_lists(graphs, x=x), torch.tensor(labels)


def _element_batch(graph: GraphBatch) -> GraphBatch:
    graph.extras["element"] = torch.arange(graph.total_nodes) % 3
    return graph


MODELS = {
    "RPGIN": lambda: RPGIN(2, 8, 2, 3, id_dim=9, generator=torch.Generator().manual_seed(1)).double(),
    "GIN": lambda: GIN(2, 8, 2, 3).double(),
    "RPDuvenaud": lambda: RPDuvenaud(2, 3, 3, conv=(8,), dense=8, generator=torch.Generator().manual_seed(1)).double(),
    "RootedRP": lambda: RootedRP(2, 4, 3, 3, train_roots=2, generator=torch.Generator().manual_seed(1)).double(),
}


def _train(name: str, cuda_graphs, epochs: int = 3):
    """Train model ``name`` on 14 circulants in batches of 4 (three of 4, one of 2: two shapes)."""
    torch.manual_seed(0)
    model = MODELS[name]()
    data, labels = _circulants(14)

    def make(chunk):
        graph = data.select(chunk.tolist())
        return (_element_batch(graph) if name == "RPDuvenaud" else graph), labels[chunk]

    def loss(module, batch):
        graph, y = batch
        out = module(graph) if name == "RPDuvenaud" else module(graph.x, graph)
        return torch.nn.functional.cross_entropy(out, y) if out.shape[-1] > 1 else (out.squeeze(-1) - y).square().mean()

    batches = Batches(torch.arange(14), make, size=4, generator=torch.Generator().manual_seed(2), min_size=2)
    result = fit(model, batches, loss, epochs=epochs, optimizer=lambda p: adam(p, 0.01),
                 schedule=lambda o: torch.optim.lr_scheduler.StepLR(o, 1, 0.5), cuda_graphs=cuda_graphs)
    return result, torch.cat([p.detach().reshape(-1) for p in result.model.parameters()])


@pytest.mark.parametrize("name, kind", [("RPGIN", "auto"), ("GIN", "auto"), ("GIN", "torch")])
def test_replayed_steps_train_exactly_as_eager_steps(name, kind):
    with backend(kind):
        eager, eager_weights = _train(name, False)
        replayed, replayed_weights = _train(name, RerunGraph)
    assert replayed.losses == eager.losses
    assert torch.equal(replayed_weights, eager_weights)
    summary = replayed.step_graphs
    assert summary["captured"] == 2, summary  # batches of 4 and of 2
    assert summary["eager_reasons"] == [] and summary["replays"] == 12 - summary["eager_steps"]
    assert summary["eager_steps"] == 2  # each shape's first step is the warm-up
    assert eager.step_graphs is None


@pytest.mark.parametrize("name, kind, reason", [
    # without the relabeling kernels the IDs are drawn on the host: replays would keep the first ones
    ("RPGIN", "torch", "drawing relabelings on the host"),
    # roots drawn from the module's generator, then uploaded (refused): the eager step draws them again
    ("RootedRP", "auto", "uploading host data"),
    # degree and element groups made on the host
    ("RPDuvenaud", "auto", "reads the batch's data on the host"),
])
def test_a_step_that_computes_on_the_host_runs_eagerly_and_says_why(name, kind, reason):
    """Refused in the capture, run eagerly instead, with every draw a plain run makes: the same
    losses and weights, bit for bit."""
    with backend(kind):
        eager, eager_weights = _train(name, False)
        replayed, replayed_weights = _train(name, RerunGraph)
    assert replayed.losses == eager.losses and torch.equal(replayed_weights, eager_weights)
    summary = replayed.step_graphs
    assert summary["captured"] == 0 and summary["eager_steps"] == 12
    assert any(reason in r for r in summary["eager_reasons"]), summary


def test_cuda_graphs_needs_a_cuda_model_and_one_process():
    with pytest.raises(ValueError, match="CUDA device"):
        _train("GIN", True, epochs=1)
    with pytest.raises(TypeError, match="graph class"):
        _train("GIN", "yes", epochs=1)


def _signed_seed(generator):
    """A kernel seed as it crosses the op schema (int64)."""
    return (seed_from_generator(generator) + 2**63) % 2**64 - 2**63


def test_the_seed_tape_draws_what_the_eager_draws_would():
    gen, reference = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    draw = lambda: _signed_seed(gen)  # noqa: E731
    tape = SeedTape("cpu", capacity=2)
    with tape.recording():
        first, second = tape.slot(gen, draw), tape.slot(gen, draw)
    tape.captured()
    assert [int(first), int(second)] == [_signed_seed(reference), _signed_seed(reference)]
    tape.refill()  # the next step's seeds, in the order they were taken
    assert tape.buffer.tolist() == [_signed_seed(reference), _signed_seed(reference)]
    with tape.replaying():
        assert tape.slot(gen, draw).data_ptr() == first.data_ptr()
        tape.slot(gen, draw)
    with pytest.raises(RuntimeError, match="another order"), tape.replaying():
        tape.slot(torch.Generator(), draw)
    with pytest.raises(Exception, match="more than 2"), tape.recording():
        tape.slot(gen, draw)
    with pytest.raises(ValueError, match="capacity must be a positive integer"):
        SeedTape("cpu", capacity=0)


@pytest.mark.parametrize("kind", ["auto", "torch"])
def test_a_seed_in_a_buffer_draws_what_the_seed_does(kind):
    from rpfast.ops.random import positions_op

    g = _circulants(3)[0]
    with backend(kind):
        plain = positions_op(g.ptr, g.host_ptr, -12345, None, 2, 9, g.total_nodes, g.n_max)
        from_buffer = positions_op(g.ptr, g.host_ptr, 0, torch.tensor([-12345]), 2, 9, g.total_nodes, g.n_max)
    assert torch.equal(plain, from_buffer)


def test_a_failed_capture_puts_the_generators_back():
    gen = torch.Generator().manual_seed(7)
    expected = seed_from_generator(torch.Generator().manual_seed(7))
    tape = SeedTape("cpu")
    with tape.recording():
        tape.slot(gen, lambda: _signed_seed(gen))
        tape.slot(None, lambda: _signed_seed(None))
    tape.undo()
    assert seed_from_generator(gen) == expected and tape.draws == []


def test_the_signature_keys_shapes_and_host_sizes_not_data():
    data, labels = _circulants(6)
    a, b = data.select([0, 1]), data.select([2, 3])
    key_a, leaves_a = signature((a, labels[:2]))
    key_b, leaves_b = signature((b, labels[2:4]))
    assert key_a == key_b and len(leaves_a) == len(leaves_b)
    assert any(leaf is a.edge_index for leaf in leaves_a)
    edge = torch.tensor([[0], [1]])
    uneven = GraphBatch.from_edge_lists([(edge, 9), (edge, 9)])
    other = GraphBatch.from_edge_lists([(edge, 8), (edge, 10)])
    assert signature(uneven)[0] != signature(other)[0]  # same totals, other graph sizes
    graphs = StepGraphs(torch.nn.Linear(1, 1), lambda m, b: m.weight.sum(), torch.optim.SGD([torch.zeros(1)], 0.1),
                        torch.device("cpu"), graph_type=RerunGraph)
    graphs.step((object(),))  # a batch it cannot copy: an eager step, and why
    assert graphs.summary()["eager_steps"] == 1 and "cannot copy" in graphs.summary()["eager_reasons"][0]


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_check.sh)")


@needs_gpu
def test_rpgin_steps_replayed_on_the_gpu_train_as_eager_steps_do():  # pragma: no cover - GPU only
    def train(cuda_graphs):
        torch.manual_seed(0)
        model = MODELS["RPGIN"]().float().cuda()
        data, labels = _circulants(14)
        data = GraphBatch.from_edge_lists([(data.select([i]).edge_index, 9) for i in range(14)],
                                          x=[torch.ones(9, 2) for _ in range(14)])
        labels = labels.cuda()
        batches = Batches(torch.arange(14), lambda c: (data.select(c.tolist()).to("cuda"), labels[c.cuda()]), size=4,
                          generator=torch.Generator().manual_seed(2), min_size=2)
        return fit(model, batches, lambda m, b: torch.nn.functional.cross_entropy(m(b[0].x, b[0]), b[1]), epochs=3,
                   optimizer=lambda p: adam(p, 0.01, capturable=True), cuda_graphs=cuda_graphs)

    eager, replayed = train(False), train(True)
    assert replayed.step_graphs["captured"] == 2, replayed.step_graphs
    assert replayed.losses == pytest.approx(eager.losses, rel=1e-4)
