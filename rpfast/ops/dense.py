"""Dense maps with deterministic gradients: a linear map and a row gather (embedding).

torch computes ``x @ W.T`` and its weight gradient with BLAS, which for some shapes splits
the work by thread, and the gradient of ``W[index]`` with atomic adds; all change in the
last bits with the thread count. On the CPU these ops compute every output row whole in one
thread and reduce rows in fixed chunks in C++ (``csrc/rpfast/dense.hpp``), so a training step
is bitwise reproducible. Elsewhere they run torch's products (``@``, ``F.linear``) and
``index_add_``.

Registered ops (:mod:`rpfast.ops._registry`): ``rows_product`` (``a @ b``), ``matmul_tn``
(``a.T @ b``), each differentiable through the other, ``linear`` and ``embedding`` (whose
backward is ``scatter_rows_sum``, whose backward is ``embedding`` again).
"""
import math
from typing import Optional

import torch
from torch import Tensor
import torch.nn.functional as F

from rpfast import _backend
from rpfast.ops._registry import compiling, declare
from rpfast._validation import index_tensor, require_float, require_tensor

__all__ = ["linear", "embedding", "rows_product", "rows_of"]


def rows_of(t: Tensor) -> Tensor:
    """``t [..., C]`` as ``[R, C]`` (the row count spelled out: -1 is ambiguous when C is 0)."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1]).contiguous()


# ------------------------------------------------------------------ products
def _product_kernel(a: Tensor, b: Tensor) -> Tensor:
    out = a.new_empty((*a.shape[:-1], b.shape[1]))
    _backend.call("matmul", a.contiguous(), b.contiguous(), out)
    return out


def _product_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _product_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = rows_product(grad, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = matmul_tn_op(rows_of(a), rows_of(grad)) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _tn_kernel(a: Tensor, b: Tensor) -> Tensor:
    out = a.new_empty((a.shape[1], b.shape[1]))
    _backend.call("matmul_tn", a.contiguous(), b.contiguous(), out)
    return out


def _tn_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = rows_product(b, grad.t()) if ctx.needs_input_grad[0] else None
    grad_b = rows_product(a, grad) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


rows_product = declare(
    "rows_product", "(Tensor a, Tensor b) -> Tensor",
    kernels={"cpu": _product_kernel}, composed=lambda a, b: a @ b,
    fake=lambda a, b: a.new_empty((*a.shape[:-1], b.shape[1])), setup=_product_setup, backward=_product_backward)
rows_product.__doc__ = """``a @ b`` for ``a [..., K]`` and ``b [K, C]``, each output row computed whole by one
thread in C++ on the CPU: bitwise the same for any thread count (torch's BLAS is not: for some
shapes its result changes in the last bits with ``torch.set_num_threads``). As fast as BLAS up to
widths of ~128; about 1.7x slower at 300."""
matmul_tn_op = declare(
    "matmul_tn", "(Tensor a, Tensor b) -> Tensor",
    kernels={"cpu": _tn_kernel}, composed=lambda a, b: a.t() @ b,
    fake=lambda a, b: a.new_empty((a.shape[1], b.shape[1])), setup=_product_setup, backward=_tn_backward)


# ------------------------------------------------------------------ linear
def _linear_kernel(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    out = x.new_empty((*x.shape[:-1], weight.shape[0]))
    _backend.call("linear", x.contiguous(), weight.contiguous(), None if bias is None else bias.contiguous(), out)
    return out


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


def _linear_backward(ctx, grad):
    """``grad_x = g W``, ``grad_W = g^T x``, ``grad_b = 1^T g`` (fixed-order reductions in C++)."""
    x, weight = ctx.saved_tensors
    g = rows_of(grad)
    grad_x = rows_product(grad, weight) if ctx.needs_input_grad[0] else None
    grad_w = matmul_tn_op(g, rows_of(x)) if ctx.needs_input_grad[1] else None
    grad_b = None
    if ctx.has_bias and ctx.needs_input_grad[2]:
        grad_b = matmul_tn_op(g.new_ones((g.shape[0], 1)), g).reshape(-1)
    return grad_x, grad_w, grad_b


linear_op = declare(
    "linear", "(Tensor x, Tensor weight, Tensor? bias) -> Tensor",
    kernels={"cpu": _linear_kernel}, composed=F.linear,
    fake=lambda x, weight, bias: x.new_empty((*x.shape[:-1], weight.shape[0])),
    setup=_linear_setup, backward=_linear_backward)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    r"""``x @ weight.T + bias`` (as ``torch.nn.functional.linear``) with a deterministic backward.

    Shapes: ``x [..., F]``, ``weight [H, F]``, ``bias [H]`` or None -> ``[..., H]``, one device.
    ``grad_weight = sum over rows of g^T x`` and ``grad_bias = sum over rows of g`` are
    reduced in fixed chunks, bitwise identical for any thread count (C++ on the CPU; torch's
    products elsewhere). Twice differentiable.
    """
    for name, t in (("x", x), ("weight", weight)):
        require_tensor(t, name)
        require_float(t, name)
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1] or x.dtype != weight.dtype:
        raise ValueError(f"linear needs x [..., F] and weight [H, F] of one dtype, got x {tuple(x.shape)} {x.dtype}, "
                         f"weight {tuple(weight.shape)} {weight.dtype}")
    if bias is not None:
        require_tensor(bias, "bias")
        if bias.shape != (weight.shape[0],) or bias.dtype != weight.dtype:
            raise ValueError(f"bias must have shape ({weight.shape[0]},) and dtype {weight.dtype}, "
                             f"got {tuple(bias.shape)} {bias.dtype}")
    _same_device(x, "x", weight, "weight")
    if bias is not None:
        _same_device(x, "x", bias, "bias")
    return linear_op(x, weight, bias)


# ------------------------------------------------------------------ embedding
def _gather(weight: Tensor, index: Tensor) -> Tensor:
    """``weight[index]`` by ``torch.embedding``, which refuses an index outside ``[0, V)``
    (negative ones included, which ``weight[index]`` would wrap): an IndexError on the CPU, a
    device-side assert on CUDA, nothing on ``meta`` (no values). Compiled code skips
    :func:`embedding`'s own check, with the message naming the value, and relies on it."""
    return torch.embedding(weight, index)


