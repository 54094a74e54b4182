"""torch.compile(fullgraph=True) on GINConv, GIN, RP-GIN and RelationalPooling (rpfast/ops/_registry.py, rpfast/ops/gin_network_op.py)."""
import copy

import pytest
import torch

from rpfast.datasets import csl_batch, csl_dataset
from rpfast.nn import GIN, RPGIN, GINConv
from rpfast.nn.rp import Exact, PiSGD, RelationalPooling, VecMLP
from rpfast.ops import gin_network_op as library


@pytest.fixture(scope="module")
def graph():
    graphs, _ = csl_dataset()
    return csl_batch(graphs, [0, 20, 45, 77, 101, 149])


def _graph_breaks(model, *args) -> int:
    torch._dynamo.reset()
    return torch._dynamo.explain(model)(*args).graph_break_count


def _train_steps(model, graph, steps=3):
    """Loss, logits and parameter gradients of a few Adam steps (deterministic for GIN)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    target = torch.arange(graph.num_graphs) % 4
    history = []
    for _ in range(steps):
        out = model(graph.x, graph)
        loss = torch.nn.functional.cross_entropy(out, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(out.detach())
    return history


@pytest.mark.parametrize("flat", [False, True])  # GIN(flat_parameters=...)
@pytest.mark.parametrize("hidden", [16, 80])  # the C++ network and the BLAS-loop network
def test_compiled_gin_trains_like_eager(graph, hidden, flat):
    torch.manual_seed(0)
    eager = GIN(1, hidden, 3, 4, flat_parameters=flat)
    compiled_model = copy.deepcopy(eager)
    assert _graph_breaks(copy.deepcopy(eager), graph.x, graph) == 0
    compiled = torch.compile(compiled_model, fullgraph=True)
    for a, b in zip(_train_steps(eager, graph), _train_steps(compiled, graph)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for (name, a), b in zip(eager.state_dict().items(), compiled_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_compiled_flat_gin_with_a_fixed_eps_trains_like_eager(graph):
    """A fixed eps is a buffer outside flat_parameter: the flat op takes it beside the flat tensor."""
    torch.manual_seed(0)
    eager = GIN(1, 16, 3, 4, train_eps=False, flat_parameters=True)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, fullgraph=True)
    for a, b in zip(_train_steps(eager, graph), _train_steps(compiled, graph)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(eager.flat_parameter, compiled_model.flat_parameter, rtol=1e-5, atol=1e-5)


def test_compiled_flat_gin_with_dropout_trains_every_parameter(graph):
    """With dropout the classifier runs outside the op on views of flat_parameter: the op's
    gradient leaves its slots at zero and the classifier's own gradient fills them."""
    torch.manual_seed(0)
    model = GIN(1, 16, 3, 4, dropout=0.5, flat_parameters=True)
    compiled = torch.compile(model, fullgraph=True)
    target = torch.arange(graph.num_graphs) % 4
    x = torch.randn(graph.total_nodes, 1)  # CSL's constant features give the first layer no gradient but rounding
    torch.nn.functional.cross_entropy(compiled(x, graph), target).backward()
    grads = dict(zip(model._flat_layout.paths, model._flat_layout.views(model.flat_parameter.grad)))
    assert grads["classifier.weight"].abs().sum() > 0 and grads["classifier.bias"].abs().sum() > 0
    assert grads["layers.0.linears.0.weight"].abs().sum() > 0
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, graph), model(x, graph), rtol=1e-5, atol=1e-5)


def test_compiled_rpgin_has_no_graph_breaks_and_trains(graph):
    torch.manual_seed(0)
    model = RPGIN(1, 16, 3, 4, id_dim=10, strategy=PiSGD(eval_samples=3))
    assert _graph_breaks(copy.deepcopy(model), graph.x, graph) == 0
    compiled = torch.compile(model, fullgraph=True)
    before = [p.detach().clone() for p in model.parameters()]
    _train_steps(compiled, graph, steps=2)
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()) if p.requires_grad)
    model.eval()
    with torch.no_grad():
        assert compiled(graph.x, graph).shape == (graph.num_graphs, 4)


