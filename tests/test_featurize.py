"""RDKit featurisation (rpfast.data.molecules.featurize_smiles) against hand-checked molecules."""
import pytest
import torch

pytest.importorskip("rdkit")

from rpfast.data.molecules import ATOM_FEATURES, BOND_FEATURES, ELEMENTS, featurize_smiles  # noqa: E402

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
