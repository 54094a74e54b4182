"""Duvenaud, RP-Duvenaud, k-ary Duvenaud and the DFS encoders on Tox21; splits and the loss."""
import pytest
import torch

pytest.importorskip("rdkit")

from rpfast.datasets.molecule_cache import featurize_dataset  # noqa: E402
from rpfast.datasets.moleculenet import load_tox21, random_split, scaffold_split  # noqa: E402
from rpfast.datasets.molecules import featurize_smiles, scaffold_groups  # noqa: E402
from rpfast.experiments.molecules.models import MODELS, SUBGRAPH_MODELS, Architecture, build_model  # noqa: E402
from rpfast.experiments.molecules.tasks import Targets  # noqa: E402
from rpfast.nn import Duvenaud, RPDuvenaud, SubgraphRP  # noqa: E402
from rpfast.nn.rp import KAry, Oriented, PiSGD, induced_subgraphs  # noqa: E402


@pytest.fixture(scope="module")
def tox21_200():
    data = load_tox21()
    graphs = featurize_smiles(data.smiles[:200])
    return graphs, data.labels[:200][graphs.rows]


@pytest.mark.parametrize("name", MODELS)
def test_each_model_trains_and_the_loss_falls(name, tox21_200):
    graphs, labels = tox21_200
    torch.manual_seed(0)
    arch = Architecture(name, labels.shape[1], 10 if name in SUBGRAPH_MODELS else None, 16, 4)
    model = build_model(arch, torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    targets = Targets.fit("classification", labels)
    batch = graphs.batch(torch.arange(64))
    losses = []
    for _ in range(15):
        loss = targets.loss(model(batch), labels[:64])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0], losses
    model.eval()
    assert model(graphs.batch([0, 1, 2])).shape == (3, labels.shape[1])


def test_masked_loss_ignores_missing_labels():
    logits = torch.tensor([[0.0, 5.0], [1.0, -2.0]])
    labels = torch.tensor([[1.0, float("nan")], [0.0, float("nan")]])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], labels[:, 0])
    targets = Targets.fit("classification", torch.tensor([[1.0, 1.0], [0.0, 0.0]]))
    torch.testing.assert_close(targets.loss(logits, labels), expected)
    assert Targets.fit("classification", torch.tensor([[1.0], [0.0], [0.0], [float("nan")]])).pos_weight.tolist() \
        == [2.0]


def test_rp_duvenaud_eval_is_invariant_to_atom_order_on_tiny_molecules():
    """With id_dim covering every same-element group and all element orders averaged (exactly,
    by enough samples that every order appears), relabeling the atoms changes nothing beyond
    sampling noise; here each molecule has <= 2 atoms per element, so 2 orders per group."""
    from rdkit import Chem
    smiles = ["CCO", "OCC", "C(=O)O", "NCC(=O)O"]
    shuffled = [Chem.MolToSmiles(Chem.RenumberAtoms(Chem.MolFromSmiles(s), list(range(Chem.MolFromSmiles(s).GetNumAtoms()))[::-1]),
                                 canonical=False) for s in smiles]
    torch.manual_seed(0)
    model = RPDuvenaud(75, 3, id_dim=2, strategy=PiSGD(eval_samples=4000),
                       generator=torch.Generator().manual_seed(0)).eval()
    a = model(featurize_smiles(smiles).batch(range(4)))
    b = model(featurize_smiles(shuffled).batch(range(4)))
    torch.testing.assert_close(a, b, atol=2e-2, rtol=0)
    plain = Duvenaud(75, 3).eval()
    torch.testing.assert_close(plain(featurize_smiles(smiles).batch(range(4))),
                               plain(featurize_smiles(shuffled).batch(range(4))), atol=1e-5, rtol=0)


def test_induced_subgraphs_and_subgraph_rp():
    graphs = featurize_smiles(["CCCCO", "c1ccccc1"])
    batch = graphs.batch([0, 1])
    perms = torch.tensor([[[0, 1, 4, -1]], [[2, 3, 4, 5]]])
    sub = induced_subgraphs(batch, perms)
    assert sub.num_nodes.tolist() == [3, 4]
    edges = {tuple(e) for e in sub.edge_index.t().tolist()}
    assert edges == {(0, 1), (1, 0), (3, 4), (4, 3), (4, 5), (5, 4), (5, 6), (6, 5)}
    torch.testing.assert_close(sub.x, batch.x[torch.tensor([0, 1, 4, 7, 8, 9, 10])])
    with pytest.raises(IndexError, match=r"perms\[0, 0, 3\] = 5 is not a vertex of graph 0"):
        induced_subgraphs(batch, torch.tensor([[[0, 1, 4, 5]], [[0, 1, 2, 3]]]))
    with pytest.raises(ValueError, match="perms has 1 rows but the graph batch holds 2 graphs"):
        induced_subgraphs(batch, torch.tensor([[[0, 1]]]))
    with pytest.raises(TypeError, match="strategy must be an rpfast.nn.rp Strategy"):
        SubgraphRP(Duvenaud(75, 1), "dfs")
    perms = Oriented("dfs", 4, train_samples=3).relabel(batch, True, torch.Generator().manual_seed(0)).perms
    assert (perms[:, :, :4] >= 0).all()  # connected molecules of >= 4 atoms fill every position