def test_compiled_ginconv_matches_eager_and_stays_twice_differentiable_in_eager(graph):
    torch.manual_seed(0)
    conv = GINConv(torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)),
                   train_eps=True)
    x = torch.randn(graph.total_nodes, 1)
    assert _graph_breaks(conv, x, graph.edge_index) == 0
    compiled = torch.compile(copy.deepcopy(conv), fullgraph=True)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, ref = compiled(xa, graph.edge_index), conv(xb, graph.edge_index)
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    (grad,) = torch.autograd.grad(conv(xb, graph.edge_index).sum(), xb, create_graph=True)
    grad.square().sum().backward()  # the aggregation's backward is itself differentiable


def test_compiled_relational_pooling_pisgd():
    torch.manual_seed(0)
    B, n = 6, 9
    adj = (torch.rand(B, n, n) < 0.3).float()
    adj = ((adj + adj.transpose(1, 2)) > 0).float()
    x, num_nodes = torch.randn(B, n, 3), torch.randint(4, n + 1, (B,))
    rp = RelationalPooling(VecMLP(n, 1, 3, 16, 4), PiSGD(n, train_samples=2, eval_samples=3))
    assert _graph_breaks(rp, adj, x, num_nodes) == 0
    compiled = torch.compile(rp, fullgraph=True)
    compiled(adj, x, num_nodes).sum().backward()
    assert all(p.grad is not None for p in rp.parameters())
    # every relabeling of a graph gives the same input to an invariant f: RP must match f itself
    rp.eval()
    with torch.no_grad():
        assert compiled(adj, x, num_nodes).shape == (B, 4)


def test_compiling_other_strategies_says_what_to_do():
    rp = RelationalPooling(VecMLP(4, 1, 1, 8, 2), Exact(4))
    compiled = torch.compile(rp, fullgraph=True)
    with pytest.raises(Exception, match="Compile the encoder instead"):
        compiled(torch.zeros(2, 4, 4), torch.zeros(2, 4, 1), torch.tensor([3, 4]))


def test_forwards_without_backward_do_not_accumulate(graph):
    torch.manual_seed(0)
    compiled = torch.compile(GIN(1, 16, 2, 4), fullgraph=True)
    for _ in range(3 * library._activations.keep):
        compiled(graph.x, graph)  # grad mode on, backward never called
    assert len(library._activations) <= library._activations.keep


@pytest.mark.kernels
def test_compiled_whole_model_matches_eager_embeddings_eval_and_cumulative_momentum(graph):
    """The compiled GIN runs as one custom op pair (rpfast::gin_model): embeddings, eval mode,
    BatchNorm's cumulative momentum and the running statistics must match eager mode."""
    torch.manual_seed(0)
    eager = GIN(1, 16, 3, 4, id_dim=5)
    for module in eager.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.momentum = None
    twin = copy.deepcopy(eager)
    compiled = torch.compile(twin, fullgraph=True)
    ids = torch.randint(0, 5, (2, graph.total_nodes))
    for _ in range(3):
        out, ref = compiled(graph.x, graph, ids=ids), eager(graph.x, graph, ids=ids)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        ref.square().sum().backward()
    for (name, a), b in zip(eager.named_parameters(), twin.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    for (name, a), b in zip(eager.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")
    embed = torch.compile(twin.graph_embedding, fullgraph=True)
    torch.testing.assert_close(embed(graph.x, graph, ids=ids), eager.graph_embedding(graph.x, graph, ids=ids),
                               rtol=1e-5, atol=1e-5)
    eager.eval()
    twin.eval()
    with torch.no_grad():
        torch.testing.assert_close(compiled(graph.x, graph, ids=ids), eager(graph.x, graph, ids=ids), rtol=1e-5, atol=1e-5)


def test_compiled_model_follows_a_changed_batch_norm_eps(graph):
    torch.manual_seed(0)
    eager = GIN(1, 16, 2, 4).eval()
    twin = copy.deepcopy(eager)
    compiled = torch.compile(twin, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(graph.x, graph), eager(graph.x, graph))
        for model in (eager, twin):
            model.layers[0].norms[0].eps = 0.5
        torch.testing.assert_close(compiled(graph.x, graph), eager(graph.x, graph))


def test_cumulative_momentum_outside_the_fused_model_is_refused_clearly(graph):
    """Layer by layer (here: wider than the C++ network), a compiled momentum=None would divide by
    a traced counter; it is refused with a message that says what to do."""
    torch.manual_seed(0)
    model = GIN(1, 80, 2, 4)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.momentum = None
    with pytest.raises(Exception) as raised:
        torch.compile(model, fullgraph=True)(graph.x, graph)
    chain, error = [], raised.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("give the BatchNorm a momentum" in text for text in chain)
