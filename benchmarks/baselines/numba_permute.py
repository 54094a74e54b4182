"""What a Numba user would write: prange gathers for permute_adjacency and its backward."""
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def permute_adjacency_forward(adj, perms):
    B, P, K = perms.shape
    C = adj.shape[3]
    out = np.zeros((B, P, K, K, C), dtype=adj.dtype)
    for r in prange(B * P * K):
        b = r // (P * K)
        p = (r // K) % P
        i = r % K
        u = perms[b, p, i]
        if u < 0:
            continue
        for j in range(K):
            v = perms[b, p, j]
            if v >= 0:
                for c in range(C):
                    out[b, p, i, j, c] = adj[b, u, v, c]
    return out


@njit(parallel=True, cache=True)
def permute_adjacency_backward(grad, perms, n):
    B, P, K = perms.shape
    C = grad.shape[4]
    grad_adj = np.zeros((B, n, n, C), dtype=grad.dtype)
    for b in prange(B):  # each thread owns whole graphs: no races
        for p in range(P):
            for i in range(K):
                u = perms[b, p, i]
                if u < 0:
                    continue
                for j in range(K):
                    v = perms[b, p, j]
                    if v >= 0:
                        for c in range(C):
                            grad_adj[b, u, v, c] += grad[b, p, i, j, c]
    return grad_adj