def test_subgraph_rp_follows_the_module_mode_and_the_strategy():
    """train() draws train_samples subgraphs per molecule, eval() averages eval_samples (KAryGNN,
    the module before SubgraphRP, always drew with training=True); the output is the mean of the
    GNN over the induced subgraphs; a KAry strategy serves too."""
    batch = featurize_smiles(["CCCCO", "c1ccccc1", "CC(=O)O"]).batch([0, 1, 2])
    seen = []

    class Count(torch.nn.Module):
        def forward(self, graph):
            seen.append(graph.num_graphs)
            return graph.num_nodes.to(torch.float64).unsqueeze(1)

    model = SubgraphRP(Count(), Oriented("dfs", 4, train_samples=2, eval_samples=7),
                       generator=torch.Generator().manual_seed(0))
    assert model.train()(batch).tolist() == [[4.0], [4.0], [4.0]]
    assert model.eval()(batch).shape == (3, 1)
    assert seen == [3 * 2, 3 * 7]
    out = SubgraphRP(Count(), KAry(2, order="invariant")).eval()(batch)
    torch.testing.assert_close(out, torch.full((3, 1), 2.0, dtype=torch.float64))  # every 2-subset: 2 vertices


def test_splits_partition_and_scaffolds_stay_together():
    data = load_tox21()
    train, valid, test = random_split(1000, seed=3)
    assert sorted(torch.cat([train, valid, test]).tolist()) == list(range(1000))
    assert (len(train), len(valid), len(test)) == (800, 100, 100)
    assert not torch.equal(train, random_split(1000, seed=4)[0])
    smiles = data.smiles[:600]
    parts = scaffold_split(smiles)
    assert sorted(torch.cat(parts).tolist()) == list(range(600))
    scaffolds = scaffold_groups(smiles)
    owner = {}
    for s, part in enumerate(parts):
        for i in part.tolist():
            assert owner.setdefault(scaffolds[i], s) == s  # a scaffold never spans two splits
    with pytest.raises(ValueError, match="fractions must be three"):
        random_split(10, 0, fractions=(0.5, 0.5))
    with pytest.raises(ValueError, match="num_molecules must be >= 0"):
        random_split(-1, 0)
    with pytest.raises(TypeError, match="smiles must be a sequence of SMILES strings"):
        scaffold_split("CCO")


def test_scaffold_split_follows_deepchem_s_rule():
    """Equal-sized scaffold groups: the one seen last is placed first (DeepChem sorts (size, first
    index) descending), and valid's cutoff counts train and valid together. The old order put the
    benzene group in train and the cyclohexane group in test here."""
    smiles = ["c1ccccc1C", "c1ccccc1CC", "C1CCCCC1C", "C1CCCCC1CC"]
    train, valid, test = scaffold_split(smiles, fractions=(0.5, 0.25, 0.25))
    assert (train.tolist(), valid.tolist(), test.tolist()) == ([2, 3], [], [0, 1])
    # train holds 2 of its 3 allowed; valid may use that slack: 2 + 2 <= (0.5 + 0.2) * 6, although
    # valid alone allows 0.2 * 6 = 1.2 molecules
    smiles = ["c1ccccc1C", "c1ccccc1CC", "C1CCCCC1C", "C1CCCCC1CC", "C1CCC1C", "C1CCC1CC"]
    train, valid, test = scaffold_split(smiles, fractions=(0.5, 0.2, 0.3))
    assert (train.tolist(), valid.tolist(), test.tolist()) == ([4, 5], [2, 3], [0, 1])


def test_featurisation_cache_is_reused_and_survives_damage(tmp_path):
    data = load_tox21()
    from rpfast.datasets.moleculenet import MoleculeDataset
    small = MoleculeDataset(data.smiles[:30], data.labels[:30], data.tasks)
    first = featurize_dataset(small, cache_dir=tmp_path)
    files = list(tmp_path.glob("molecules-*.pt"))
    assert len(files) == 1 and not list(tmp_path.glob(".*tmp*"))
    again = featurize_dataset(small, cache_dir=tmp_path)
    assert torch.equal(again.x, first.x) and again.smiles == first.smiles
    files[0].write_bytes(b"damaged")
    assert torch.equal(featurize_dataset(small, cache_dir=tmp_path).x, first.x)


