"""Featurised molecules stored as small integer codes, expanded to features one batch at a time.

A molecule's atom and bond features are one-hot blocks of a handful of RDKit properties, so the
set stores the properties (``int16``, 16 bytes an atom and 8 a bond) and its bonds once (local atom
indices, 8 bytes a bond) rather than 75 float32 features an atom and 10 a directed bond (300 and
80 bytes): about 30 times less, some 600 bytes for a molecule of Tox21's size (18.5 atoms,
20 bonds) against 10 KB. :meth:`MoleculeGraphs.batch` expands the molecules of one batch.
Nothing here needs RDKit (:mod:`rpfast.datasets.molecules` reads the codes with it).
"""
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from rpfast.data.batch import GraphBatch
from rpfast.data.segments import offsets, ranges, repeat

__all__ = ["MoleculeGraphs", "ELEMENTS", "ATOM_FEATURES", "BOND_FEATURES", "FEATURE_DTYPE", "CODE_DTYPE", "CODE_NUMPY_DTYPE",
           "ATOM_CODES", "BOND_CODES", "atom_features", "bond_features"]

#: DeepChem ConvMol's element list (the paper's atom features); the last entry catches the rest.
ELEMENTS = ("C", "N", "O", "S", "F", "Si", "P", "Cl", "Br", "Mg", "Na", "Ca", "Fe", "As", "Al", "I", "B", "V",
            "K", "Tl", "Yb", "Sb", "Sn", "Ag", "Pd", "Co", "Se", "Ti", "Zn", "H", "Li", "Ge", "Cu", "Au", "Ni",
            "Cd", "In", "Mn", "Zr", "Cr", "Pt", "Hg", "Pb", "Unknown")
#: Widths of the one-hot blocks of the 75 atom features, in order.
_DEGREES, _VALENCES, _HYBRIDS, _HCOUNTS = 11, 7, 5, 5
#: The width of the atom features (DeepChem's ConvMol: element, degree, valence, charge, ...).
ATOM_FEATURES = 75
#: bond type (single, double, triple, aromatic), conjugated, in ring, stereo (none, any, Z, E)
BOND_FEATURES = 10
#: The dtype of the atom and bond features, whatever ``torch.get_default_dtype()`` is (the
#: kernels read float32; cast with ``.to()`` to train in another precision).
FEATURE_DTYPE = torch.float32
#: The dtype of the stored codes: every RDKit count and index below fits (an atom of 32,767 bonds
#: does not exist).
CODE_DTYPE = torch.int16
#: :data:`CODE_DTYPE` as NumPy spells it
CODE_NUMPY_DTYPE = np.int16
#: The columns of ``atoms``: element index in ELEMENTS, degree, implicit valence, formal charge,
#: radical electrons, hybridisation (SP, SP2, SP3, SP3D, SP3D2 as 0..4, -1 other), aromatic, total H.
ATOM_CODES = ("element", "degree", "valence", "charge", "radicals", "hybridisation", "aromatic", "hydrogens")
#: The columns of ``bonds``: type (single, double, triple, aromatic as 0..3, -1 other), conjugated,
#: in ring, stereo (none, any, Z or cis, E or trans as 0..3).
BOND_CODES = ("type", "conjugated", "ring", "stereo")


def _one_hot(out: Tensor, column: int, values: Tensor, width: int) -> None:
    """``out[i, column + values[i]] = 1`` where ``0 <= values[i] < width`` (other values: no bit)."""
    inside = (values >= 0) & (values < width)
    rows = torch.arange(out.shape[0])[inside]
    out[rows, column + values[inside].long()] = 1.0


