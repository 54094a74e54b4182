"""Dense maps with deterministic gradients: a linear map and a row gather (embedding).

torch computes ``x @ W.T`` and its weight gradient with BLAS, which for some shapes splits
the work by thread, and the gradient of ``W[index]`` with atomic adds; all change in the
last bits with the thread count. These ops compute every output row whole in one thread
and reduce rows in fixed chunks in C++ (``csrc/rpfast/dense.hpp``), so a training step is
bitwise reproducible.
"""
import math
from typing import Optional

import torch
from torch import Tensor

from rpfast import _backend
from rpfast._validation import index_tensor, require_float, require_kernel_device, require_tensor

__all__ = ["linear", "embedding", "rows_product", "rows_of"]


def rows_of(t: Tensor) -> Tensor:
    """``t [..., C]`` as ``[R, C]`` (the row count spelled out: -1 is ambiguous when C is 0)."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1]).contiguous()


def rows_product(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for ``a [..., K]`` and ``b [K, C]`` (no autograd), each output row computed whole
    by one thread in C++: bitwise the same for any thread count. (torch's BLAS is not: for
    some shapes its result changes in the last bits with ``torch.set_num_threads``.) As fast
    as BLAS up to widths of ~128; about 1.7x slower at 300."""
    out = a.new_empty((*a.shape[:-1], b.shape[1]))
    _backend.call("matmul", rows_of(a.detach()), b.detach().contiguous(), rows_of(out))
    return out


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = rows_product(x, weight.t())
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        g = rows_of(grad)
        if torch.is_grad_enabled():  # create_graph=True: torch's ops keep the gradients differentiable
            grad_x = grad @ weight if ctx.needs_input_grad[0] else None
            grad_w = g.t() @ rows_of(x) if ctx.needs_input_grad[1] else None
            grad_b = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
            return grad_x, grad_w, grad_b
        if ctx.needs_input_grad[0]:
            grad_x = rows_product(grad, weight)
        if ctx.needs_input_grad[1]:
            grad_w = torch.empty_like(weight)
            _backend.call("matmul_tn", g, rows_of(x), grad_w)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g.new_empty(g.shape[1])
            ones = g.new_ones(g.shape[0], 1)
            _backend.call("matmul_tn", ones, g, grad_b.view(1, -1))
        return grad_x, grad_w, grad_b


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight: Tensor, index: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.num_rows = weight.shape[0]
        return weight[index]

    @staticmethod
    def backward(ctx, grad: Tensor):
        (index,) = ctx.saved_tensors
        grad_w = grad.new_empty((ctx.num_rows, grad.shape[-1]))
        _backend.call("scatter_rows_sum", index.reshape(-1).contiguous(), rows_of(grad), grad_w)
        return grad_w, None


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    r"""``x @ weight.T + bias`` (as ``torch.nn.functional.linear``) with a deterministic backward.

    Shapes: ``x [..., F]``, ``weight [H, F]``, ``bias [H]`` or None -> ``[..., H]``.
    ``grad_weight = sum over rows of g^T x`` and ``grad_bias = sum over rows of g`` are
    reduced in fixed chunks, bitwise identical for any thread count.
    """
    for name, t in (("x", x), ("weight", weight)):
        require_tensor(t, name)
        require_kernel_device(t, name)
        require_float(t, name)
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1] or x.dtype != weight.dtype:
        raise ValueError(f"linear needs x [..., F] and weight [H, F] of one dtype, got x {tuple(x.shape)} {x.dtype}, "
                         f"weight {tuple(weight.shape)} {weight.dtype}")
    if bias is not None:
        require_tensor(bias, "bias")
        if bias.shape != (weight.shape[0],) or bias.dtype != weight.dtype:
            raise ValueError(f"bias must have shape ({weight.shape[0]},) and dtype {weight.dtype}, "
                             f"got {tuple(bias.shape)} {bias.dtype}")
    if torch.compiler.is_compiling():
        from rpfast.ops import library  # library builds on this module

        return library.linear(x, weight, bias)
    return _Linear.apply(x, weight, bias)


def embedding(weight: Tensor, index) -> Tensor:
    r"""``weight[index]``: rows of ``weight [V, H]`` gathered by ``index`` (any shape, values
    in ``[0, V)``) -> ``[*index.shape, H]``, with a deterministic backward
    ``grad_weight[v] = sum of the output gradient over positions with index v``.
    Used for one-hot node IDs: ``onehot(id) @ W`` is ``W[id]``.
    """
    require_tensor(weight, "weight")
    require_kernel_device(weight, "weight")
    require_float(weight, "weight")
    if weight.dim() != 2:
        raise ValueError(f"weight must have shape [V, H], got {tuple(weight.shape)}")
    if torch.compiler.is_compiling():  # the custom op checks the range when it runs
        from rpfast.ops import library  # library builds on this module

        return library.embedding(weight, index)
    index = index_tensor(index, "index")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= weight.shape[0]):
        raise IndexError(f"index must lie in [0, {weight.shape[0]}), got {int(index.min())}..{int(index.max())}")
    return _Embedding.apply(weight, index)
