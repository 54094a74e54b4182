"""Compiled kernels with input validation and autograd.

Every op validates its arguments (dtype, device, shape, index range) and raises
``TypeError``/``ValueError``/``IndexError`` naming the bad argument before any kernel runs.
"""
from rpfast.ops.gin import gin_aggregate
from rpfast.ops.permute import permute_adjacency, permute_nodes
from rpfast.ops.random import random_permutations

__all__ = ["gin_aggregate", "permute_adjacency", "permute_nodes", "random_permutations"]
