"""GIN(flat_parameters=True) (rpfast/nn/_flat_parameters.py): one flat parameter, the same model."""
import copy
import io
import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset
from rpfast.nn import GIN, RPGIN, convert_sync_batch_norm


@pytest.fixture(scope="module")
def data():
    graphs, labels = csl_dataset()
    return csl_batch(graphs, range(150)), labels


def _pair(in_dim=1, hidden=16, layers=3, id_dim=10, **kwargs):
    """The same GIN (seed 0) in the default and the flat layout."""
    models = []
    for flat in (False, True):
        torch.manual_seed(0)
        models.append(GIN(in_dim, hidden, layers, 10, id_dim=id_dim, flat_parameters=flat, **kwargs))
    return models


def _grad_by_path(model: GIN, path: str):
    if model.flat_parameters:
        layout = model._flat_layout
        i = layout.paths.index(path)
        start = sum(layout.numels[:i])
        return model.flat_parameter.grad[start:start + layout.numels[i]].view(layout.shapes[i])
    return model.get_parameter(path).grad


def _train(model, full, labels, steps=6, graph_fn=None, dtype=torch.float32):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(steps):
        chosen = torch.randperm(150, generator=torch.Generator().manual_seed(step))[:16].tolist()
        graph = full.select(chosen) if graph_fn is None else graph_fn(full.select(chosen))
        ids = torch.randint(0, 10, (2, graph.total_nodes), generator=torch.Generator().manual_seed(step))
        torch.manual_seed(step)  # dropout masks
        out = model(graph.x.to(dtype), graph, ids=ids).mean(0)
        loss = torch.nn.functional.cross_entropy(out, labels[chosen])
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            first_grads = {path: _grad_by_path(model, path).clone() for path in _paths(model)}
        optimizer.step()
        losses.append(loss.item())
    return losses, first_grads


def _paths(model: GIN):
    return model._flat_layout.paths if model.flat_parameters else [n for n, _ in model.named_parameters()]


def _with_edge_attr(graph: GraphBatch) -> GraphBatch:
    edge_attr = torch.arange(graph.num_edges, dtype=torch.float32).remainder(3).unsqueeze(1) / 3
    return GraphBatch(graph.edge_index, x=graph.x, ptr=graph.ptr, edge_attr=edge_attr)


# the C++ network (default), its embedding with the classifier outside (dropout), a fixed eps
# (gradient slots the parameter lacks), the layer-by-layer paths (wider than the C++ network,
# fused off, GINE edge features), float64
CASES = [{}, {"dropout": 0.5}, {"train_eps": False}, {"hidden": 80}, {"fused": False}, {"edge_dim": 1},
         {"dtype": torch.float64}]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_flat_model_trains_exactly_like_the_default_layout(data, case):
    full, labels = data
    case = dict(case)
    fused, dtype = case.pop("fused", True), case.pop("dtype", torch.float32)
    default, flat = _pair(**case)
    for model in (default, flat):
        model.fused = fused
        model.to(dtype)
    assert len(list(flat.parameters())) == 1 and flat.flat_parameter.numel() == sum(
        p.numel() for p in default.parameters())
    graph_fn = _with_edge_attr if case.get("edge_dim") else None
    losses_default, grads_default = _train(default, full, labels, graph_fn=graph_fn, dtype=dtype)
    losses_flat, grads_flat = _train(flat, full, labels, graph_fn=graph_fn, dtype=dtype)
    assert set(grads_flat) == set(grads_default)
    for path, grad in grads_default.items():
        torch.testing.assert_close(grads_flat[path], grad, rtol=0, atol=0, msg=lambda m: f"{path}: {m}")
    assert losses_flat == losses_default
    state_default, state_flat = default.state_dict(), flat.state_dict()
    assert set(state_flat) == set(state_default)
    for key, value in state_default.items():
        assert torch.equal(state_flat[key], value), key


def test_attributes_are_views_that_read_and_write_the_flat_parameter():
    _, model = _pair()
    weight = model.layers[0].first.weight
    assert weight.shape == (16, 1) and not weight.requires_grad and weight.grad_fn is None
    assert weight.untyped_storage().data_ptr() == model.flat_parameter.untyped_storage().data_ptr()
    with torch.no_grad():
        model.layers[0].first.weight.fill_(2.5)
        model.classifier.bias.zero_()
    assert model.state_dict()["layers.0.first.weight"].eq(2.5).all()
    assert model.flat_parameter[:16].eq(2.5).all()
    assert model.flat_parameter[-10:].eq(0).all()  # the classifier's bias comes last


