r"""One round of :class:`~rpfast.nn.rp.RootedRP`'s message passing, before its activation:

.. math::
    z_{c, v} = b_c + \textstyle\sum_k W_{c k}\, h_{k, v} + s_v \big(p_{c, v} + \sum_{u \to v} p_{c, u}\big)

for activations laid out feature-major, ``h, p, z [D, N, R]`` (D features, N nodes, R root
sets), ``W [D, D]`` (the round's weight on a node's own state), ``b [D]``, ``s [N]`` (the
neighbour scale) and ``p = W' h`` (the weight on the neighbour sum, applied before it: the sum
is linear). The C++ kernel makes one pass over the nodes where the composed form makes five
(the product with W, the aggregation, the scale, two sums): in RootedRP's eval passes over
thousands of root sets, those passes are most of the time (on 64 relabeled 41-vertex graphs
with R = 64, one thread: 1.1 ms against 3.9 ms).
"""
import torch
from torch import Tensor

from rpfast import _backend
from rpfast._validation import require_float, require_ndim, require_tensor
from rpfast.data import GraphBatch
from rpfast.ops._registry import declare
from rpfast.ops.gin import gin_aggregate_op, graph_csr

__all__ = ["rooted_round"]


def _kernel(h: Tensor, p: Tensor, own: Tensor, bias: Tensor, scale: Tensor, rowptr: Tensor, col: Tensor,
            out_rowptr: Tensor, out_col: Tensor) -> Tensor:
    z = torch.empty_like(h)
    _backend.call("rooted_round", h, p, own, bias, scale, rowptr, col, z)
    return z


def _neighbour_sums(p: Tensor, rowptr: Tensor, col: Tensor, out_rowptr: Tensor, out_col: Tensor) -> Tensor:
    """``p_v + sum_{u -> v} p_u`` for every feature (GIN's aggregation of D replicas)."""
    return gin_aggregate_op(p, rowptr, col, out_rowptr, out_col, p.new_zeros(()))


def _composed(h: Tensor, p: Tensor, own: Tensor, bias: Tensor, scale: Tensor, rowptr: Tensor, col: Tensor,
              out_rowptr: Tensor, out_col: Tensor) -> Tensor:
    D = h.shape[0]
    summed = _neighbour_sums(p, rowptr, col, out_rowptr, out_col) * scale.view(1, -1, 1)
    return (own @ h.reshape(D, -1)).view(h.shape) + summed + bias.view(D, 1, 1)


def _fake(h, p, own, bias, scale, rowptr, col, out_rowptr, out_col):
    return torch.empty_like(h)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    """``dh = W^T g``, ``dp = (1 + A)^T (s g)``, ``dW = g h^T``, ``db = sum g``, ``ds_v = sum g (1 + A) p``."""
    h, p, own, bias, scale, rowptr, col, out_rowptr, out_col = ctx.saved_tensors
    need = ctx.needs_input_grad
    D = h.shape[0]
    flat = grad.reshape(D, -1)
    grad_h = (own.t() @ flat).view(h.shape) if need[0] else None
    grad_p = _neighbour_sums(grad * scale.view(1, -1, 1), out_rowptr, out_col, rowptr, col) if need[1] else None
    grad_own = flat @ h.reshape(D, -1).t() if need[2] else None
    grad_bias = grad.sum(dim=(1, 2)) if need[3] else None
    grad_scale = ((grad * _neighbour_sums(p, rowptr, col, out_rowptr, out_col)).sum(dim=(0, 2))
                  if need[4] else None)
    return grad_h, grad_p, grad_own, grad_bias, grad_scale, None, None, None, None


rooted_round_op = declare(
    "rooted_round", "(Tensor h, Tensor p, Tensor own, Tensor bias, Tensor scale, Tensor rowptr, Tensor col, "
                    "Tensor out_rowptr, Tensor out_col) -> Tensor",
    kernels={"cpu": _kernel}, composed=_composed, fake=_fake, setup=_setup, backward=_backward)


def rooted_round(h: Tensor, p: Tensor, own: Tensor, bias: Tensor, scale: Tensor, graph: GraphBatch) -> Tensor:
    """``z [D, N, R]`` of the module docstring for ``h, p [D, N, R]``, ``own [D, D]``, ``bias [D]``
    and ``scale [N]`` over the edges ``u -> v`` of ``graph`` (all one float dtype, on the graph's
    device)."""
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    for value, name in ((h, "h"), (p, "p"), (own, "own"), (bias, "bias"), (scale, "scale")):
        require_tensor(value, name)
        require_float(value, name)
        if value.dtype != h.dtype:
            raise TypeError(f"rooted_round: {name} is {value.dtype} but h is {h.dtype}; give all one dtype")
        if value.device != graph.device:
            raise ValueError(f"{name} is on {value.device} but the graph is on {graph.device}; move one with .to()")
    require_ndim(h, "h", (3,), "[D, N, R]")
    D, N = h.shape[0], graph.total_nodes
    if h.shape[1] != N or p.shape != h.shape:
        raise ValueError(f"rooted_round: h and p must be [{D}, {N}, R] (the graph has {N} nodes), got "
                         f"{tuple(h.shape)} and {tuple(p.shape)}")
    if own.shape != (D, D) or bias.shape != (D,) or scale.shape != (N,):
        raise ValueError(f"rooted_round: own [D, D], bias [D], scale [N] with D = {D}, N = {N}; got "
                         f"{tuple(own.shape)}, {tuple(bias.shape)}, {tuple(scale.shape)}")
    return rooted_round_op(h.contiguous(), p.contiguous(), own.contiguous(), bias.contiguous(), scale.contiguous(),
                           *graph_csr(graph))
