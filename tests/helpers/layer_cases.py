"""Small graphs and one instance of every rpfast layer, shared by the device tests
(tests/ops/test_devices.py: the composed path against the C++ kernels; tests/ops/test_cuda.py: a GPU
against the CPU)."""
import torch

from rpfast.data import GraphBatch
from rpfast.nn import (GIN, RPGIN, Duvenaud, Exact, GINConv, KAry, Oriented, PiSGD, RelationalPooling, RootedRP,
                       SubgraphRP, VecMLP, VecRNN)


def small_batch(dtype=torch.float64) -> GraphBatch:
    """Three graphs: a triangle with a tail, an isolated vertex, a 4-cycle (both directions)."""
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (5, 6), (6, 7), (7, 8), (8, 5)]
    edge_index = torch.tensor(edges + [(j, i) for i, j in edges]).t()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 3, generator=gen, dtype=dtype)
    return GraphBatch(edge_index, x=x, ptr=torch.tensor([0, 4, 5, 9]))


def layer_cases() -> dict:
    """name -> a function giving (a float64 layer, its inputs) on the CPU, on ``small_batch``."""
    g = small_batch(torch.float64)
    dense_adj, dense_x, sizes = g.dense_adj(), g.dense_x(), g.num_nodes

    def rp(strategy, positions=4):
        f = VecMLP(positions, dense_adj.shape[-1], 3, 8, 2).double()
        return RelationalPooling(f, strategy, generator=torch.Generator().manual_seed(0)), (dense_adj, dense_x, sizes)

    return {
        "GINConv": lambda: (GINConv(torch.nn.Linear(3, 4).double(), train_eps=True), (g.x, g)),
        "GIN": lambda: (GIN(3, 8, 2, 4).double(), (g.x, g)),
        "GIN-flat": lambda: (GIN(3, 8, 2, 4, flat_parameters=True).double(), (g.x, g)),
        "GIN-wide": lambda: (GIN(3, 80, 2, 4).double(), (g.x, g)),
        "RPGIN": lambda: (RPGIN(3, 8, 2, 4, id_dim=3, generator=torch.Generator().manual_seed(0)).double(),
                          (g.x, g)),
        "Duvenaud": lambda: (Duvenaud(3, 2, conv=(8, 8), dense=16).double(), (g,)),
        "RP-Exact": lambda: rp(Exact(4)),
        "RP-PiSGD": lambda: rp(PiSGD(4, train_samples=3)),
        "RP-KAry": lambda: rp(KAry(2), 2),
        "RP-Oriented": lambda: rp(Oriented("bfs", 3, starts="all"), 3),
        "RP-PiSGD-VecRNN": lambda: (RelationalPooling(VecRNN(4, dense_adj.shape[-1], 3, 8, 2).double(),
                                                      PiSGD(4, train_samples=2),
                                                      generator=torch.Generator().manual_seed(0)),
                                    (dense_adj, dense_x, sizes)),
        # graph input: the relabeled adjacency is written from the edges (no dense view)
        "RelationalPooling-graph": lambda: (
            RelationalPooling(VecRNN(4, dense_adj.shape[-1], 3, 8, 2, cell="gru").double(), PiSGD(4, train_samples=2),
                              generator=torch.Generator().manual_seed(0)), (g,)),
        "RootedRP": lambda: (RootedRP(3, 8, 3, 2, train_roots=2, generator=torch.Generator().manual_seed(0)).double(),
                             (g.x, g)),
        "SubgraphRP": lambda: (SubgraphRP(Duvenaud(3, 2, conv=(8,), dense=8).double(), Oriented("bfs", 3, starts="all"),
                                          generator=torch.Generator().manual_seed(0)), (g,)),
    }
