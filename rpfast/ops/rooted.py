r"""The message passing of :class:`~rpfast.nn.rp.RootedRP`: :func:`rooted_round`, one round before its
activation (differentiable: the rounds of a RootedRP that learns them), and :func:`rooted_pool`,
every round of a fixed hash and the pooling in one call (forward only).

One round:

.. math::
    z_{c, v} = b_c + \textstyle\sum_k W_{c k}\, h_{k, v} + s_v \big(p_{c, v} + \sum_{u \to v} p_{c, u}\big)

for activations laid out feature-major, ``h, p, z [D, N, R]`` (D features, N nodes, R root
sets), ``W [D, D]`` (the round's weight on a node's own state), ``b [D]``, ``s [N]`` (the
neighbour scale) and ``p = W' h`` (the weight on the neighbour sum, applied before it: the sum
is linear). The C++ kernel makes one pass over the nodes where the composed form makes five
(the product with W, the aggregation, the scale, two sums): in RootedRP's eval passes over
thousands of root sets, those passes are most of the time (on 64 relabeled 41-vertex graphs
with R = 64, one thread: 1.1 ms against 3.9 ms).

:func:`rooted_pool` runs all L rounds, the cosines and the mean over each graph's vertices in
one kernel call, with each graph's own hash (its input map, marker and rounds: the ``P``
replicas of a stack, each with its seed's hash, run in one call). Rounds that do not learn need
no activations kept for a backward, so nothing of the ``L`` rounds' ``[D, N, R]`` tensors leaves
the kernel; in ``rpfast pairs``, whose eval passes average every root set exactly, the rooted part
is most of a run.
"""
import torch
from torch import Tensor

from rpfast import _backend
from rpfast._backend import compiling
from rpfast._validation import require_float, require_ndim, require_tensor
from rpfast.data import GraphBatch
from rpfast.ops._registry import declare
from rpfast.ops.gin import gin_aggregate_op, graph_csr
from rpfast.ops.segment import graph_of_rows, segment_sum_op

__all__ = ["rooted_round", "rooted_pool"]


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


# ------------------------------------------------------------------ every round of a fixed hash
def _pool_kernel(start: Tensor, marker: Tensor, own: Tensor, passed: Tensor, bias: Tensor, scale: Tensor,
                 roots: Tensor, graph_hash: Tensor, ptr: Tensor, rowptr: Tensor, col: Tensor, out_rowptr: Tensor,
                 out_col: Tensor) -> Tensor:
    out = start.new_empty((roots.shape[0], roots.shape[1], start.shape[1]))
    _backend.call("rooted_pool", start, marker, own, passed, bias, scale, roots, graph_hash, ptr, rowptr, col, out)
    return out


def _per_node(weights: Tensor, hashes) -> Tensor:
    """Each node's weights from one hash's ``weights [H, ...]``: the only hash's ``[...]``, which
    broadcasts over the nodes, when ``hashes`` is None, else each node's ``[N, ...]``."""
    return weights[0] if hashes is None else weights[hashes]


def _pool_composed(start: Tensor, marker: Tensor, own: Tensor, passed: Tensor, bias: Tensor, scale: Tensor,
                   roots: Tensor, graph_hash: Tensor, ptr: Tensor, rowptr: Tensor, col: Tensor, out_rowptr: Tensor,
                   out_col: Tensor) -> Tensor:
    """The kernel's formula from torch ops, node-major ``[N, D, R]``. With one hash (``H = 1``:
    a RootedRP alone) a round's weights broadcast over the nodes in one product; with several,
    each node's weights of the round are gathered (``[N, D, D]``, a batched product), one round
    at a time: the memory of one round's weights, not of all L."""
    (N, D), (R, B, _), L = start.shape, roots.shape, own.shape[1]
    batch = graph_of_rows(ptr, N)
    local = torch.arange(N, device=start.device) - ptr[batch]
    marked = (roots.transpose(0, 1)[batch] == local.view(N, 1, 1)).any(dim=-1)  # [N, R]
    hashes = None if own.shape[0] == 1 else graph_hash[batch]
    h = torch.cos(start.unsqueeze(-1) + _per_node(marker.unsqueeze(-1), hashes) * marked.to(start.dtype).unsqueeze(1))
    for layer in range(L):
        p = torch.matmul(_per_node(passed[:, layer], hashes), h)  # [N, D, R]
        summed = gin_aggregate_op(p.reshape(N, D * R), rowptr, col, out_rowptr, out_col, p.new_zeros(()))
        h = torch.cos(_per_node(bias[:, layer].unsqueeze(-1), hashes) + torch.matmul(_per_node(own[:, layer], hashes), h)
                      + scale.view(N, 1, 1) * summed.view(N, D, R))
    pooled = segment_sum_op(h.permute(2, 0, 1).contiguous(), ptr)  # [R, B, D]
    sizes = ptr.diff().clamp(min=1).to(start.dtype)
    return pooled / sizes.view(1, B, 1)


