"""Batched permutation gathers: relabel dense adjacency tensors and node features.

Gather convention (docs/architecture.md): ``perms[b, p, i]`` is the original vertex of graph ``b``
placed at position ``i`` by sample ``p``; -1 marks padding and yields zeros. With
``K = perms.shape[-1] < n`` the result is the k-ary top-left block of the relabeled
graph (paper Fig. 2) without computing the rest.
"""
from typing import Optional

import torch
from torch import Tensor

from rpfast import _backend
from rpfast._validation import (
    INT64_MAX,
    check_output_size,
    index_tensor,
    require_float,
    require_index,
    require_kernel_device,
    require_ndim,
    require_tensor,
)

__all__ = ["permute_adjacency", "permute_nodes"]


# ----------------------------------------------------------------------------- adjacency
@torch.library.custom_op("rpfast::permute_adjacency", mutates_args=())
def _permute_adjacency(adj: Tensor, perms: Tensor) -> Tensor:
    B, _, _, C = adj.shape
    _, P, K = perms.shape
    out = adj.new_empty((B, P, K, K, C))
    _backend.call("permute_adjacency_forward", adj, perms, out)
    return out


@_permute_adjacency.register_fake
def _(adj: Tensor, perms: Tensor) -> Tensor:
    return adj.new_empty((adj.shape[0], perms.shape[1], perms.shape[2], perms.shape[2], adj.shape[3]))


