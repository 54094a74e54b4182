"""RP-GIN as the RP paper's own code builds it (Murphy et al. 2019, `Run_Gin_Experiment.py` with
`--model-type rpGin --use-batchnorm`), rewritten here from its description for timing:

* every forward builds the batch's block-diagonal ``A + I`` (SciPy ``block_diag`` of the
  graphs' COO matrices with self loops) and a 0/1 graph-membership matrix, both as torch
  sparse COO tensors, and aggregates with ``torch.sparse.mm``;
* the input is the one-hot ID matrix ``onehot(perm mod m)`` with a fresh NumPy permutation
  per graph (the featureless CSL case);
* every layer's MLP is Linear -> ReLU -> BatchNorm repeated ``mlp_hidden`` times, then a
  last Linear (the paper code's MLP class, Xavier-initialised, zero biases);
* the readout concatenates the per-graph sums of the input and of every layer, then one
  Linear; inference averages the logits of several relabelings.
"""
import numpy as np
import scipy.sparse as sps
import torch
from torch import nn


def _mlp(in_dim: int, hidden: int, out_dim: int, mlp_hidden: int) -> nn.Sequential:
    layers = []
    dims = [in_dim] + [hidden] * mlp_hidden + [out_dim]
    for i in range(mlp_hidden + 1):
        linear = nn.Linear(dims[i], dims[i + 1])
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i < mlp_hidden:
            layers += [nn.ReLU(), nn.BatchNorm1d(dims[i + 1])]
    return nn.Sequential(*layers)


class PaperRPGIN(nn.Module):
    """``forward(adjmats, ids_dim)``: adjmats a list of SciPy COO matrices with unit diagonal."""

    def __init__(self, id_dim: int, hidden: int = 16, num_layers: int = 5, out_dim: int = 10, mlp_hidden: int = 2,
                 seed: int = 0):
        super().__init__()
        self.id_dim = id_dim
        self.mlps = nn.ModuleList(_mlp(id_dim if l == 0 else hidden, hidden, hidden, mlp_hidden)
                                  for l in range(num_layers))
        self.epsilons = nn.ParameterList(nn.Parameter(torch.zeros(1)) for _ in range(num_layers))
        self.last_linear = nn.Linear(id_dim + num_layers * hidden, out_dim)
        self.rng = np.random.RandomState(seed)

    def _operators(self, adjmats):
        block = sps.block_diag(adjmats)
        rows, cols = sps.find(block)[:2]
        adjacency = torch.sparse_coo_tensor(torch.tensor(np.stack([rows, cols])), torch.ones(len(rows)),
                                            block.shape)
        sizes = [m.shape[0] for m in adjmats]
        graph_of = np.repeat(np.arange(len(sizes)), sizes)
        summation = torch.sparse_coo_tensor(torch.tensor(np.stack([graph_of, np.arange(len(graph_of))])),
                                            torch.ones(len(graph_of)), (len(sizes), len(graph_of)))
        return adjacency, summation

    def _onehot_ids(self, adjmats) -> torch.Tensor:
        blocks = []
        for m in adjmats:
            n = m.shape[0]
            ids = np.zeros((n, self.id_dim), dtype=np.float32)
            ids[np.arange(n), self.rng.permutation(n) % self.id_dim] = 1.0
            blocks.append(torch.from_numpy(ids))
        return torch.cat(blocks)

    def forward(self, adjmats) -> torch.Tensor:
        adjacency, summation = self._operators(adjmats)
        h = self._onehot_ids(adjmats)
        pooled = [torch.sparse.mm(summation, h)]
        for mlp, eps in zip(self.mlps, self.epsilons):
            h = mlp(torch.sparse.mm(adjacency, h) + eps * h)
            pooled.append(torch.sparse.mm(summation, h))
        return self.last_linear(torch.cat(pooled, dim=1))

    @torch.no_grad()
    def inference(self, adjmats, num_perms: int) -> torch.Tensor:
        return torch.stack([self(adjmats) for _ in range(num_perms)]).mean(dim=0)


def coo_adjmats(graphs, indices):
    """SciPy COO adjacency matrices with unit diagonal (the paper code's input) of ``graphs[indices]``."""
    out = []
    for i in indices:
        edge_index, n = graphs[i]
        src, dst = edge_index.numpy()
        matrix = sps.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)) + sps.identity(n, format="coo")
        out.append(sps.coo_matrix(matrix))
    return out
