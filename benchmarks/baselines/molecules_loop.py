"""Molecule featurisation and the Duvenaud model as a competent user writes them without rpfast:
a per-molecule, per-atom Python loop over RDKit (DeepChem's ConvMol recipe), and PyG's MFConv
(Duvenaud et al.'s degree-specific convolution) with PyG pooling and a PyG DataLoader."""
import torch
from torch import nn

from rpfast.datasets.molecules import ELEMENTS

HYBRIDS = ("SP", "SP2", "SP3", "SP3D", "SP3D2")


def one_hot(value, choices):
    return [float(value == c) for c in choices]


def atom_features(atom):
    """The 75 ConvMol features of one atom, as DeepChem builds them."""
    symbol = atom.GetSymbol() if atom.GetSymbol() in ELEMENTS[:-1] else "Unknown"
    return (one_hot(symbol, ELEMENTS) + one_hot(atom.GetDegree(), range(11)) + one_hot(atom.GetImplicitValence(), range(7))
            + [float(atom.GetFormalCharge()), float(atom.GetNumRadicalElectrons())]
            + one_hot(str(atom.GetHybridization()), HYBRIDS) + [float(atom.GetIsAromatic())]
            + one_hot(atom.GetTotalNumHs(), range(5)))


def bond_features(bond):
    return (one_hot(str(bond.GetBondType()), ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC"))
            + [float(bond.GetIsConjugated()), float(bond.IsInRing())]
            + one_hot(str(bond.GetStereo()), ("STEREONONE", "STEREOANY", "STEREOZ", "STEREOE")))


def featurize_loop(smiles_list):
    """One PyG ``Data`` per parsable molecule."""
    from rdkit import Chem, RDLogger
    from torch_geometric.data import Data

    RDLogger.DisableLog("rdApp.*")
    out = []
    for smiles in smiles_list:
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            continue
        x = torch.tensor([atom_features(a) for a in mol.GetAtoms()], dtype=torch.float32).reshape(-1, 75)
        edges, attrs = [], []
        for b in mol.GetBonds():
            i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
            f = bond_features(b)
            edges += [(i, j), (j, i)]
            attrs += [f, f]
        out.append(Data(x=x, edge_index=torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t().contiguous(),
                        edge_attr=torch.tensor(attrs, dtype=torch.float32).reshape(-1, 10)))
    RDLogger.EnableLog("rdApp.*")
    return out


class PygDuvenaud(nn.Module):
    """rpfast.nn.Duvenaud's architecture from PyG parts: MFConv, BatchNorm, neighbourhood max
    (torch_geometric.utils.scatter), global add / max pooling."""

    def __init__(self, in_dim, num_tasks, conv=(64, 64), dense=128, max_degree=10):
        super().__init__()
        from torch_geometric.nn import MFConv

        widths = [in_dim, *conv]
        self.convs = nn.ModuleList(MFConv(a, b, max_degree=max_degree) for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(w) for w in widths[1:])
        self.dense, self.dense_norm = nn.Linear(widths[-1], dense), nn.BatchNorm1d(dense)
        self.head = nn.Linear(2 * dense, num_tasks)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_add_pool, global_max_pool
        from torch_geometric.utils import scatter

        for conv, norm in zip(self.convs, self.norms):
            h = norm(torch.relu(conv(x, edge_index)))
            pooled = scatter(h[edge_index[0]], edge_index[1], dim=0, dim_size=h.shape[0], reduce="max")
            x = torch.maximum(h, pooled)
        h = self.dense_norm(torch.relu(self.dense(x)))
        return self.head(torch.tanh(torch.cat([global_add_pool(h, batch), global_max_pool(h, batch)], dim=1)))


def load_rpfast_weights(pyg: PygDuvenaud, ours) -> None:
    """Give ``pyg`` the weights of rpfast's ``Duvenaud`` ``ours`` (same widths), so both compute
    one function: MFConv's ``lins_r[d]`` is the self half of rpfast's ``weights[d]``, ``lins_l[d]``
    the neighbour half with the degree's bias."""
    with torch.no_grad():
        for conv, theirs in zip(ours.convs, pyg.convs):
            half = conv.in_dim
            for d, weight in enumerate(conv.weights):
                theirs.lins_r[d].weight.copy_(weight[:half].T)
                theirs.lins_l[d].weight.copy_(weight[half:].T)
                theirs.lins_l[d].bias.copy_(conv.bias[d])
        pyg.norms.load_state_dict(ours.norms.state_dict())
        pyg.dense.load_state_dict(ours.dense.state_dict())
        pyg.dense_norm.load_state_dict(ours.dense_norm.state_dict())
        pyg.head.load_state_dict(ours.head.state_dict())