def test_state_dicts_load_across_layouts_and_report_missing_and_mismatched_keys(data):
    full, _ = data
    default, flat = _pair()
    ids = torch.randint(0, 10, (2, full.total_nodes))
    with torch.no_grad():
        for p in default.parameters():
            p.uniform_(-1, 1)
    flat.load_state_dict(default.state_dict())
    default.eval(), flat.eval()
    assert torch.equal(flat(full.x, full, ids=ids), default(full.x, full, ids=ids))
    torch.manual_seed(5)
    other = GIN(1, 16, 3, 10, id_dim=10)
    other.load_state_dict(flat.state_dict())
    other.eval()
    assert torch.equal(other(full.x, full, ids=ids), flat(full.x, full, ids=ids))

    partial = default.state_dict()
    del partial["classifier.bias"]
    with pytest.raises(RuntimeError, match="Missing key.*classifier.bias"):
        flat.load_state_dict(partial)
    assert flat.load_state_dict(partial, strict=False).missing_keys == ["classifier.bias"]
    wrong = default.state_dict()
    wrong["classifier.weight"] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match="size mismatch for classifier.weight"):
        flat.load_state_dict(wrong)


def test_copies_pickles_and_conversions_keep_their_own_flat_storage(data):
    full, labels = data
    _, model = _pair()
    ids = torch.randint(0, 10, (2, full.total_nodes))
    model.eval()
    reference = model(full.x, full, ids=ids)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)), torch.load(buffer, weights_only=False)]
    for twin in copies:
        assert torch.equal(twin(full.x, full, ids=ids), reference)
        view = twin.layers[1].linears[0].weight
        assert view.untyped_storage().data_ptr() == twin.flat_parameter.untyped_storage().data_ptr()
        with torch.no_grad():
            twin.flat_parameter.zero_()  # the copy's views follow its own storage, not the original's
        assert view.eq(0).all() and not torch.equal(twin(full.x, full, ids=ids), reference)
    assert torch.equal(model(full.x, full, ids=ids), reference)

    double = copy.deepcopy(model).double()
    assert double.layers[0].first.weight.dtype == torch.float64
    torch.testing.assert_close(double(full.x.double(), full, ids=ids), reference.double(), rtol=1e-5, atol=1e-5)
    model.flat_parameter.data = model.flat_parameter.data * 0  # a new storage: the binding follows it
    assert not torch.equal(model(full.x, full, ids=ids), reference)
    assert model.layers[0].first.weight.eq(0).all()  # and so do the views, from that forward on


def test_rpgin_with_flat_parameters_is_one_parameter_and_learns(data):
    full, labels = data
    torch.manual_seed(0)
    model = RPGIN(1, 16, 3, 10, id_dim=10, generator=torch.Generator().manual_seed(0), flat_parameters=True)
    assert [name for name, _ in model.named_parameters()] == ["gnn.flat_parameter"]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(model(full.x, full), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.kernels
def test_misuse_fails_with_clear_errors(data):
    full, labels = data
    _, model = _pair()
    ids = torch.randint(0, 10, (1, full.total_nodes))
    with pytest.raises(ValueError, match="flat_parameters=True"):
        convert_sync_batch_norm(RPGIN(1, 8, 2, 3, id_dim=4, flat_parameters=True))
    with pytest.raises(TypeError, match="flat_parameters"):
        GIN(1, 8, 2, 3, flat_parameters="yes")
    loss = model(full.x, full, ids=ids).sum()
    with torch.no_grad():
        model.flat_parameter.add_(1)  # an optimizer step between forward and backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    model.layers[0].first.weight = torch.nn.Parameter(torch.zeros(16, 1))
    with pytest.raises(ValueError, match="keeps its parameters in one flat tensor"):
        model(full.x, full, ids=ids)


def test_replaced_modules_and_reassigned_attributes_fail_clearly_on_every_path(data):
    """A new head or a reassigned weight would be silently cut off from the gradient or undone."""
    full, _ = data
    for hidden in (16, 80):  # the C++ network, layer by layer
        _, model = _pair(hidden=hidden)
        model.classifier = torch.nn.Linear(model.embedding_dim, 3)
        with pytest.raises(ValueError, match="classifier was replaced.*flat_parameters=False"):
            model(full.x, full, ids=torch.zeros(1, full.total_nodes, dtype=torch.int64))
        _, model = _pair(hidden=hidden)
        model.layers[1].norms[0].weight = torch.zeros(hidden)  # a plain tensor, not a Parameter
        with pytest.raises(ValueError, match="layers.1.norms.0.weight was reassigned"):
            model(full.x, full, ids=torch.zeros(1, full.total_nodes, dtype=torch.int64))
    _, model = _pair()
    ids = torch.zeros(1, full.total_nodes, dtype=torch.int64)
    with pytest.raises(ValueError, match="classifier.weight was reassigned"):
        torch.func.functional_call(model, {"classifier.weight": torch.zeros(10, model.embedding_dim)},
                                   (full.x, full), {"ids": ids})


def test_concurrent_forwards_on_the_layer_by_layer_path_get_their_own_gradients(data):
    from concurrent.futures import ThreadPoolExecutor

    full, _ = data
    _, model = _pair(hidden=80)  # wider than the C++ network: the attributes are swapped per forward
    model.eval()
    ids = torch.zeros(1, full.total_nodes, dtype=torch.int64)

    def gradient(_):
        return torch.autograd.grad(model(full.x, full, ids=ids).square().sum(), model.flat_parameter)[0]

    expected = gradient(None)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(gradient, range(24)))
    assert all(torch.equal(g, expected) for g in results)


