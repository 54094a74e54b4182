"""Arguments for every registered op on one CSL graph (41 vertices, 4-regular, 16 float32
features): the size of a graph in the paper's CSL task, where a training step is dozens of
small op calls and the cost of crossing into C++ decides the speed."""
from typing import Dict, Tuple

import torch

from rpfast import ops
from rpfast.data import GraphBatch
from rpfast.ops.gin import graph_csr

NODES, FEATURES, SAMPLES = 41, 16, 4
# the ops that are not kernels over tensors (csr: the CPU graph algorithm, the same either way)
NOT_KERNELS = frozenset({"csr"})
# the ops whose outputs are random draws: timed, not compared
RANDOM = frozenset({"sample_ids", "pisgd_relabel"})
# float arguments that are state, not inputs to differentiate (BatchNorm's running statistics)
NOT_DIFFERENTIABLE = {"batch_norm_relu": {3, 4}}


def csl_graph() -> GraphBatch:
    """A CSL graph: the 41-cycle with skip links of length 2 (both directions of every edge)."""
    i = torch.arange(NODES)
    src = torch.cat([i, i])
    dst = torch.cat([(i + 1) % NODES, (i + 2) % NODES])
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    return GraphBatch(edge_index=edge_index, num_nodes=NODES)


def op_samples() -> Dict[str, Tuple]:
    """name -> the op's arguments on one CSL graph (float32, one replica)."""
    g = csl_graph()
    csr = list(graph_csr(g))
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen)

    N, F, P = NODES, FEATURES, SAMPLES
    perms = torch.stack([torch.randperm(N, generator=gen) for _ in range(P)]).unsqueeze(0)
    x, x3, eps = rand(N, F), rand(1, N, F), torch.tensor(0.25)
    out, ties = ops.pool.neighbour_max_op.run(x, *csr)
    gout, gties = ops.pool.graph_max_op.run(x, g.ptr)
    bn = (rand(F), rand(F), torch.zeros(F), torch.ones(F))
    y, xhat, invstd, _, _ = ops.norm.bn_relu_forward_op.run(x, *bn, True, 0.1, 1e-5)
    return {
        "gin_aggregate": (x3, *csr, eps),
        "gin_aggregate_backward": (x3, rand(1, N, F), csr[2], csr[3], eps, True),
        "rooted_round": (rand(F, N, 2), rand(F, N, 2), rand(F, F), rand(F), rand(N), *csr),
        "sum_product": (x3, rand(1, N, F)),
        "segment_sum": (x3, g.ptr),
        "segment_broadcast": (rand(1, 1, F), g.ptr, N),
        "rows_product": (rand(1, N, F), rand(F, F)),
        "matmul_tn": (x, rand(N, F)),
        "linear": (rand(1, N, F), rand(F, F), rand(F)),
        "embedding": (rand(N, F), torch.randperm(N, generator=gen).unsqueeze(0)),
        "scatter_rows_sum": (torch.randperm(N, generator=gen).unsqueeze(0), rand(1, N, F), N),
        "batch_norm_relu": (x, *bn, True, 0.1, 1e-5),
        "batch_norm_relu_backward": (rand(N, F), y, xhat, bn[0], invstd, True),
        "neighbour_max": (x, *csr),
        "neighbour_max_adjoint": (rand(N, F), x, out, ties, *csr),
        "graph_max": (x, g.ptr),
        "graph_max_adjoint": (rand(1, F), x, g.ptr, gout, gties),
        "permute_adjacency": (g.dense_adj(), perms),
        "permute_adjacency_backward": (rand(1, P, N, N, 1), perms, N),
        "permute_nodes": (x.unsqueeze(0), perms),
        "permute_nodes_backward": (rand(1, P, N, F), perms, N),
        "sample_ids": (g.ptr, N, P, N),
        "random_permutations": (torch.tensor([N]), 12345, P, N),
        "random_positions": (g.ptr, g.host_ptr, 12345, P, N, N, g.n_max),
        "pisgd_relabel": (torch.rand(1, N, N, 1, generator=gen), x.unsqueeze(0), torch.tensor([N]), P, N),
    }