def _embedding_setup(ctx, inputs, output):
    weight, index = inputs
    ctx.save_for_backward(index)
    ctx.num_rows = weight.shape[0]


def _embedding_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return scatter_rows_sum_op(index, grad.contiguous(), ctx.num_rows), None


def _scatter_kernel(index: Tensor, grad: Tensor, num_rows: int) -> Tensor:
    out = grad.new_empty((num_rows, grad.shape[-1]))
    _backend.call("scatter_rows_sum", index.reshape(-1).contiguous(), rows_of(grad), out)
    return out


def _scatter_composed(index: Tensor, grad: Tensor, num_rows: int) -> Tensor:
    return grad.new_zeros((num_rows, grad.shape[-1])).index_add_(0, index.reshape(-1), rows_of(grad))


def _scatter_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _scatter_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return None, embedding_op(grad, index), None


embedding_op = declare(
    "embedding", "(Tensor weight, Tensor index) -> Tensor",
    kernels={"cpu": _gather}, composed=_gather,
    fake=lambda weight, index: weight.new_empty((*index.shape, weight.shape[1])),
    setup=_embedding_setup, backward=_embedding_backward)
scatter_rows_sum_op = declare(
    "scatter_rows_sum", "(Tensor index, Tensor grad, SymInt num_rows) -> Tensor",
    kernels={"cpu": _scatter_kernel}, composed=_scatter_composed,
    fake=lambda index, grad, num_rows: grad.new_empty((num_rows, grad.shape[-1])),
    setup=_scatter_setup, backward=_scatter_backward, device_arg=1)


def embedding(weight: Tensor, index) -> Tensor:
    r"""``weight[index]``: rows of ``weight [V, H]`` gathered by ``index`` (any shape, values
    in ``[0, V)``, on ``weight``'s device) -> ``[*index.shape, H]``, with a deterministic backward
    ``grad_weight[v] = sum of the output gradient over positions with index v`` (C++ on the CPU,
    ``index_add_`` elsewhere). Used for one-hot node IDs: ``onehot(id) @ W`` is ``W[id]``.
    """
    require_tensor(weight, "weight")
    require_float(weight, "weight")
    if weight.dim() != 2:
        raise ValueError(f"weight must have shape [V, H], got {tuple(weight.shape)}")
    if compiling():  # the op checks the range when it runs (no data-dependent branch in a graph)
        return embedding_op(weight, index)
    index = index_tensor(index, "index")
    _same_device(weight, "weight", index, "index")
    if index.numel() and index.device.type != "meta" and (
            int(index.min()) < 0 or int(index.max()) >= weight.shape[0]):
        raise IndexError(f"index must lie in [0, {weight.shape[0]}), got {int(index.min())}..{int(index.max())}")
    return embedding_op(weight, index)


def _same_device(a: Tensor, a_name: str, b: Tensor, b_name: str) -> None:
    if a.device != b.device:
        raise ValueError(f"{a_name} is on {a.device} but {b_name} is on {b.device}; put them on one device")