def test_state_dict_entries_own_their_storage_in_the_default_order_and_missing_keys_are_named():
    default, flat = _pair()
    state = flat.state_dict()
    assert list(state) == list(default.state_dict())
    assert all(v.untyped_storage().nbytes() == v.numel() * v.element_size() for v in state.values())
    result = flat.load_state_dict({}, strict=False)
    assert "classifier.weight" in result.missing_keys and "flat_parameter" not in result.missing_keys


def test_unused_parameters_get_zero_gradients_and_old_pickles_run(data):
    full, _ = data
    default, flat = _pair()
    ids = torch.zeros(1, full.total_nodes, dtype=torch.int64)
    flat.graph_embedding(full.x, full, ids=ids).sum().backward()  # the classifier is not used
    classifier_bias = flat.flat_parameter.grad[-10:]
    assert torch.equal(classifier_bias, torch.zeros(10))  # zero, not None (documented)
    del default.__dict__["_flat_layout"]  # a GIN pickled before flat parameters existed
    default.eval()
    assert default(full.x, full, ids=ids).shape == (1, 150, 10) and not default.flat_parameters


def test_sync_batch_norm_conversion_refuses_flat_models_before_converting_anything():
    _, model = _pair()
    wrapper = torch.nn.Sequential(torch.nn.BatchNorm1d(4), model)
    for target in (model, model.layers, wrapper):
        with pytest.raises(ValueError, match="flat_parameters=True"):
            convert_sync_batch_norm(target)
    assert type(wrapper[0]) is torch.nn.BatchNorm1d  # untouched


@pytest.mark.kernels
def test_the_flat_gradient_of_a_default_gin_is_the_network_layout_itself(data):
    from rpfast.nn.runtime.binding import binding
    from rpfast.ops.gin_network import FlatGradient

    _, model = _pair()
    weights = binding(model).weights(True)
    mapping = FlatGradient(weights, model.flat_parameter)
    assert mapping.index is None  # no gather: the network's gradient buffer is the parameter's gradient
    assert mapping.needs == [t is not None for t in weights.tensors]


# ------------------------------------------------------------------ issue 24: .data and requires_grad_
def test_data_assignment_on_a_view_is_adopted_by_forward_state_dict_and_optimizer():
    """The repro: forward used 5.0, state_dict read 1.0 and the optimizer updated a slice the
    forward no longer read."""
    graph = GraphBatch(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=torch.tensor([4]))
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    models = []
    for flat in (False, True):
        torch.manual_seed(0)
        model = GIN(2, 8, 2, 3, flat_parameters=flat)
        w = model.layers[0].norms[0].weight
        w.data = torch.full_like(w, 5.)
        assert model.state_dict()["layers.0.norms.0.weight"].eq(5).all()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(x, graph).sum().backward()
        optimizer.step()
        models.append(model)
    default, flat = models
    assert flat.layers[0].norms[0].weight.data_ptr() == flat.flat_parameter.data_ptr() + flat._flat_layout.offset(
        "layers.0.norms.0.weight") * 4  # a view of the flat storage again
    for key, value in default.state_dict().items():
        assert torch.equal(flat.state_dict()[key], value), key
    assert torch.equal(flat.layers[0].norms[0].weight, default.layers[0].norms[0].weight)
    assert torch.equal(flat(x, graph), default(x, graph))