def _pool_fake(start, marker, own, passed, bias, scale, roots, graph_hash, ptr, rowptr, col, out_rowptr, out_col):
    return start.new_empty((roots.shape[0], roots.shape[1], start.shape[1]))


rooted_pool_op = declare(
    "rooted_pool", "(Tensor start, Tensor marker, Tensor own, Tensor passed, Tensor bias, Tensor scale, Tensor roots, "
                   "Tensor graph_hash, Tensor ptr, Tensor rowptr, Tensor col, Tensor out_rowptr, Tensor out_col) "
                   "-> Tensor",
    kernels={"cpu": _pool_kernel}, composed=_pool_composed, fake=_pool_fake)


def rooted_pool(start: Tensor, marker: Tensor, own: Tensor, passed: Tensor, bias: Tensor, scale: Tensor,
                roots: Tensor, graph_hash: Tensor, graph: GraphBatch) -> Tensor:
    r"""``[R, B, D]``: the mean over each graph's vertices of the last of ``L`` rounds of
    RootedRP's message passing from marked roots, for ``R`` root sets per graph (forward only):

    .. math::
        h^0_v &= \cos(s_v + [v \in S]\, u_g) \\
        h^{l+1}_v &= \cos\big(b_{g,l} + W_{g,l}\, h^l_v + \sigma_v (p_v + \textstyle\sum_{u \to v} p_u)\big),
            \qquad p = W'_{g,l}\, h^l \\
        \text{out}_{S, b} &= \tfrac{1}{n_b} \textstyle\sum_{v \in b} h^L_v

    with ``g = graph_hash[b]``, each graph's hash among ``H``: ``start [N, D]`` (the embedded
    features :math:`s`), ``marker [H, D]`` (:math:`u`), ``own, passed [H, L, D, D]``
    (:math:`W, W'`), ``bias [H, L, D]``, ``scale [N]`` (:math:`\sigma`), ``roots [R, B, K]``
    (each set's K roots as local vertex indices of graph b; an index outside the graph marks
    nothing) and ``graph_hash [B]`` (int64 in ``[0, H)``; on the CPU a value outside is an IndexError), all floats of one dtype on the graph's device.
    The C++ kernel (CPU) computes the float32 cosine by a polynomial within about one ulp of
    ``torch.cos``; elsewhere the op runs from torch operations. An empty graph gives 0."""
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    floats = (("start", start), ("marker", marker), ("own", own), ("passed", passed), ("bias", bias),
              ("scale", scale))
    for name, value in floats + (("roots", roots), ("graph_hash", graph_hash)):
        require_tensor(value, name)
        if value.device != graph.device:
            raise ValueError(f"{name} is on {value.device} but the graph is on {graph.device}; move one with .to()")
    for name, value in floats:
        require_float(value, name)
        if value.dtype != start.dtype:
            raise TypeError(f"rooted_pool: {name} is {value.dtype} but start is {start.dtype}; give all one dtype")
    for name, value in (("roots", roots), ("graph_hash", graph_hash)):
        if value.dtype != torch.int64:
            raise TypeError(f"rooted_pool: {name} must be int64, got {value.dtype}")
    require_ndim(start, "start", (2,), "[N, D]")
    require_ndim(own, "own", (4,), "[H, L, D, D]")
    require_ndim(roots, "roots", (3,), "[R, B, K]")
    (N, D), (H, L) = start.shape, own.shape[:2]
    B = graph.num_graphs
    if N != graph.total_nodes:
        raise ValueError(f"rooted_pool: start must be [{graph.total_nodes}, D] (the graph's nodes), got "
                         f"{tuple(start.shape)}")
    expected = {"marker": (H, D), "own": (H, L, D, D), "passed": (H, L, D, D), "bias": (H, L, D), "scale": (N,)}
    for name, value in floats[1:]:
        if tuple(value.shape) != expected[name]:
            raise ValueError(f"rooted_pool: {name} must be {list(expected[name])} for H = {H} hashes, L = {L} rounds "
                             f"and D = {D}, got {tuple(value.shape)}")
    if roots.shape[1] != B or tuple(graph_hash.shape) != (B,):
        raise ValueError(f"rooted_pool: roots [R, {B}, K] and graph_hash [{B}] for the graph's {B} graphs, got "
                         f"{tuple(roots.shape)} and {tuple(graph_hash.shape)}")
    if H < 1 or L < 1 or D < 1:
        raise ValueError(f"rooted_pool: H, L and D must be positive, got {H}, {L}, {D}")
    if graph_hash.device.type == "cpu" and not compiling():  # elsewhere a check would wait for the device
        outside = ((graph_hash < 0) | (graph_hash >= H)).nonzero()
        if outside.numel():
            b = int(outside[0, 0])
            raise IndexError(f"graph_hash: {int(graph_hash[b])} at graph {b} is not one of the {H} hashes")
    return rooted_pool_op(start.contiguous(), marker.contiguous(), own.contiguous(), passed.contiguous(),
                          bias.contiguous(), scale.contiguous(), roots.contiguous(), graph_hash.contiguous(),
                          graph.ptr, *graph_csr(graph))
