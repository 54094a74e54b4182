"""A whole GIN model as one C++ call forward and one backward, and one autograd node.

A GIN training step on the RP paper's graphs (tens of nodes, width 16) is a few hundred tiny
tensor operations whose dispatch and autograd bookkeeping cost far more than the arithmetic.
The C++ network (``csrc/rpfast/gin_network.hpp``) runs every layer, the sum readouts, the input
readouts and the classifier in one call, and the whole backward in another:

.. math::
    z = h^{(l-1)} W_{\\text{first}}^\\top + W_{\\text{id}}[\\text{ids}],\\quad
    a = (1 + \\epsilon) z + A z,\\quad
    u_1 = \\mathrm{ReLU}(\\mathrm{BN}_1(a)),\\ u_s = \\mathrm{ReLU}(\\mathrm{BN}_s(u_{s-1} W_s^\\top)),\\quad
    h^{(l)} = u_S,

    e_{r,b} = \\Big[\\textstyle\\sum_{i \\in b} x_{r,i},\\ \\sum_{i \\in b} \\mathrm{onehot}(\\mathrm{ids}_{r,i}),\\
    \\sum_{i \\in b} h^{(1)}_{r,i}, \\dots, \\sum_{i \\in b} h^{(L)}_{r,i}\\Big],\\qquad
    \\mathrm{out}_{r,b} = e_{r,b} W_{\\text{cls}}^\\top + b_{\\text{cls}}.

CPU kernels only, widths up to :data:`rpfast.nn.runtime.plan.FUSED_MAX_WIDTH`
(:func:`rpfast.nn.runtime.plan.plan` decides; every other GIN runs layer by layer).
"""
import dataclasses
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast import _backend
from rpfast.data import GraphBatch

__all__ = ["GINLayerParams", "NetworkWeights", "FlatGradient", "Call", "check_rows", "graph_buffers", "run_network"]


@dataclass
class GINLayerParams:
    """One GIN layer's tensors, by name; the C++ binding reads the same names
    (``csrc/bindings/gin_network.cpp``) from a copy whose tensors are kernel buffers.

    ``first`` ``[H, F]`` maps the layer's input features (None: the first layer of a network
    without node features); ``id_weight`` ``[m, H]`` holds the rows gathered for one-hot IDs
    (first layer only, else None); ``eps`` a one-element tensor; ``weights`` the ``S - 1``
    bias-free maps ``[H, H]`` between the MLP's stages; per stage the BatchNorm affine tensors
    ``gammas``/``betas``, running statistics ``running_means``/``running_vars`` ``[H]`` and
    variance epsilons ``bn_eps``. A step's momenta are given per call
    (:mod:`rpfast.nn.runtime.batch_norm_steps`).
    """

    first: Optional[Tensor]
    id_weight: Optional[Tensor]
    eps: Tensor
    weights: Sequence[Tensor]
    gammas: Sequence[Tensor]
    betas: Sequence[Tensor]
    running_means: Sequence[Tensor]
    running_vars: Sequence[Tensor]
    bn_eps: Sequence[float]

    def differentiable(self) -> List[Optional[Tensor]]:
        """The tensors gradients flow to, in the network's gradient order."""
        return [self.first, self.id_weight, self.eps, *self.weights, *self.gammas, *self.betas]

    def as_buffers(self) -> "GINLayerParams":
        """A copy whose tensors are kernel buffers (pointers into the same storage)."""
        view = _buffer
        return dataclasses.replace(
            self, first=view(self.first), id_weight=view(self.id_weight), eps=view(self.eps),
            weights=[view(t) for t in self.weights], gammas=[view(t) for t in self.gammas],
            betas=[view(t) for t in self.betas], running_means=[view(t) for t in self.running_means],
            running_vars=[view(t) for t in self.running_vars], bn_eps=[float(e) for e in self.bn_eps])


def _buffer(t: Optional[Tensor]):
    """A kernel buffer over ``t``'s storage, owned by the binding that asks (which keeps ``t`` alive)."""
    return None if t is None else _backend.prepare(t, "gin_network").value


