"""Compiled kernels with input validation and autograd.

Every op validates its arguments (dtype, device, shape, index range) and raises
``TypeError``/``ValueError``/``IndexError`` naming the bad argument before any kernel runs.
"""
from rpfast.ops.gin import gin_aggregate
from rpfast.ops.gin_layer import gin_mlp
from rpfast.ops.norm import batch_norm_relu
from rpfast.ops.permute import permute_adjacency, permute_nodes
from rpfast.ops.random import random_permutations
from rpfast.ops.segment import segment_sum

__all__ = [
    "batch_norm_relu",
    "gin_aggregate",
    "gin_mlp",
    "permute_adjacency",
    "permute_nodes",
    "random_permutations",
    "segment_sum",
]
