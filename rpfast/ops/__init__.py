"""Compiled kernels with input validation and autograd.

Every op validates its arguments (dtype, device, shape, index range) and raises
``TypeError``/``ValueError``/``IndexError`` naming the bad argument before any kernel runs.
"""
from rpfast.ops.dense import embedding, linear
from rpfast.ops.gin import gin_aggregate
from rpfast.ops.gin_layer import gin_mlp
from rpfast.ops.norm import batch_norm_relu
from rpfast.ops.orient import WLOrder, bfs_order, dfs_order, wl_order
from rpfast.ops.permute import permute_adjacency, permute_nodes
from rpfast.ops.pool import graph_max, neighbour_max
from rpfast.ops.random import random_permutations
from rpfast.ops.rooted import rooted_pool, rooted_round
from rpfast.ops.segment import graph_sum, segment_sum
from rpfast.ops.subsets import (
    count_k_subsets,
    get_memory_budget,
    iter_k_subsets,
    k_subsets,
    sample_k_subsets,
    set_memory_budget,
)

__all__ = [
    "WLOrder",
    "embedding",
    "linear",
    "neighbour_max",
    "graph_max",
    "batch_norm_relu",
    "bfs_order",
    "dfs_order",
    "count_k_subsets",
    "get_memory_budget",
    "iter_k_subsets",
    "k_subsets",
    "sample_k_subsets",
    "set_memory_budget",
    "wl_order",
    "gin_aggregate",
    "rooted_round",
    "rooted_pool",
    "gin_mlp",
    "permute_adjacency",
    "permute_nodes",
    "random_permutations",
    "segment_sum",
    "graph_sum",
]