class NetworkWeights:
    """A whole model's tensors bound to the C++ network once: pointers into their storage, so
    the optimizer's in-place updates are seen at every call. ``in_dim`` / ``id_dim`` columns of
    input and ID readouts come before the layers' pooled states; ``classifier = (weight [C, D],
    bias [C] or None)`` turns the embedding into logits (None: the embedding is the output).

    ``tensors``: the differentiable tensors in the order the backward returns their gradients
    (:meth:`GINLayerParams.differentiable` per layer, then the classifier's weight and bias;
    None where absent); ``slots`` their sizes in the one flat gradient buffer.
    """

    def __init__(self, layers: Sequence[GINLayerParams], in_dim: int, id_dim: int,
                 classifier: Optional[tuple] = None):
        self.layers = list(layers)
        self.dtype = self.layers[0].gammas[0].dtype
        cls_weight, cls_bias = classifier if classifier is not None else (None, None)
        self.tensors = [t for layer in self.layers for t in layer.differentiable()]
        if classifier is not None:
            self.tensors += [cls_weight, cls_bias]
        self.stages = sum(len(layer.gammas) for layer in self.layers)
        self.kernel = _backend.create("GINWeightsF64" if self.dtype == torch.float64 else "GINWeightsF32",
                                      [layer.as_buffers() for layer in self.layers], in_dim, True, id_dim,
                                      _buffer(cls_weight), _buffer(cls_bias))
        self.slots = list(self.kernel.slots)
        self.total = sum(self.slots)
        self.output_width = self.kernel.output_width
        self._shapes = [None if t is None else (tuple(t.shape) if t.dim() > 1 else None) for t in self.tensors]

    def gradients(self, flat: Tensor, needs: Sequence[bool]) -> List[Optional[Tensor]]:
        """The per-tensor gradients as views of the flat buffer the backward wrote (None where
        ``needs`` is False or the tensor is absent)."""
        pieces = flat.split_with_sizes(self.slots)
        return [None if not need or t is None else (piece.view(shape) if shape is not None else piece)
                for piece, shape, need, t in zip(pieces, self._shapes, needs, self.tensors)]


def graph_buffers(graph) -> tuple:
    """The kernel buffers of ``(in_rowptr, in_col, out_rowptr, out_col, ptr)`` from a
    GraphBatch or those five tensors."""
    if isinstance(graph, GraphBatch):
        graph = (graph.t_rowptr, graph.t_col, graph.rowptr, graph.col, graph.ptr)
    prepared = _backend.prepare(tuple(graph), "gin_network")
    return tuple(_backend.Buffers(g, prepared.device) for g in prepared.value)


_POOL_SIZE = 4
_free_networks = {torch.float32: [], torch.float64: []}


