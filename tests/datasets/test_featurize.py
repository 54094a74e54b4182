"""RDKit featurisation (rpfast.datasets.molecules.featurize_smiles) against hand-checked molecules."""
import numpy as np
import pytest
import torch

pytest.importorskip("rdkit")

from rpfast.datasets.molecules import ATOM_FEATURES, BOND_FEATURES, ELEMENTS, featurize_smiles  # noqa: E402

# column offsets of the 75 atom features
ELEMENT, DEGREE, VALENCE, CHARGE, RADICAL, HYBRID, AROMATIC, HCOUNT = 0, 44, 55, 62, 63, 64, 69, 70


def atom(graphs, i):
    row = graphs.x[i]
    one = lambda lo, width: int(torch.nonzero(row[lo:lo + width]).flatten()[0]) if row[lo:lo + width].any() else None  # noqa: E731
    return {"element": ELEMENTS[one(ELEMENT, 44)], "degree": one(DEGREE, 11), "valence": one(VALENCE, 7),
            "charge": float(row[CHARGE]), "hybrid": one(HYBRID, 5), "aromatic": bool(row[AROMATIC]),
            "hs": one(HCOUNT, 5)}


def test_ethanol_and_benzene_by_hand():
    graphs = featurize_smiles(["CCO", "c1ccccc1"])
    assert graphs.x.shape == (3 + 6, ATOM_FEATURES) and graphs.edge_attr.shape == (2 * (2 + 6), BOND_FEATURES)
    assert [atom(graphs, i) for i in range(3)] == [
        {"element": "C", "degree": 1, "valence": 3, "charge": 0.0, "hybrid": 2, "aromatic": False, "hs": 3},
        {"element": "C", "degree": 2, "valence": 2, "charge": 0.0, "hybrid": 2, "aromatic": False, "hs": 2},
        {"element": "O", "degree": 1, "valence": 1, "charge": 0.0, "hybrid": 2, "aromatic": False, "hs": 1}]
    benzene = atom(graphs, 3)
    assert benzene == {"element": "C", "degree": 2, "valence": 1, "charge": 0.0, "hybrid": 1, "aromatic": True, "hs": 1}
    assert graphs.atom_ptr.tolist() == [0, 3, 9] and graphs.edge_ptr.tolist() == [0, 4, 16]
    # ethanol bonds: single, not conjugated, not in a ring, no stereo; benzene: aromatic, conjugated, ring
    assert graphs.edge_attr[0].tolist() == [1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert graphs.edge_attr[4].tolist() == [0, 0, 0, 1, 1, 1, 1, 0, 0, 0]
    batch = graphs.batch([1, 0])
    assert batch.num_nodes.tolist() == [6, 3] and batch.smiles == ["c1ccccc1", "CCO"]
    ethanol = {tuple(e) for e in batch.edge_index[:, batch.edge_index[0] >= 6].t().tolist()}
    assert ethanol == {(6, 7), (7, 6), (7, 8), (8, 7)} and batch.edge_index.max() == 8


def test_charged_salt_stereo_and_invalid():
    graphs = featurize_smiles(["C[N+](C)(C)C", "[Na+].[Cl-]", "F/C=C/F", "C1CC", "not a smiles", ""])
    assert graphs.invalid == [3, 4, 5] and graphs.rows.tolist() == [0, 1, 2]
    assert atom(graphs, 1)["charge"] == 1.0 and atom(graphs, 1)["element"] == "N" and atom(graphs, 1)["degree"] == 4
    salt = graphs.batch([1])
    assert salt.num_nodes.tolist() == [2] and salt.num_edges == 0  # two fragments, no bond
    assert [atom(graphs, i)["element"] for i in (5, 6)] == ["Na", "Cl"] and atom(graphs, 6)["charge"] == -1.0
    double = graphs.batch([2]).edge_attr
    assert double[:, 1].sum() == 2 and double[double[:, 1] == 1][:, 9].tolist() == [1.0, 1.0]  # E stereo


def test_unknown_elements_fall_in_the_last_column():
    graphs = featurize_smiles(["[U]"])
    assert atom(graphs, 0)["element"] == "Unknown"
    with pytest.raises(TypeError, match=r"smiles_list\[1\] must be a SMILES string"):
        featurize_smiles(["C", 3])


@pytest.fixture
def float64_default():
    """torch.set_default_dtype(torch.float64) for one test, restored however it ends."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


SMILES = ["CCO", "c1ccccc1", "F/C=C/F", "[Na+].[Cl-]", "not a smiles", "C[N+](C)(C)C"]


def test_features_are_float32_whatever_the_default_dtype(float64_default, tmp_path):
    """Featurisation used to fail under float64 ("Index put requires the source and destination dtypes
    match": edge_attr was allocated in the default dtype). Features are float32 (FEATURE_DTYPE) always,
    bit-identical to a float32-default run; batches, the cache and the readers work too."""
    from rpfast.datasets import batch_from_smiles, canonical_order_from_mol, graph_from_smiles
    from rpfast.datasets.molecule_files import read_smiles_file
    from rpfast.datasets.molecule_cache import featurize_dataset
    from rpfast.datasets.moleculenet import read_moleculenet_csv
    from rpfast.datasets.molecules import FEATURE_DTYPE

    assert torch.get_default_dtype() == torch.float64 and FEATURE_DTYPE == torch.float32
    graphs = featurize_smiles(SMILES)
    torch.set_default_dtype(torch.float32)
    reference = featurize_smiles(SMILES)
    torch.set_default_dtype(torch.float64)
    for name in ("x", "edge_attr", "element", "edge_index", "atom_ptr", "edge_ptr", "rows"):
        got, want = getattr(graphs, name), getattr(reference, name)
        assert got.dtype == want.dtype and torch.equal(got, want), name
    assert graphs.x.dtype == graphs.edge_attr.dtype == torch.float32 and graphs.edge_index.dtype == torch.int64

    batch = graphs.batch([2, 0, 1])
    assert batch.x.dtype == batch.edge_attr.dtype == batch.dense_adj().dtype == batch.dense_x().dtype == torch.float32
    assert batch.select([1, 0]).edge_attr.dtype == torch.float32 and batch.rowptr.dtype == torch.int64
    assert torch.equal(batch.dense_adj(), reference.batch([2, 0, 1]).dense_adj())

    path = tmp_path / "mols.csv"
    path.write_text("smiles,y\n" + "".join(f'"{s}",{i % 2}\n' for i, s in enumerate(SMILES)))
    data = read_moleculenet_csv(path)
    assert data.labels.dtype == torch.float32 and read_smiles_file(path) == SMILES
    cached = featurize_dataset(data, cache_dir=tmp_path)  # written under float64
    again = featurize_dataset(data, cache_dir=tmp_path)  # read back and verified under float64
    assert torch.equal(cached.edge_attr, reference.edge_attr) and torch.equal(again.x, reference.x)

    molecules, kept = batch_from_smiles(SMILES, skip_invalid=True)
    assert kept.dtype == torch.int64 and kept.tolist() == [0, 1, 2, 3, 5]
    assert molecules.dense_adj().dtype == torch.float64  # no features: the default dtype, as GraphBatch documents
    graph, labels = graph_from_smiles("CCO")
    assert labels.dtype == np.int64 and graph.edge_index.dtype == torch.int64
    assert canonical_order_from_mol(["CCO", "c1ccccc1"]).dtype == torch.int64


def test_atom_count_bounds_hold_the_featurised_atom_counts():
    """The cache's cheap check: RDKit's unsanitised parse brackets the atoms featurisation keeps
    (hydrogens written out may be removed; nothing else changes), -1 where nothing parses."""
    from rpfast.datasets.molecules import atom_count_bounds

    smiles = SMILES + ["[2H]C([H])([H])[H]", "[H]", "[H][H]", "C1CC", "", "*C(=O)[O-]", "[Al](Cl)(Cl)(Cl)(Cl)(Cl)Cl"]
    low, high = atom_count_bounds(smiles)
    assert low.dtype == high.dtype == np.int64
    graphs = featurize_smiles(smiles)
    counts = graphs.atom_ptr.diff()
    for m, row in enumerate(graphs.rows.tolist()):
        assert low[row] <= int(counts[m]) <= high[row], smiles[row]
    assert low[smiles.index("[2H]C([H])([H])[H]")] == 1 and high[smiles.index("[2H]C([H])([H])[H]")] == 5
    assert low[smiles.index("C1CC")] == high[smiles.index("C1CC")] == -1 and high[smiles.index("")] == -1
