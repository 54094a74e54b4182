"""GIN and RP-GIN: the gathered ID embedding equals materialised one-hot IDs; RP behaviour."""
import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.datasets import csl_batch, csl_dataset
from rpfast.nn import GIN, RPGIN, PiSGD


def small_batch():
    graphs = [(torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), 3),
              (torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]), 5)]
    return GraphBatch.from_edge_lists(graphs, x=[torch.randn(3, 2), torch.randn(5, 2)])


def test_id_gather_equals_materialised_one_hot():
    """GIN(x, ids) with id_dim=m equals GIN on [x, onehot(ids)] with the same weights."""
    torch.manual_seed(0)
    graph = small_batch()
    m = 4
    with_ids = GIN(2, 8, 3, 5, id_dim=m).double().eval()
    dense = GIN(2 + m, 8, 3, 5).double().eval()
    state = with_ids.state_dict()
    # Copy weights: the dense first linear is [W_x | W_id^T].
    dense_state = dense.state_dict()
    for key, value in state.items():
        if key == "layers.0.id_weight":
            continue
        if key == "layers.0.first.weight":
            value = torch.cat([value, state["layers.0.id_weight"].t()], dim=1)
        if key == "classifier.weight":
            value = value  # same layout: [pooled x, id histogram, layers...]
        dense_state[key] = value
    dense.load_state_dict(dense_state)
    ids = torch.randint(0, m, (3, graph.total_nodes))
    onehot = torch.nn.functional.one_hot(ids, m).double()
    x = graph.x.double().expand(3, -1, -1)
    torch.testing.assert_close(with_ids(graph.x.double(), graph, ids=ids), dense(torch.cat([x, onehot], -1), graph))
    torch.testing.assert_close(with_ids.graph_embedding(graph.x.double(), graph, ids=ids),
                               dense.graph_embedding(torch.cat([x, onehot], -1), graph))


def test_rpgin_shapes_modes_and_reproducibility():
    graph = small_batch()
    model = RPGIN(2, 8, 2, 3, id_dim=5, strategy=PiSGD(eval_samples=4), generator=torch.Generator().manual_seed(1))
    assert model(graph.x, graph).shape == (2, 3)
    model.eval()
    assert model.graph_embedding(graph.x, graph).shape == (2, model.gin.embedding_dim)
    (ids, weights), = model.node_ids(graph)  # eval mode: eval_samples relabelings, uniform weights
    assert weights is None and ids.shape == (4, graph.total_nodes) and int(ids.max()) < 5
    # Every graph's first n ids are positions mod m: for m >= n they are a permutation of 0..n-1.
    assert sorted(ids[0, :3].tolist()) == [0, 1, 2]
    model.generator.manual_seed(7)
    a = model(graph.x, graph)
    model.generator.manual_seed(7)
    assert torch.equal(a, model(graph.x, graph))


def test_rpgin_with_one_id_is_deterministic_like_gin():
    """m = 1 gives every node the same ID: the output no longer depends on the permutation."""
    graph = small_batch()
    model = RPGIN(2, 8, 2, 3, id_dim=1, generator=torch.Generator().manual_seed(0)).eval()
    torch.testing.assert_close(model(graph.x, graph), model(graph.x, graph))


def test_rpgin_without_node_features_and_trains():
    graphs, labels = csl_dataset(per_class=2)
    graph = GraphBatch.from_edge_lists(graphs)
    model = RPGIN(0, 8, 2, 10, id_dim=8, generator=torch.Generator().manual_seed(0))
    loss = torch.nn.functional.cross_entropy(model(None, graph), labels)
    loss.backward()
    assert model.gin.layers[0].id_weight.grad.abs().sum() > 0


def test_gin_cannot_separate_csl_but_rpgin_embeddings_differ():
    torch.manual_seed(0)
    graphs, _ = csl_dataset(per_class=1)
    graph = csl_batch(graphs, list(range(10)))
    gin = GIN(1, 8, 3, 10).eval()
    emb = gin.graph_embedding(graph.x, graph)
    torch.testing.assert_close(emb, emb[:1].expand_as(emb))  # 1-WL-equivalent: all identical
    rp = RPGIN(1, 8, 3, 10, id_dim=41, generator=torch.Generator().manual_seed(0)).eval()
    rp_emb = rp.graph_embedding(graph.x, graph)
    assert (rp_emb - rp_emb[:1]).abs().max() > 1e-3


