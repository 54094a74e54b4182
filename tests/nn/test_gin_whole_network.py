"""The WHOLE path (rpfast/ops/gin_network.py, rpfast/nn/runtime/binding.py): a GIN as one C++ call and one node, against
the same GIN layer by layer."""
import copy

import pytest
import torch

from tests.helpers.assertions import assert_thread_invariant
from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset
from rpfast.nn import GIN
from rpfast.nn.runtime.binding import binding
from rpfast.nn.runtime.plan import FUSED_MAX_WIDTH, Path
from rpfast.ops import gin_network as gin_network_module


def _batch():
    graphs, _ = csl_dataset()
    return csl_batch(graphs, [0, 17, 33, 71, 149])


def _pair(in_dim, id_dim, hidden, dtype, mlp_layers=2, layers=3):
    torch.manual_seed(hidden + in_dim)
    fused = GIN(in_dim, hidden, layers, 4, id_dim=id_dim, mlp_layers=mlp_layers).to(dtype)
    for module in fused.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.normal_()
    for layer in fused.layers:
        if layer.eps is not None:
            layer.eps.data.fill_(0.25)
    unfused = copy.deepcopy(fused)
    unfused.fused = False
    return fused, unfused


def _run(model, x, graph, ids, weight):
    x = x.clone().requires_grad_() if x is not None else None
    out = model(x, graph, ids=ids)
    (out * weight).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return out, grads, x.grad if x is not None else None


