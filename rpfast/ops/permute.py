"""Batched permutation gathers: relabel dense adjacency tensors and node features.

Gather convention (docs/architecture.md): ``perms[b, p, i]`` is the original vertex of graph ``b``
placed at position ``i`` by sample ``p``; -1 marks padding and yields zeros. With
``K = perms.shape[-1] < n`` the result is the k-ary top-left block of the relabeled
graph (paper Fig. 2) without computing the rest.

Registered ops (:mod:`rpfast.ops._registry`): ``permute_adjacency`` / ``permute_nodes`` and their
adjoints, each the other's backward. C++ on the CPU; elsewhere advanced indexing into the input
padded with a zero row (and column), and ``index_add_`` for the adjoints. The permutations are
checked on the CPU (a copy for tensors elsewhere).
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from rpfast import _backend
from rpfast.ops._registry import declare
from rpfast._validation import (
    check_layout,
    check_output_size,
    index_tensor,
    require_float,
    require_index,
    require_ndim,
    require_tensor,
)

__all__ = ["permute_adjacency", "permute_nodes"]


# ----------------------------------------------------------------------------- composed forms
def _positions(perms: Tensor, n: int) -> Tensor:
    """``perms`` with padding (-1) pointing at ``n``: the zero row appended to the input."""
    return torch.where(perms >= 0, perms, n)


def _check(perms: Tensor, n_max: int) -> None:
    """The kernels' check of ``perms`` (range, repeats) for the composed forms, on a CPU copy
    (the values of a ``meta`` tensor are unknown: not checked)."""
    if perms.device.type != "meta":
        _backend.call("check_permutations", perms.cpu(), perms.shape[0], n_max, None)


def _graph_ids(perms: Tensor) -> Tensor:
    return torch.arange(perms.shape[0], device=perms.device).view(-1, 1, 1)


def _adjacency_composed(adj: Tensor, perms: Tensor) -> Tensor:
    _check(perms, adj.shape[1])
    at = _positions(perms, adj.shape[1])
    padded = F.pad(adj, (0, 0, 0, 1, 0, 1))  # a zero row and column at index n
    return padded[_graph_ids(perms).unsqueeze(-1), at.unsqueeze(-1), at.unsqueeze(-2)]


def _adjacency_backward_composed(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    _check(perms, n_max)
    B, C, m = grad.shape[0], grad.shape[-1], n_max + 1
    at = _positions(perms, n_max)
    cells = ((_graph_ids(perms).unsqueeze(-1) * m + at.unsqueeze(-1)) * m + at.unsqueeze(-2)).reshape(-1)
    summed = grad.new_zeros((B * m * m, C)).index_add_(0, cells, grad.reshape(-1, C))
    return summed.view(B, m, m, C)[:, :n_max, :n_max].contiguous()


def _nodes_composed(x: Tensor, perms: Tensor) -> Tensor:
    _check(perms, x.shape[1])
    padded = F.pad(x, (0, 0, 0, 1))  # a zero row at index n
    return padded[_graph_ids(perms), _positions(perms, x.shape[1])]


def _nodes_backward_composed(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    _check(perms, n_max)
    B, F_, m = grad.shape[0], grad.shape[-1], n_max + 1
    rows = (_graph_ids(perms) * m + _positions(perms, n_max)).reshape(-1)
    summed = grad.new_zeros((B * m, F_)).index_add_(0, rows, grad.reshape(-1, F_))
    return summed.view(B, m, F_)[:, :n_max].contiguous()


# ----------------------------------------------------------------------------- kernels
def _adjacency_kernel(adj: Tensor, perms: Tensor) -> Tensor:
    out = adj.new_empty((adj.shape[0], perms.shape[1], perms.shape[2], perms.shape[2], adj.shape[3]))
    _backend.call("permute_adjacency_forward", adj, perms, out)
    return out


def _adjacency_backward_kernel(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    grad_adj = grad.new_empty((grad.shape[0], n_max, n_max, grad.shape[-1]))
    _backend.call("permute_adjacency_backward", grad, perms, grad_adj)
    return grad_adj


def _nodes_kernel(x: Tensor, perms: Tensor) -> Tensor:
    out = x.new_empty((x.shape[0], perms.shape[1], perms.shape[2], x.shape[2]))
    _backend.call("permute_nodes_forward", x, perms, out)
    return out


def _nodes_backward_kernel(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    grad_x = grad.new_empty((grad.shape[0], n_max, grad.shape[-1]))
    _backend.call("permute_nodes_backward", grad, perms, grad_x)
    return grad_x


# The CUDA kernels: the composed path's check of the permutations (the device's memory is not
# read on the host), then the same binding call; the adjoints write the inverse permutations
# into a scratch tensor first.
def _adjacency_cuda(adj: Tensor, perms: Tensor) -> Tensor:
    _check(perms, adj.shape[1])
    return _adjacency_kernel(adj, perms)


def _inverse_scratch(perms: Tensor, n_max: int) -> Tensor:
    return torch.empty((perms.shape[0], perms.shape[1], n_max), dtype=torch.int64, device=perms.device)


def _adjacency_backward_cuda(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    _check(perms, n_max)
    grad_adj = grad.new_empty((grad.shape[0], n_max, n_max, grad.shape[-1]))
    _backend.call("permute_adjacency_backward", grad, perms, grad_adj, _inverse_scratch(perms, n_max))
    return grad_adj


def _nodes_cuda(x: Tensor, perms: Tensor) -> Tensor:
    _check(perms, x.shape[1])
    return _nodes_kernel(x, perms)


def _nodes_backward_cuda(grad: Tensor, perms: Tensor, n_max: int) -> Tensor:
    _check(perms, n_max)
    grad_x = grad.new_empty((grad.shape[0], n_max, grad.shape[-1]))
    _backend.call("permute_nodes_backward", grad, perms, grad_x, _inverse_scratch(perms, n_max))
    return grad_x


# ----------------------------------------------------------------------------- autograd
# Both gathers are linear in their input; each backward is the adjoint scatter (a gather with
# the inverse permutation, summed over the samples), whose backward is the gather again.
def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.n_max = inputs[0].shape[1]


def _adjoint_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _adjacency_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return permute_adjacency_backward_op(grad.contiguous(), perms, ctx.n_max), None


def _adjacency_double_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return permute_adjacency_op(grad.contiguous(), perms), None, None


def _nodes_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return permute_nodes_backward_op(grad.contiguous(), perms, ctx.n_max), None


def _nodes_double_backward(ctx, grad):
    (perms,) = ctx.saved_tensors
    return permute_nodes_op(grad.contiguous(), perms), None, None


permute_adjacency_op = declare(
    "permute_adjacency", "(Tensor adj, Tensor perms) -> Tensor",
    kernels={"cpu": _adjacency_kernel, "cuda": _adjacency_cuda}, composed=_adjacency_composed,
    fake=lambda adj, perms: adj.new_empty((adj.shape[0], perms.shape[1], perms.shape[2], perms.shape[2],
                                           adj.shape[3])),
    setup=_setup, backward=_adjacency_backward)
permute_adjacency_backward_op = declare(
    "permute_adjacency_backward", "(Tensor grad, Tensor perms, SymInt n_max) -> Tensor",
    kernels={"cpu": _adjacency_backward_kernel, "cuda": _adjacency_backward_cuda}, composed=_adjacency_backward_composed,
    fake=lambda grad, perms, n_max: grad.new_empty((grad.shape[0], n_max, n_max, grad.shape[-1])),
    setup=_adjoint_setup, backward=_adjacency_double_backward)
permute_nodes_op = declare(
    "permute_nodes", "(Tensor x, Tensor perms) -> Tensor",
    kernels={"cpu": _nodes_kernel, "cuda": _nodes_cuda}, composed=_nodes_composed,
    fake=lambda x, perms: x.new_empty((x.shape[0], perms.shape[1], perms.shape[2], x.shape[2])),
    setup=_setup, backward=_nodes_backward)
permute_nodes_backward_op = declare(
    "permute_nodes_backward", "(Tensor grad, Tensor perms, SymInt n_max) -> Tensor",
    kernels={"cpu": _nodes_backward_kernel, "cuda": _nodes_backward_cuda}, composed=_nodes_backward_composed,
    fake=lambda grad, perms, n_max: grad.new_empty((grad.shape[0], n_max, grad.shape[-1])),
    setup=_adjoint_setup, backward=_nodes_double_backward)


# ----------------------------------------------------------------------------- public API
def _check_perms(perms, batch_size: int, n_max: int, num_nodes, device: torch.device) -> Tensor:
    require_tensor(perms, "perms")
    require_index(perms, "perms")
    if perms.device != device:
        raise ValueError(f"perms is on {perms.device} but the input is on {device}; put them on one device")
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
        if device.type != "meta":  # the values of a meta tensor are unknown
            _backend.call("check_permutations", perms.cpu(), batch_size, n_max, num_nodes.cpu())
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
    require_float(adj, "adj")
    if adj.shape[1] != adj.shape[2]:
        raise ValueError(f"adj must be square in dims 1 and 2, got shape {tuple(adj.shape)}")
    squeeze = adj.dim() == 3
    adj4 = adj.unsqueeze(-1) if squeeze else adj
    perms = _check_perms(perms, adj4.shape[0], adj4.shape[1], num_nodes, adj.device)
    B, _, _, C = adj4.shape
    K = perms.shape[2]
    check_layout((B, perms.shape[1], K, K, C), "the permute_adjacency output")
    check_output_size(B * perms.shape[1] * K * K * C, adj.element_size(), "permute_adjacency output")
    out = permute_adjacency_op(adj4.contiguous(), perms)
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
    require_float(x, "x")
    squeeze = x.dim() == 2
    x3 = x.unsqueeze(-1) if squeeze else x
    perms = _check_perms(perms, x3.shape[0], x3.shape[1], num_nodes, x.device)
    check_layout((x3.shape[0], perms.shape[1], perms.shape[2], x3.shape[2]), "the permute_nodes output")
    check_output_size(perms.numel() * x3.shape[2], x.element_size(), "permute_nodes output")
    out = permute_nodes_op(x3.contiguous(), perms)
    return out.squeeze(-1) if squeeze else out
