"""Data sets as graphs: the CSL graphs (:mod:`rpfast.datasets.csl`), molecules from SMILES with
RDKit (:mod:`rpfast.datasets.molecules`, the one module that imports RDKit), MoleculeNet CSVs,
Tox21 (shipped) and their splits (:mod:`rpfast.datasets.moleculenet`), the featurisation cache
(:mod:`rpfast.datasets.molecule_cache`), SMILES files
(:mod:`rpfast.datasets.molecule_files`), and graph pairs: pair files and the generated families
of ``rpfast pairs`` (:mod:`rpfast.datasets.pairs`, :mod:`rpfast.datasets.pair_families`).
Graph containers and conversions are :mod:`rpfast.data`'s."""
from rpfast.datasets.csl import PAPER_SKIPS, csl_batch, csl_dataset, csl_graph
from rpfast.datasets.moleculenet import MoleculeDataset, load_tox21, read_moleculenet_csv
from rpfast.datasets.molecules import batch_from_smiles, canonical_order_from_mol, graph_from_smiles

__all__ = [
    "csl_graph",
    "csl_dataset",
    "csl_batch",
    "PAPER_SKIPS",
    "graph_from_smiles",
    "batch_from_smiles",
    "canonical_order_from_mol",
    "MoleculeDataset",
    "load_tox21",
    "read_moleculenet_csv",
]