class _Workspace:
    """A C++ network on loan to one forward (and its backward): it holds the saved activations,
    and returns to a small pool when the autograd graph that owns the loan is freed (no fresh
    pages every step)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        pool = _free_networks[dtype]
        self.kernel = pool.pop() if pool else _backend.create(
            "GINNetworkF64" if dtype == torch.float64 else "GINNetworkF32")

    def __del__(self):
        kernel = getattr(self, "kernel", None)  # None if __init__ failed
        pool = _free_networks.get(getattr(self, "dtype", None))
        if kernel is not None and pool is not None and len(pool) < _POOL_SIZE:
            pool.append(kernel)


class Call:
    """One forward's inputs besides the weights' tensors, kept for its backward. ``graph``: a
    GraphBatch or ``(in_rowptr, in_col, out_rowptr, out_col, ptr)``."""

    def __init__(self, weights: NetworkWeights, graph, x: Optional[Tensor], ids: Optional[Tensor],
                 replicas: int, training: bool, flat: Optional["FlatGradient"] = None):
        self.num_graphs = (graph.ptr if isinstance(graph, GraphBatch) else graph[4]).shape[0] - 1
        self.weights, self.graph, self.x, self.ids = weights, graph_buffers(graph), x, ids
        self.replicas, self.training, self.flat = replicas, training, flat
        self.workspace: Optional[_Workspace] = None

    def forward(self, save: bool) -> Tensor:
        """``[R, B, output_width]``; with ``save`` the workspace keeps the activations."""
        out = torch.empty((self.replicas, self.num_graphs, self.weights.output_width), dtype=self.weights.dtype)
        self.workspace = _Workspace(self.weights.dtype)
        self.workspace.kernel.forward(self.x, self.ids, self.replicas, *self.graph, self.weights.kernel,
                                      self.training, save, out)
        return out

    def backward(self, grad: Tensor, x_needs_grad: bool, needs: Sequence[bool]):
        """``(grad_x or None, the flat gradient buffer)`` (slots of :attr:`NetworkWeights.slots`;
        slots whose ``needs`` is False hold garbage)."""
        flat = torch.empty(self.weights.total, dtype=self.weights.dtype)
        grad_x = torch.empty_like(self.x) if x_needs_grad else None
        self.workspace.kernel.backward(grad.contiguous(), *self.graph, self.weights.kernel, self.training,
                                       bytes(bool(n) for n in needs), flat, grad_x)
        return grad_x, flat


class FlatGradient:
    """How the network's flat gradient (the slots of :attr:`NetworkWeights.slots`) maps onto a
    model's flat parameter when the bound tensors are views of it (``GIN(flat_parameters=True)``).

    ``needs``: per bound tensor, whether it lies in ``flat`` (a fixed eps buffer does not);
    ``index``: ``[P]`` for every element of ``flat`` its position in the network's gradient with
    one zero appended (elements the network does not produce, say a classifier applied outside
    it, read the zero), or None where the two layouts are the same.
    """

    def __init__(self, weights: NetworkWeights, flat: Tensor):
        base, size, item = flat.data_ptr(), flat.numel(), flat.element_size()
        index = torch.full((size,), weights.total, dtype=torch.int64)
        self.needs, slot = [], 0
        for tensor, width in zip(weights.tensors, weights.slots):
            offset = (tensor.data_ptr() - base) // item if tensor is not None else -1
            inside = tensor is not None and tensor.is_contiguous() and 0 <= offset and offset + width <= size \
                and tensor.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
            self.needs.append(inside)
            if inside:
                index[offset:offset + width] = torch.arange(slot, slot + width)
            slot += width
        same = size == weights.total and bool((index == torch.arange(size)).all())
        self.index = None if same else index

    def __call__(self, network_gradient: Tensor) -> Tensor:
        """The flat parameter's gradient from the network's."""
        if self.index is None:
            return network_gradient
        return torch.cat([network_gradient, network_gradient.new_zeros(1)])[self.index]


class _WholeNetwork(torch.autograd.Function):
    """The model as one node. Weight inputs: the bound tensors (``call.flat`` None) or the one
    flat parameter they are views of; the backward reads x, ids and the weights through
    pointers, so autograd's saved-tensor checks guard them against in-place changes."""

    @staticmethod
    def forward(ctx, call: Call, x: Optional[Tensor], ids: Optional[Tensor], *weights: Tensor):
        out = call.forward(save=True)
        ctx.call = call
        present = [t for t in weights if t is not None]
        ctx.save_for_backward(*[t for t in (x, ids) if t is not None], *present)
        return out

    @staticmethod
    @once_differentiable  # the hand-written backward is not itself differentiable: a clear error
    def backward(ctx, grad: Tensor):
        ctx.saved_tensors  # raises if an input or weight was modified in place since the forward
        call = ctx.call
        x_needs_grad = call.x is not None and ctx.needs_input_grad[1]
        if call.flat is not None:
            wanted = ctx.needs_input_grad[3]
            grad_x, network = call.backward(grad, x_needs_grad, call.flat.needs if wanted else
                                            [False] * len(call.flat.needs))
            return None, grad_x, None, call.flat(network) if wanted else None
        needs = ctx.needs_input_grad[3:]
        grad_x, flat = call.backward(grad, x_needs_grad, needs)
        return (None, grad_x, None, *call.weights.gradients(flat, needs))


def check_rows(replicas: int, graph, training: bool) -> None:
    """BatchNorm's batch statistics need two rows: ValueError for a training call on one node."""
    if not training:
        return
    nodes = graph.total_nodes if isinstance(graph, GraphBatch) else int(graph[4][-1])  # no tensor read per step
    if replicas * nodes < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")


def run_network(weights: NetworkWeights, graph, x: Optional[Tensor], ids: Optional[Tensor], replicas: int,
                training: bool, flat: Optional[Tensor] = None, mapping: Optional[FlatGradient] = None) -> Tensor:
    """The bound model on one batch: ``[R, B, output_width]``, one autograd node when a weight
    or ``x`` needs a gradient. ``graph``: as for :class:`Call`; ``x [1 or R, N, F]`` or None,
    ``ids [R, N]`` int64 or None (the kernel checks their range); ``flat``/``mapping``: the flat
    parameter the bound tensors are views of, which then gets the gradient."""
    check_rows(replicas, graph, training)
    x = x.contiguous() if x is not None else None
    ids = ids.contiguous() if ids is not None else None
    call = Call(weights, graph, x, ids, replicas, training, mapping if flat is not None else None)
    inputs = [flat] if flat is not None else weights.tensors
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in [x, *inputs]):
        return _WholeNetwork.apply(call, x, ids, *inputs)
    return call.forward(save=False)