# (in_dim, id_dim, replicas, hidden): IDs only (RP-GIN without features), IDs and one shared
# feature copy (RP-GIN on CSL), per-replica features, features only; 20 is not a multiple of
# the 16-wide register blocks, 80 takes the BLAS path (wider than FUSED_MAX_WIDTH).
CASES = [(0, 5, 3, 8), (1, 10, 4, 16), (3, 0, 2, 20), (2, 0, 1, 80), (4, 6, 2, 64)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("in_dim,id_dim,replicas,hidden", CASES)
def test_fused_network_matches_layer_by_layer(in_dim, id_dim, replicas, hidden, training, dtype):
    graph = _batch()
    fused, unfused = _pair(in_dim, id_dim, hidden, dtype)
    fused.train(training)
    unfused.train(training)
    N = graph.total_nodes
    x = None
    if in_dim:
        x = torch.randn((replicas if id_dim == 0 else 1), N, in_dim, dtype=dtype)
        x = x[0] if id_dim else x
    ids = torch.randint(0, id_dim, (replicas, N)) if id_dim else None
    weight = torch.randn(replicas, graph.num_graphs, 4, dtype=dtype)
    if x is not None and x.dim() == 2 and ids is None:
        weight = weight[0]
    out, grads, grad_x = _run(fused, x, graph, ids, weight)
    ref, ref_grads, ref_grad_x = _run(unfused, x, graph, ids, weight)
    tol = {"rtol": 1e-9, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 2e-4, "atol": 2e-4}
    torch.testing.assert_close(out, ref, **tol)
    for name, g, r in zip([n for n, _ in fused.named_parameters()], grads, ref_grads):
        torch.testing.assert_close(g, r, **tol, msg=lambda m: f"{name}: {m}")
    if grad_x is not None:
        torch.testing.assert_close(grad_x, ref_grad_x, **tol)
    for (name, a), b in zip(fused.state_dict().items(), unfused.state_dict().values()):
        torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{name}: {m}")


@pytest.mark.kernels
def test_fused_network_is_one_autograd_node():
    graph = _batch()
    model, _ = _pair(1, 10, 16, torch.float32)
    out = model(graph.x, graph, ids=torch.randint(0, 10, (2, graph.total_nodes)))
    nodes, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in nodes:
            nodes.add(node)
            stack.extend(next_fn for next_fn, _ in node.next_functions)
    names = sorted(type(n).__name__ for n in nodes if "AccumulateGrad" not in type(n).__name__)
    assert names == ["_WholeNetworkBackward"]  # layers, readouts and classifier: one node


@pytest.mark.kernels
def test_fused_network_bitwise_identical_across_threads():
    graph = _batch()
    model, _ = _pair(1, 10, 16, torch.float32)
    ids = torch.randint(0, 10, (3, graph.total_nodes))

    def step():
        trial = copy.deepcopy(model)
        out = trial(graph.x, graph, ids=ids)
        out.square().sum().backward()
        return [out] + [p.grad for p in trial.parameters()] + [trial.layers[0].norms[0].running_var]

    assert_thread_invariant(step)


def test_two_forwards_before_one_backward_and_retain_graph():
    """Gradient accumulation over two batches, and a second backward through a retained graph:
    every forward keeps its own saved activations."""
    graph = _batch()
    fused, unfused = _pair(1, 10, 16, torch.float64)
    ids_a = torch.randint(0, 10, (1, graph.total_nodes))
    ids_b = torch.randint(0, 10, (1, graph.total_nodes))
    for model in (fused, unfused):
        loss = model(graph.x, graph, ids=ids_a).square().sum() + model(graph.x, graph, ids=ids_b).sin().sum()
        loss.backward(retain_graph=True)
        loss.backward()
    for a, b in zip(fused.parameters(), unfused.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_double_backward_raises_a_clear_error():
    graph = _batch()
    model, _ = _pair(1, 0, 16, torch.float64)
    x = graph.x.double().requires_grad_()
    (grad,) = torch.autograd.grad(model(x, graph).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiable twice|once_differentiable|does not require grad"):
        grad.sum().backward()


def test_layer_by_layer_double_backward_raises_a_clear_error():
    graph = _batch()
    _, model = _pair(1, 0, 16, torch.float64)
    x = graph.x.double().requires_grad_()
    (grad,) = torch.autograd.grad(model(x, graph).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiable twice|once_differentiable|does not require grad"):
        grad.square().sum().backward()


def test_training_needs_two_nodes_and_empty_eval_works():
    model, _ = _pair(1, 0, 8, torch.float32)
    single = GraphBatch.from_edge_lists([(torch.zeros(2, 0, dtype=torch.int64), 1)])
    with pytest.raises(ValueError, match="more than one node"):
        model.train()(torch.ones(1, 1), single)
    empty = GraphBatch.from_edge_lists([])
    assert model.eval()(torch.zeros(0, 1), empty).shape == (0, 4)


@pytest.mark.kernels
def test_workspaces_return_to_a_bounded_pool():
    graph = _batch()
    model, _ = _pair(1, 10, 16, torch.float32)
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    for _ in range(10):
        model(graph.x, graph, ids=ids).sum().backward()
    assert 1 <= len(gin_network_module._free_networks[torch.float32]) <= gin_network_module._POOL_SIZE


def _train_steps(model, graph, ids, steps=3):
    """A few Adam steps; returns the last logits and the final state."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    x = graph.x.to(model.classifier.weight.dtype)
    for _ in range(steps):
        out = model(x, graph, ids=ids)
        optimizer.zero_grad()
        out.square().sum().backward()
        optimizer.step()
    return out.detach(), copy.deepcopy(model.state_dict())


def _assert_same_training(fused, unfused, graph, ids):
    out, state = _train_steps(fused, graph, ids)
    ref, ref_state = _train_steps(unfused, graph, ids)
    torch.testing.assert_close(out, ref)
    for name in ref_state:
        torch.testing.assert_close(state[name], ref_state[name], msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("change", ["data", "module", "momentum", "dtype", "eps", "bias", "layers"])
def test_the_bound_network_follows_changes_to_the_module(change):
    """The whole model is bound to C++ once; replacing a storage, a module, a setting or the
    dtype after training started must take effect exactly as in the layer-by-layer model."""
    graph = _batch()
    fused, unfused = _pair(1, 10, 16, torch.float64)
    ids = torch.randint(0, 10, (2, graph.total_nodes))
    _assert_same_training(fused, unfused, graph, ids)
    for model in (fused, unfused):
        torch.manual_seed(1)
        layer = model.layers[1]
        if change == "data":
            layer.linears[0].weight.data = torch.randn(16, 16, dtype=torch.float64)
        elif change == "module":
            layer.norms[1] = torch.nn.BatchNorm1d(16, momentum=0.5).double()
        elif change == "momentum":
            layer.norms[0].momentum = None  # cumulative average: 1 / num_batches_tracked
        elif change == "dtype":
            model.float()
        elif change == "eps":
            layer.eps = None  # the fixed eps buffer from now on
            layer.fixed_eps.fill_(0.5)
        elif change == "bias":
            model.classifier.bias = None
        else:
            model.layers.append(copy.deepcopy(model.layers[2]))
    if change == "layers":  # the classifier now reads one more layer
        for model in (fused, unfused):
            torch.manual_seed(2)
            model.classifier = torch.nn.Linear(model.classifier.in_features + 16, 4).double()
    _assert_same_training(fused, unfused, graph, ids)


def test_cumulative_batch_norm_momentum_matches_torch():
    graph = _batch()
    fused, unfused = _pair(1, 10, 16, torch.float64)
    for model in (fused, unfused):
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.momentum = None
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    _assert_same_training(fused, unfused, graph, ids)
    assert int(fused.layers[0].norms[0].num_batches_tracked) == 3


def test_dropout_and_embeddings_with_the_bound_network():
    graph = _batch()
    fused, unfused = _pair(1, 10, 16, torch.float64)
    for model in (fused, unfused):
        model.dropout.p = 0.5
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    torch.manual_seed(3)
    out = fused(graph.x, graph, ids=ids)
    torch.manual_seed(3)
    torch.testing.assert_close(out, unfused(graph.x, graph, ids=ids))
    torch.testing.assert_close(fused.graph_embedding(graph.x, graph, ids=ids), unfused.graph_embedding(graph.x, graph, ids=ids))


def test_a_copy_of_a_trained_model_trains_on_its_own_tensors():
    graph = _batch()
    fused, _ = _pair(1, 10, 16, torch.float32)
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    _train_steps(fused, graph, ids)
    twin = copy.deepcopy(fused)
    before = copy.deepcopy(fused.state_dict())
    _train_steps(twin, graph, ids)
    for name, value in fused.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert not torch.equal(twin.classifier.weight, fused.classifier.weight)


@pytest.mark.kernels
def test_ids_out_of_range_are_refused_by_the_bound_network():
    graph = _batch()
    fused, _ = _pair(1, 10, 16, torch.float32)
    bad = torch.zeros(1, graph.total_nodes, dtype=torch.int64)
    bad[0, 7] = 10
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 10\), got 10"):
        fused(graph.x, graph, ids=bad)
    state = copy.deepcopy(fused.state_dict())
    assert all(torch.equal(v, state[k]) for k, v in fused.state_dict().items())


def test_in_place_changes_between_forward_and_backward_are_refused():
    """The C++ backward reads x, ids and the weights again: changing one in place in between
    must raise, as autograd does for torch's own ops, instead of giving wrong gradients."""
    graph = _batch()
    fused, _ = _pair(1, 10, 16, torch.float32)
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    loss = fused(graph.x, graph, ids=ids).sum()
    ids.random_(0, 10)  # a reused ID buffer refilled for the next relabeling
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    loss = fused(graph.x, graph, ids=ids).sum()
    with torch.no_grad():
        fused.layers[1].linears[0].weight.mul_(0.5)  # e.g. an optimizer step before backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_parametrized_weights_run_layer_by_layer():
    """torch.nn.utils.parametrize computes a weight anew at every access: such a model must not
    be bound once, and trains exactly as the layer-by-layer model."""
    from torch.nn.utils import parametrize

    class Scaled(torch.nn.Module):
        def forward(self, w):
            return 0.5 * w

    graph = _batch()
    fused, unfused = _pair(1, 10, 16, torch.float64)
    for model in (fused, unfused):
        parametrize.register_parametrization(model.layers[1].linears[0], "weight", Scaled())
    _assert_same_training(fused, unfused, graph, torch.randint(0, 10, (1, graph.total_nodes)))


@pytest.mark.kernels
def test_a_submodule_added_where_there_was_none_is_noticed():
    graph = _batch()
    fused, _ = _pair(1, 10, 16, torch.float32)
    ids = torch.randint(0, 10, (1, graph.total_nodes))
    fused(graph.x, graph, ids=ids)
    assert binding(fused).path is Path.WHOLE
    fused.layers[0].edge = torch.nn.Linear(3, 16)  # a GINE layer now: it needs edge_attr
    assert binding(fused).path is Path.LAYERS
    with pytest.raises(ValueError, match="needs edge features"):
        fused(graph.x, graph, ids=ids)


def test_half_precision_gets_the_layer_paths_message():
    graph = _batch()
    fused, _ = _pair(1, 0, 16, torch.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        fused.half()(graph.x.half(), graph)


def test_kernel_objects_are_freed_without_the_cycle_collector():
    import gc
    import weakref

    from rpfast import _backend

    graph = _batch()
    fused, _ = _pair(1, 10, 16, torch.float32)
    fused(graph.x, graph, ids=torch.randint(0, 10, (1, graph.total_nodes))).sum().backward()
    obj = _backend.create("GINNetworkF32")
    obj.forward  # the method is cached on the object
    ref = weakref.ref(obj)
    gc.disable()
    try:
        del obj
        assert ref() is None
    finally:
        gc.enable()


@pytest.mark.kernels
@pytest.mark.parametrize("hidden,path", [(16, Path.WHOLE), (FUSED_MAX_WIDTH, Path.WHOLE),
                                         (FUSED_MAX_WIDTH + 1, Path.LAYERS)])
def test_the_planner_reads_the_width_limit(hidden, path):
    model, unfused = _pair(1, 0, hidden, torch.float32, layers=1)
    assert binding(model).path is path
    assert binding(unfused).path is Path.LAYERS


@pytest.mark.parametrize("hidden", [16, 80])  # the whole-network C++ call and the layer path
def test_every_path_counts_batch_norm_steps_alike(hidden):
    """One rule (rpfast/nn/runtime/batch_norm_steps.py): a training forward counts one step in every BatchNorm,
    and momentum=None is the cumulative 1 / count, on every path, as torch's BatchNorm does."""
    graph = _batch()
    fused, unfused = _pair(1, 0, hidden, torch.float64)
    reference = copy.deepcopy(unfused)
    for model in (fused, unfused, reference):
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.momentum = None
    x = graph.x.double()
    for _ in range(2):
        for model in (fused, unfused):
            model.train()(x, graph)
        h = x
        for layer in reference.layers:  # torch's own modules
            z = h @ layer.first.weight.t()
            a = (1 + layer.eps) * z + torch.zeros_like(z).index_add(0, graph.edge_index[1], z[graph.edge_index[0]])
            for s, norm in enumerate(layer.norms):
                a = torch.relu(norm(a if s == 0 else a @ layer.linears[s - 1].weight.t()))
            h = a
    for model in (fused, unfused):
        for (name, a), b in zip(model.state_dict().items(), reference.state_dict().values()):
            if "running" in name or "num_batches" in name:
                torch.testing.assert_close(a, b, msg=lambda m: f"{name}: {m}")
    assert int(fused.layers[0].norms[0].num_batches_tracked) == 2