@pytest.mark.parametrize("kwargs, match", [
    ({"id_dim": 0}, "id_dim must be >= 1"),
    ({"id_dim": 3, "hidden": 0}, "hidden must be an int >= 1"),
])
def test_rpgin_rejects_bad_arguments(kwargs, match):
    args = {"in_dim": 1, "hidden": 4, "num_layers": 2, "out_dim": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        RPGIN(**args)


def test_gin_input_errors():
    graph = small_batch()
    gin = GIN(2, 4, 2, 2, id_dim=3)
    with pytest.raises(ValueError, match="needs ids"):
        gin(graph.x, graph)
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 3\)"):
        gin(graph.x, graph, ids=torch.full((1, graph.total_nodes), 3))
    with pytest.raises(ValueError, match="x must have shape"):
        GIN(3, 4, 2, 2)(graph.x, graph)


def test_rpgin_removed_sample_names_are_refused():
    """train_perms / num_inference_perms and train_samples / eval_samples are gone (CHANGELOG: the
    counts belong to the strategy): they reach GIN, which names them."""
    for name in ("train_perms", "num_inference_perms", "train_samples", "eval_samples"):
        with pytest.raises(TypeError, match=name):
            RPGIN(2, 8, 2, 3, id_dim=5, **{name: 2})


def reference_gine_layer(layer, x, graph):
    """GINLayer(edge_dim > 0) in plain PyTorch: z = x W^T; a_i = (1+eps) z_i + sum_{j->i}
    ReLU(z_j + edge(e_ji)); then the BatchNorm-ReLU / linear stages."""
    z = x @ layer.first.weight.t()
    a = (1 + layer.eps) * z
    rows = []
    for i in range(graph.total_nodes):
        incoming = (graph.edge_index[1] == i).nonzero().flatten()
        rows.append(sum((torch.relu(z[graph.edge_index[0, e]] + layer.edge(graph.edge_attr[e])) for e in incoming),
                        torch.zeros(z.shape[1], dtype=z.dtype)))
    h = a + torch.stack(rows)
    for stage, bn in enumerate(layer.norms):
        if stage:
            h = h @ layer.linears[stage - 1].weight.t()
        h = torch.relu(bn(h))
    return h


@pytest.mark.parametrize("training", [True, False])
def test_gine_layer_matches_plain_pytorch(training):
    import copy
    torch.manual_seed(3)
    base = small_batch()
    graph = GraphBatch(base.edge_index, x=base.x.double(), ptr=base.ptr,
                       edge_attr=torch.randn(base.num_edges, 3, dtype=torch.float64))
    from rpfast.nn import GINLayer
    layer = GINLayer(2, 6, mlp_layers=2, edge_dim=3).double().train(training)
    with torch.no_grad():
        layer.eps.fill_(0.25)
    ref = copy.deepcopy(layer)
    out = layer(graph.x, graph)[0]
    expected = reference_gine_layer(ref, graph.x, graph)
    torch.testing.assert_close(out, expected)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (expected * g).sum().backward()
    for (name, p), q in zip(layer.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert layer.edge.weight.grad.abs().sum() > 0


def test_rpgin_with_bond_features_takes_pyg_batches():
    torch.manual_seed(0)
    base = small_batch()
    graph = GraphBatch(base.edge_index, x=base.x, ptr=base.ptr, edge_attr=torch.randn(base.num_edges, 4))
    model = RPGIN(2, 8, 2, 3, id_dim=5, edge_dim=4, strategy=PiSGD(train_samples=2),
                  generator=torch.Generator().manual_seed(1))
    out = model(graph)
    assert out.shape == (2, 3)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    pytest.importorskip("torch_geometric.data")
    model.eval()
    state = model.generator.get_state()
    from_pyg = model(graph.to_pyg())
    model.generator.set_state(state)
    torch.testing.assert_close(from_pyg, model(graph.x, graph))
    torch.testing.assert_close(model((graph.x, graph.edge_index, graph.batch)[0], graph.edge_index, graph.batch,
                                     edge_attr=graph.edge_attr).shape, torch.Size([2, 3]))
    with pytest.raises(ValueError, match="needs edge features: give the graph edge_attr"):
        model(base.x, base)
    with pytest.raises(ValueError, match="the GIN was built with id_dim=5 but RPGNN with id_dim=3"):
        from rpfast.nn import RPGNN
        RPGNN(model.gin, id_dim=3)