def test_duvenaud_conv_matches_a_per_atom_reference():
    """h_i' = [x_i, sum_j x_j] W_{d_i} + b_{d_i}, d_i = min(degree, max_degree), with gradients."""
    from rpfast.data import GraphBatch
    from rpfast.nn import DuvenaudConv

    torch.manual_seed(0)
    edges = torch.randint(0, 30, (2, 70))
    edges = edges[:, edges[0] != edges[1]]
    graph = GraphBatch(torch.cat([edges, edges.flip(0)], dim=1), num_nodes=30)
    conv = DuvenaudConv(5, 4, max_degree=3).double()
    x = torch.randn(30, 5, dtype=torch.float64, requires_grad=True)
    out = conv(x, graph)
    ref_x = x.detach().clone().requires_grad_()
    target = graph.edge_index[1]
    neighbours = torch.zeros_like(ref_x).index_add(0, target, ref_x[graph.edge_index[0]])
    degree = torch.bincount(target, minlength=30).clamp(max=3)
    both = torch.cat([ref_x, neighbours], dim=1)
    ref = torch.bmm(both.unsqueeze(1), conv.stacked_weight()[degree]).squeeze(1) + conv.bias[degree]
    torch.testing.assert_close(out, ref)
    g = torch.randn_like(out)
    present = sorted(set(degree.tolist()))
    params = [conv.weights[d] for d in present] + [conv.bias]
    grads = torch.autograd.grad(out, [x, *params], g)
    ref_grads = torch.autograd.grad(ref, [ref_x, *params], g)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b)


def test_duvenaud_conv_double_backward_and_absent_degrees():
    """The per-degree products are one autograd node: degrees absent from the batch get no
    weight gradient (the optimizer skips them, as PyG's unused per-degree layers), and gradients
    of gradients match the selection-per-degree reference."""
    from rpfast.data import GraphBatch
    from rpfast.nn import DuvenaudConv

    torch.manual_seed(1)
    graph = GraphBatch(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=4)  # degrees 1, 2, 1, 0
    conv = DuvenaudConv(3, 2, max_degree=4).double()
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    conv(x, graph).sum().backward()
    assert [w.grad is not None for w in conv.weights] == [True, True, True, False, False]
    assert torch.equal(conv.bias.grad[3:], torch.zeros(2, 2, dtype=torch.float64))
    weights = list(conv.weights[:3])
    out = conv(x, graph)
    grad_w = torch.autograd.grad(out.square().sum(), weights, create_graph=True)
    ref_w = torch.autograd.grad(_degree_reference(x, conv.stacked_weight(), conv.bias, graph).square().sum(), weights,
                                create_graph=True)
    for a, b in zip(grad_w, ref_w):
        torch.testing.assert_close(a, b)
    total, ref_total = sum(g.sum() for g in grad_w), sum(g.sum() for g in ref_w)
    torch.testing.assert_close(torch.autograd.grad(total, x)[0], torch.autograd.grad(ref_total, x)[0])
    assert torch.autograd.gradgradcheck(lambda a, b: conv(a, graph) * b.sum(), (x, conv.bias))


def test_duvenaud_conv_loads_a_stacked_weight_state_dict():
    """State dicts of the earlier single ``weight [D, 2 in, out]`` load into the per-degree weights."""
    from rpfast.nn import DuvenaudConv

    conv = DuvenaudConv(3, 2, max_degree=2)
    stacked = torch.randn(3, 6, 2)
    conv.load_state_dict({"weight": stacked, "bias": torch.ones(3, 2)})
    assert torch.equal(conv.stacked_weight(), stacked) and torch.equal(conv.bias, torch.ones(3, 2))
    with pytest.raises(RuntimeError, match="weights.2"):
        conv.load_state_dict({"weight": stacked[:2], "bias": torch.ones(3, 2)})
    with pytest.raises(RuntimeError, match="both a stacked 'weight'"):
        conv.load_state_dict({**conv.state_dict(), "weight": stacked})
    assert not hasattr(conv, "weight")  # writes through a stacked copy would be lost


def test_duvenaud_conv_checks_caller_given_degree_groups():
    from rpfast.data import GraphBatch
    from rpfast.nn import DuvenaudConv
    from rpfast.nn.duvenaud import DegreeGroups, degree_groups

    graph = GraphBatch(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=4)
    conv = DuvenaudConv(3, 2, max_degree=4)
    x = torch.randn(4, 3)
    good = degree_groups(graph, 4)
    torch.testing.assert_close(conv(x, graph, good), conv(x, graph))
    for ranges in ([(0, 0, 1), (1, 1, 3)], [(0, 0, 1), (1, 2, 4)], [(0, 0, 2), (0, 2, 4)], [(9, 0, 4)]):
        with pytest.raises(ValueError, match="groups"):
            conv(x, graph, DegreeGroups(good.order, ranges, good.inverse))


def _degree_reference(x, weight, bias, graph):
    target = graph.edge_index[1]
    neighbours = torch.zeros_like(x).index_add(0, target, x[graph.edge_index[0]])
    degree = torch.bincount(target, minlength=x.shape[0]).clamp(max=weight.shape[0] - 1)
    both = torch.cat([x, neighbours], dim=1)
    return torch.bmm(both.unsqueeze(1), weight[degree]).squeeze(1) + bias[degree]