def test_data_assignment_is_kept_by_copies_and_conversions():
    for make_copy in (copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m)), lambda m: m.double()):
        model = GIN(2, 8, 2, 3, flat_parameters=True)
        weight = model.layers[0].first.weight
        weight.data = torch.full_like(weight, 3.0)
        twin = make_copy(model)
        assert twin.state_dict()["layers.0.first.weight"].eq(3).all()
        assert twin.layers[0].first.weight.eq(3).all()


def test_load_state_dict_wins_over_an_earlier_data_assignment():
    """Found by the issue-24 campaign: the stale assigned values were adopted over the loaded ones."""
    graph = GraphBatch(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))
    models = []
    for flat in (True, False):
        torch.manual_seed(0)
        models.append(GIN(3, 8, 2, 2, flat_parameters=flat))
    loaded = {key: value + 1 for key, value in models[1].state_dict().items()}
    for model in models:
        weight = model.layers[0].linears[0].weight
        weight.data = torch.zeros_like(weight)
        model.load_state_dict(loaded)
    assert torch.equal(models[0](x, graph), models[1](x, graph))
    for key, value in models[1].state_dict().items():
        assert torch.equal(models[0].state_dict()[key], value), key


def test_a_flat_parameter_of_another_size_is_named_by_state_dict():
    model = GIN(3, 8, 2, 2, flat_parameters=True)
    model.flat_parameter.data = torch.zeros(5)
    with pytest.raises(ValueError, match=r"the flat parameter must have shape \[322\], got \(5,\)"):
        model.state_dict()


def test_data_assignment_of_another_shape_is_refused():
    model = GIN(2, 8, 2, 3, flat_parameters=True)
    model.layers[0].norms[0].weight.data = torch.ones(9)
    with pytest.raises(ValueError, match=r"layers.0.norms.0.weight was given values of shape \(9,\)"):
        model(torch.randn(3, 2), GraphBatch(torch.tensor([[0, 1], [1, 2]]), num_nodes=3))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(-3, 3, allow_nan=False)), min_size=1, max_size=4),
       st.booleans())
def test_data_assignments_match_the_per_tensor_layout(assignments, step_between):
    """Property: any sequence of ``attribute.data = values`` (with forwards, optimizer steps and
    state dicts in between) leaves the flat model equal to the per-tensor one (the reference)."""
    graph = GraphBatch(torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 3, 0]]), num_nodes=torch.tensor([4]))
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(1))
    models = []
    for flat in (False, True):
        torch.manual_seed(0)
        models.append(GIN(2, 4, 2, 3, flat_parameters=flat))
    paths = models[1]._flat_layout.paths
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    for pick, value in assignments:
        path = paths[pick % len(paths)]
        for model, optimizer in zip(models, optimizers):
            *owner, leaf = path.split(".")
            tensor = getattr(model.get_submodule(".".join(owner)), leaf)
            tensor.data = torch.full_like(tensor, value)
            model(x, graph).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            if step_between:
                model.state_dict()
    for key, value in models[0].state_dict().items():
        torch.testing.assert_close(models[1].state_dict()[key], value, rtol=0, atol=0, msg=key)
    torch.testing.assert_close(models[1](x, graph), models[0](x, graph), rtol=0, atol=0)


def test_requires_grad_on_a_submodule_raises_instead_of_freezing_nothing():
    model = GIN(2, 8, 2, 3, flat_parameters=True)
    for module in (model.layers[0], model.layers[1].norms[0], model.classifier, model.layers):
        with pytest.raises(ValueError, match="cannot freeze or unfreeze part of this model"):
            module.requires_grad_(False)
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        with pytest.raises(ValueError, match="layers.0.requires_grad_"):
            twin.layers[0].requires_grad_(False)
    model.requires_grad_(False)  # the whole model: its one parameter
    assert not model.flat_parameter.requires_grad
    GIN(2, 8, 2, 3).layers[0].requires_grad_(False)  # the default layout freezes as usual
