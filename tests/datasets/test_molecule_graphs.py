"""Molecules stored as RDKit property codes and expanded per batch
(rpfast.datasets.molecule_graphs): the same features as expanding the whole set, a fraction of
its bytes, and the same codes whatever the chunks featurisation reads them in."""
import pytest
import torch

pytest.importorskip("rdkit")

from rpfast.datasets.molecule_graphs import ATOM_FEATURES, BOND_FEATURES, atom_features, bond_features  # noqa: E402
from rpfast.datasets.molecules import featurize_smiles  # noqa: E402
from rpfast.datasets import load_tox21  # noqa: E402


@pytest.fixture(scope="module")
def graphs():
    return featurize_smiles(load_tox21().smiles[:400] + ["not a smiles", "[Na+].[Cl-]", "C"])


def test_a_batch_is_the_whole_sets_features_of_its_molecules(graphs):
    x, edge_index, edge_attr = graphs.x, graphs.edge_index, graphs.edge_attr
    for molecules in ([0], [5, 3, 5], list(range(len(graphs)))[::-7], [len(graphs) - 1, 0]):
        batch = graphs.batch(molecules)
        rows = torch.cat([torch.arange(graphs.atom_ptr[m], graphs.atom_ptr[m + 1]) for m in molecules])
        assert torch.equal(batch.x, x[rows]) and torch.equal(batch.element, graphs.element[rows])
        edges = torch.cat([torch.arange(graphs.edge_ptr[m], graphs.edge_ptr[m + 1]) for m in molecules])
        assert torch.equal(batch.edge_attr, edge_attr[edges])
        # the same bonds in the same order, atoms renumbered from 0 in the batch's order
        expected = torch.cat([edge_index[:, graphs.edge_ptr[m]:graphs.edge_ptr[m + 1]] - graphs.atom_ptr[m] + start
                              for m, start in zip(molecules, batch.ptr[:-1].tolist())], dim=1)
        assert torch.equal(batch.edge_index, expected)


def test_singles_are_one_molecule_batches_bit_for_bit(graphs):
    molecules = [len(graphs) - 1, 7, 0, 7, *range(100, 140)]  # repeats, the last molecule, chunks of 5
    singles = list(graphs.singles(molecules, chunk=5))
    assert len(singles) == len(molecules)
    for m, one in zip(molecules, singles):
        ref = graphs.batch([m])
        for name in ("x", "edge_index", "edge_attr", "ptr"):
            assert torch.equal(getattr(one, name), getattr(ref, name)), (m, name)
        assert torch.equal(one.element, ref.element) and one.extras["smiles"] == ref.extras["smiles"]
    assert list(graphs.singles([])) == []
    with pytest.raises(ValueError, match="chunk must be a positive int"):
        next(graphs.singles([0], chunk=0))


def test_codes_expand_to_one_hot_blocks_and_out_of_range_counts_set_no_bit():
    codes = torch.tensor([[0, 11, 6, -1, 0, -1, 1, 5], [43, 0, 0, 2, 1, 4, 0, 0]], dtype=torch.int16)
    x = atom_features(codes)
    assert x.shape == (2, ATOM_FEATURES) and x.dtype == torch.float32
    assert x[0, :44].tolist() == [1] + [0] * 43 and x[1, 43] == 1  # the last element column: other
    assert x[0, 44:55].sum() == 0 and x[1, 44] == 1  # degree 11 is past the block; 0 is its first bit
    assert x[0, 55 + 6] == 1 and x[0, 62] == -1 and x[1, 62] == 2 and x[1, 63] == 1  # valence, charge, radicals
    assert x[0, 64:69].sum() == 0 and x[1, 68] == 1  # hybridisation -1 (other) sets no bit
    assert x[0, 69] == 1 and x[0, 70:75].sum() == 0 and x[1, 70] == 1  # aromatic; 5 hydrogens past the block
    bonds = bond_features(torch.tensor([[-1, 1, 0, 3], [3, 0, 1, 0]], dtype=torch.int16))
    assert bonds.shape == (2, BOND_FEATURES)
    assert bonds.tolist() == [[0, 0, 0, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 0, 1, 1, 0, 0, 0]]


def test_the_stored_codes_take_a_fraction_of_the_expanded_features(graphs):
    expanded = sum(t.numel() * t.element_size() for t in (graphs.x, graphs.edge_attr, graphs.edge_index))
    assert graphs.nbytes() * 10 < expanded
    atoms, bonds = graphs.atoms.shape[0], graphs.bonds.shape[0]
    assert graphs.nbytes() == 16 * atoms + 16 * bonds + 24 * len(graphs) + 16  # codes, pairs, offsets, rows


def test_the_chunks_featurisation_reads_in_do_not_change_the_codes(graphs, monkeypatch):
    import rpfast.datasets.molecules as molecules

    smiles = load_tox21().smiles[:400] + ["not a smiles", "[Na+].[Cl-]", "C"]
    monkeypatch.setattr(molecules, "CHUNK_MOLECULES", 7)
    chunked = featurize_smiles(smiles, workers=1)
    for name in ("atoms", "bonds", "pairs", "atom_ptr", "bond_ptr", "rows"):
        assert torch.equal(getattr(chunked, name), getattr(graphs, name)), name
    assert chunked.invalid == graphs.invalid == [400] and chunked.smiles == graphs.smiles


def test_max_same_element_reads_codes_in_chunks(graphs, monkeypatch):
    import rpfast.experiments.molecules.models as models
    from rpfast.datasets.molecules import ELEMENTS

    molecules = torch.arange(len(graphs))
    batch = graphs.batch(molecules)
    expected = int(torch.bincount(batch.batch * len(ELEMENTS) + batch.element).max())
    assert models.max_same_element(graphs, molecules) == expected
    monkeypatch.setattr(models, "COUNT_CHUNK", 3)
    assert models.max_same_element(graphs, molecules) == expected
    assert models.max_same_element(graphs, molecules[-1:]) == 1  # methane: one carbon
    assert models.max_same_element(graphs, molecules[:0]) == 1