def atom_features(codes: Tensor) -> Tensor:
    """``[n, 75]`` float32 atom features (DeepChem ConvMol) of ``codes [n, 8]`` (:data:`ATOM_CODES`):
    element one-hot (44, last = other), degree one-hot (0..10), implicit valence one-hot (0..6),
    formal charge, radical electrons, hybridisation one-hot (5), aromatic, total H one-hot (0..4).
    A count above its block's width sets no bit of the block."""
    out = torch.zeros(codes.shape[0], ATOM_FEATURES, dtype=FEATURE_DTYPE)
    column = 0
    for at, width in ((0, len(ELEMENTS)), (1, _DEGREES), (2, _VALENCES)):
        _one_hot(out, column, codes[:, at], width)
        column += width
    out[:, column], out[:, column + 1] = codes[:, 3], codes[:, 4]
    column += 2
    _one_hot(out, column, codes[:, 5], _HYBRIDS)
    column += _HYBRIDS
    out[:, column] = codes[:, 6]
    _one_hot(out, column + 1, codes[:, 7], _HCOUNTS)
    return out


def bond_features(codes: Tensor) -> Tensor:
    """``[b, 10]`` float32 bond features of ``codes [b, 4]`` (:data:`BOND_CODES`): type one-hot (4),
    conjugated, in ring, stereo one-hot (4)."""
    out = torch.zeros(codes.shape[0], BOND_FEATURES, dtype=FEATURE_DTYPE)
    _one_hot(out, 0, codes[:, 0], 4)
    out[:, 4], out[:, 5] = codes[:, 1], codes[:, 2]
    _one_hot(out, 6, codes[:, 3], 4)
    return out


