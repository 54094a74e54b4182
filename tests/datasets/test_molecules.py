"""rpfast.datasets.molecules: SMILES and RDKit molecules as graphs, RDKit's canonical order."""
import pytest
import torch

from rpfast.datasets import batch_from_smiles, canonical_order_from_mol
from rpfast.ops import permute_adjacency, permute_nodes

pytest.importorskip("rdkit")


def test_rdkit_canonical_order_makes_smiles_spellings_agree():
    pytest.importorskip("rdkit")
    from rdkit import Chem

    spellings = ["OC(=O)c1ccccc1N", "Nc1ccccc1C(O)=O", "c1ccc(N)c(C(=O)O)c1"]  # anthranilic acid
    batch, kept = batch_from_smiles(spellings)
    order = canonical_order_from_mol(spellings)
    oriented = permute_adjacency(batch.dense_adj(), order)
    atoms = torch.zeros(batch.num_graphs, batch.n_max, 1)
    for b, smiles in enumerate(spellings):
        numbers = [a.GetAtomicNum() for a in Chem.MolFromSmiles(smiles).GetAtoms()]
        atoms[b, :len(numbers), 0] = torch.tensor(numbers, dtype=torch.float32)
    oriented_atoms = permute_nodes(atoms, order)
    for i in (1, 2):
        assert torch.equal(oriented[0], oriented[i])
        assert torch.equal(oriented_atoms[0], oriented_atoms[i])
    single = canonical_order_from_mol(Chem.MolFromSmiles("CCO"))
    assert single.shape == (1, 1, 3)
    with pytest.raises(ValueError, match="not a valid RDKit Mol or SMILES"):
        canonical_order_from_mol(["CCO", "C1CC"])


def test_batch_from_smiles_treats_a_bare_string_as_one_molecule():
    pytest.importorskip("rdkit")
    from rpfast.datasets import batch_from_smiles

    batch, kept = batch_from_smiles("CCO")
    assert batch.num_graphs == 1 and batch.total_nodes == 3
    assert kept.tolist() == [0]


@pytest.mark.parametrize("call, message", [
    (lambda f, g: f([None]), "smiles_list[0] must be a SMILES string, got NoneType"),
    (lambda f, g: f(["CCO", b"CC"]), "smiles_list[1] must be a SMILES string, got bytes"),
    (lambda f, g: g(None), "smiles must be a SMILES string, got NoneType"),
])
def test_smiles_readers_reject_non_strings(call, message):
    pytest.importorskip("rdkit")
    from rpfast.datasets import batch_from_smiles, graph_from_smiles

    with pytest.raises(TypeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call(batch_from_smiles, graph_from_smiles)


def test_canonical_order_from_mol_lives_in_data_only():
    from rpfast import ops

    assert not hasattr(ops, "canonical_order_from_mol")