@torch.library.custom_op("rpfast::permute_adjacency_backward", mutates_args=())
def _permute_adjacency_backward(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    B, C = grad.shape[0], grad.shape[-1]
    grad_adj = grad.new_empty((B, n_max, n_max, C))
    _backend.call("permute_adjacency_backward", grad, perms, grad_adj)
    return grad_adj


@_permute_adjacency_backward.register_fake
def _(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    return grad.new_empty((grad.shape[0], n_max, n_max, grad.shape[-1]))


def _adjacency_setup(ctx, inputs, output):
    adj, perms = inputs
    ctx.save_for_backward(perms)
    ctx.n_max = adj.shape[1]


def _adjacency_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return _permute_adjacency_backward(grad.contiguous(), perms, ctx.n_max), None


_permute_adjacency.register_autograd(_adjacency_backward, setup_context=_adjacency_setup)


# ----------------------------------------------------------------------------- nodes
@torch.library.custom_op("rpfast::permute_nodes", mutates_args=())
def _permute_nodes(x: Tensor, perms: Tensor) -> Tensor:
    out = x.new_empty((x.shape[0], perms.shape[1], perms.shape[2], x.shape[2]))
    _backend.call("permute_nodes_forward", x, perms, out)
    return out


@_permute_nodes.register_fake
def _(x: Tensor, perms: Tensor) -> Tensor:
    return x.new_empty((x.shape[0], perms.shape[1], perms.shape[2], x.shape[2]))


@torch.library.custom_op("rpfast::permute_nodes_backward", mutates_args=())
def _permute_nodes_backward(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    grad_x = grad.new_empty((grad.shape[0], n_max, grad.shape[-1]))
    _backend.call("permute_nodes_backward", grad, perms, grad_x)
    return grad_x


@_permute_nodes_backward.register_fake
def _(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    return grad.new_empty((grad.shape[0], n_max, grad.shape[-1]))


def _nodes_setup(ctx, inputs, output):
    x, perms = inputs
    ctx.save_for_backward(perms)
    ctx.n_max = x.shape[1]


def _nodes_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return _permute_nodes_backward(grad.contiguous(), perms, ctx.n_max), None


_permute_nodes.register_autograd(_nodes_backward, setup_context=_nodes_setup)


# ----------------------------------------------------------------------------- public API
def _check_perms(perms, batch_size: int, n_max: int, num_nodes) -> Tensor:
    require_tensor(perms, "perms")
    require_kernel_device(perms, "perms")
    require_index(perms, "perms")
    require_ndim(perms, "perms", (3,), "[B, P, K]")
    if perms.shape[0] != batch_size:
        raise ValueError(
            f"perms has {perms.shape[0]} graphs (dim 0) but the input has {batch_size}"
        )
    perms = perms.contiguous()
    if num_nodes is not None:
        num_nodes = index_tensor(num_nodes, "num_nodes", ndim=1)
        if num_nodes.numel() != batch_size:
            raise ValueError(f"num_nodes has {num_nodes.numel()} entries, expected {batch_size}")
        _backend.call("check_permutations", perms, batch_size, n_max, num_nodes)
    return perms


def permute_adjacency(adj: Tensor, perms: Tensor, num_nodes: Optional[Tensor] = None) -> Tensor:
    r"""Relabel a batch of dense adjacency tensors by a batch of permutations.

    .. math::
        \text{out}[b, p, i, j, :] = \text{adj}[b, \pi_{bp}(i), \pi_{bp}(j), :],
        \qquad \pi_{bp} = \text{perms}[b, p]

    and zero where either index is -1. This is the paper's :math:`A_{\pi,\pi}` for every
    sample at once; with ``K < n`` it is the top-left k-ary block.

    Args:
        adj: ``[B, n, n, C]`` or ``[B, n, n]`` float32/float64 (channel 0 is usually the
            edge indicator, the others edge features).
        perms: ``[B, P, K]`` int64, rows are partial permutations (no repeated vertex,
            -1 for padding), e.g. from :func:`rpfast.ops.random_permutations`.
        num_nodes: optional ``[B]``; if given, entries must also be ``< num_nodes[b]``.

    Returns:
        ``[B, P, K, K, C]`` (or ``[B, P, K, K]`` if ``adj`` had no channel dimension).
        Differentiable in ``adj``; the backward is a deterministic gather with the inverse
        permutations summed over the ``P`` samples.
    """
    require_tensor(adj, "adj")
    require_ndim(adj, "adj", (3, 4), "[B, n, n, C] or [B, n, n]")
    require_kernel_device(adj, "adj")
    require_float(adj, "adj")
    if adj.shape[1] != adj.shape[2]:
        raise ValueError(f"adj must be square in dims 1 and 2, got shape {tuple(adj.shape)}")
    squeeze = adj.dim() == 3
    adj4 = adj.unsqueeze(-1) if squeeze else adj
    perms = _check_perms(perms, adj4.shape[0], adj4.shape[1], num_nodes)
    B, _, _, C = adj4.shape
    K = perms.shape[2]
    if K * K * C > INT64_MAX:  # even with no sample, torch cannot lay out a [K, K, C] block
        raise ValueError(f"perms has K = {K} positions: a relabeled [K, K, C={C}] adjacency would hold more than "
                         f"2^63 entries")
    check_output_size(B * perms.shape[1] * K * K * C, adj.element_size(), "permute_adjacency output")
    out = _permute_adjacency(adj4.contiguous(), perms)
    return out.squeeze(-1) if squeeze else out


def permute_nodes(x: Tensor, perms: Tensor, num_nodes: Optional[Tensor] = None) -> Tensor:
    r"""Relabel a batch of dense node-feature matrices by a batch of permutations.

    .. math:: \text{out}[b, p, i, :] = x[b, \pi_{bp}(i), :]  \quad (0 \text{ where } \pi_{bp}(i) = -1)

    Args:
        x: ``[B, n, F]`` or ``[B, n]`` float32/float64.
        perms: ``[B, P, K]`` int64 partial permutations (see :func:`permute_adjacency`).
        num_nodes: optional ``[B]`` bound on the entries of each graph's rows.

    Returns:
        ``[B, P, K, F]`` (``[B, P, K]`` for 2-D ``x``), differentiable in ``x``.
    """
    require_tensor(x, "x")
    require_ndim(x, "x", (2, 3), "[B, n, F] or [B, n]")
    require_kernel_device(x, "x")
    require_float(x, "x")
    squeeze = x.dim() == 2
    x3 = x.unsqueeze(-1) if squeeze else x
    perms = _check_perms(perms, x3.shape[0], x3.shape[1], num_nodes)
    check_output_size(perms.numel() * x3.shape[2], x.element_size(), "permute_nodes output")
    out = _permute_nodes(x3.contiguous(), perms)
    return out.squeeze(-1) if squeeze else out