class MoleculeGraphs:
    """Featurised molecules, concatenated: what every epoch reads instead of re-running RDKit.

    Stored: ``atoms [N, 8]`` and ``bonds [B, 4]``, the RDKit properties as :data:`CODE_DTYPE` codes
    (:data:`ATOM_CODES`, :data:`BOND_CODES`); ``pairs [B, 2]`` int32, each bond's two atoms as
    indices within its molecule; ``atom_ptr [M+1]`` and ``bond_ptr [M+1]`` (int64) delimit molecule
    ``m``'s atoms and bonds; ``rows [M]`` are the molecules' rows in the input, ``invalid`` the rows
    RDKit could not parse and ``smiles`` the kept strings.

    Features, expanded on demand (:func:`atom_features`, :func:`bond_features`): atom features
    ``x [N, 75]`` (DeepChem ConvMol, as the paper) and bond features ``edge_attr [E, 10]`` with
    ``edge_index [2, E]`` (each bond twice: molecule by molecule, its bonds in RDKit's order, then
    the same bonds reversed; ``E = 2 B``, ``edge_ptr = 2 bond_ptr``). The paper counts 14 edge
    features without listing them; these 10 are the ones DeepChem defines. :meth:`batch` expands
    the molecules of one batch; the attributes ``x``, ``edge_attr``, ``edge_index`` and
    ``element`` expand the whole set (for inspection: 300 bytes an atom).
    """

    def __init__(self, atoms: Tensor, bonds: Tensor, pairs: Tensor, atom_ptr: Tensor, bond_ptr: Tensor, rows: Tensor,
                 invalid: Sequence[int], smiles: Sequence[str]):
        self.atoms, self.bonds, self.pairs = atoms, bonds, pairs
        self.atom_ptr, self.bond_ptr, self.rows, self.invalid = atom_ptr, bond_ptr, rows, list(invalid)
        self.smiles = list(smiles)

    def __len__(self) -> int:
        return self.rows.numel()

    #: The constructor's arguments, the entries of :meth:`state`.
    STATE = ("atoms", "bonds", "pairs", "atom_ptr", "bond_ptr", "rows", "invalid", "smiles")

    def state(self) -> dict:
        """The constructor's arguments by name (what the featurisation cache stores)."""
        return {k: getattr(self, k) for k in self.STATE}

    def nbytes(self) -> int:
        """The bytes of the stored tensors (the SMILES strings not counted)."""
        return sum(t.numel() * t.element_size() for t in (self.atoms, self.bonds, self.pairs, self.atom_ptr,
                                                          self.bond_ptr, self.rows))

    @property
    def edge_ptr(self) -> Tensor:
        return 2 * self.bond_ptr

    @property
    def element(self) -> Tensor:
        """``[N]`` int64: each atom's index in :data:`ELEMENTS`."""
        return self.atoms[:, 0].long()

    @property
    def x(self) -> Tensor:
        return atom_features(self.atoms)

    @property
    def edge_attr(self) -> Tensor:
        return self._edges(torch.arange(len(self)))[1]

    @property
    def edge_index(self) -> Tensor:
        return self._edges(torch.arange(len(self)))[0]

    def _edges(self, index: Tensor):
        """``(edge_index [2, 2b], edge_attr [2b, 10], atom offsets [len(index) + 1])`` of molecules
        ``index``, atoms numbered from 0 in the order of ``index``."""
        atoms = self.atom_ptr[index + 1] - self.atom_ptr[index]
        bonds = self.bond_ptr[index + 1] - self.bond_ptr[index]
        bond_rows = ranges(self.bond_ptr[index], bonds)
        atom_start, bond_start = offsets(atoms), offsets(bonds)
        total = bond_rows.numel()
        forward = self.pairs[bond_rows].long().t() + repeat(atom_start[:-1], bonds, total)  # [2, b]
        # molecule m's bonds forward at 2 start_m + j, reversed at 2 start_m + bonds_m + j
        slot = torch.arange(total) + repeat(bond_start[:-1], bonds, total)
        back = slot + repeat(bonds, bonds, total)
        edge_index = torch.empty(2, 2 * total, dtype=torch.int64)
        edge_index[:, slot], edge_index[:, back] = forward, forward.flip(0)
        attr = bond_features(self.bonds[bond_rows])
        edge_attr = torch.empty(2 * total, BOND_FEATURES, dtype=FEATURE_DTYPE)
        edge_attr[slot], edge_attr[back] = attr, attr
        return edge_index, edge_attr, atom_start

    def batch(self, molecules) -> GraphBatch:
        """A :class:`GraphBatch` of molecules ``molecules`` (positions in this set, not input
        rows) with ``x``, ``edge_attr`` and ``element`` / ``smiles`` extras."""
        index = torch.as_tensor(molecules, dtype=torch.int64).reshape(-1)
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= len(self)):
            raise IndexError(f"molecule positions must lie in [0, {len(self)}), got {int(index.min())}..{int(index.max())}")
        edge_index, edge_attr, atom_start = self._edges(index)
        codes = self.atoms[ranges(self.atom_ptr[index], atom_start.diff())]
        graph = GraphBatch(edge_index, x=atom_features(codes), edge_attr=edge_attr, ptr=atom_start)
        graph.extras["element"] = codes[:, 0].long()
        graph.extras["smiles"] = [self.smiles[i] for i in index.tolist()]
        return graph

    def singles(self, molecules, chunk: int = 256) -> Iterator[GraphBatch]:
        """One-molecule :class:`GraphBatch` es of ``molecules`` in order, each the same tensors bit
        for bit as ``batch([m])``: features are expanded for ``chunk`` molecules at a time (the
        expansion is row by row and exact) and sliced, which halves the cost of scoring molecules
        one at a time (the expansion was 40% of it)."""
        index = torch.as_tensor(molecules, dtype=torch.int64).reshape(-1)
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        for start in range(0, index.numel(), chunk):
            part = index[start:start + chunk]
            graph = self.batch(part)
            atom_ptr = graph.ptr.tolist()
            edge_ptr = (2 * (self.bond_ptr[part + 1] - self.bond_ptr[part])).cumsum(0).tolist()
            x, edge_index, edge_attr, element = graph.x, graph.edge_index, graph.edge_attr, graph.extras["element"]
            for m in range(part.numel()):
                a0, a1 = atom_ptr[m], atom_ptr[m + 1]
                e0, e1 = (edge_ptr[m - 1] if m else 0), edge_ptr[m]
                one = GraphBatch((edge_index[:, e0:e1] - a0).contiguous(), x=x[a0:a1], edge_attr=edge_attr[e0:e1],
                                 ptr=torch.tensor([0, a1 - a0]))
                one.extras["element"] = element[a0:a1]
                one.extras["smiles"] = [graph.extras["smiles"][m]]
                yield one
