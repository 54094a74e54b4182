"""batch_norm_relu (rpfast/ops/norm.py) against relu(F.batch_norm): values, running stats, gradients, errors."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.assertions import assert_backward_matches
from rpfast.ops import batch_norm_relu


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 300), st.integers(1, 20), st.booleans())
def test_batch_norm_relu_matches_torch(M, H, training):
    gen = torch.Generator().manual_seed(M * 31 + H)
    x1 = torch.randn(M, H, dtype=torch.float64, generator=gen).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    w1 = torch.rand(H, dtype=torch.float64, generator=gen).requires_grad_()
    b1 = torch.randn(H, dtype=torch.float64, generator=gen).requires_grad_()
    w2, b2 = w1.detach().clone().requires_grad_(), b1.detach().clone().requires_grad_()
    rm1, rv1 = torch.randn(H, dtype=torch.float64, generator=gen), torch.rand(H, dtype=torch.float64, generator=gen) + 0.5
    rm2, rv2 = rm1.clone(), rv1.clone()
    out = batch_norm_relu(x1, w1, b1, rm1, rv1, training, 0.2, 1e-5)
    ref = torch.relu(F.batch_norm(x2, rm2, rv2, w2, b2, training, 0.2, 1e-5))
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(rm1, rm2)
    torch.testing.assert_close(rv1, rv2)
    g = torch.randn(M, H, dtype=torch.float64, generator=gen)
    assert_backward_matches(out, ref, g, ((x1, x2), (w1, w2), (b1, b2)))


def test_batch_norm_relu_rejects_bad_input():
    H = 3
    p = [torch.ones(H), torch.zeros(H), torch.zeros(H), torch.ones(H)]
    with pytest.raises(ValueError, match=r"weight must be a contiguous torch.float32 tensor of shape \(3,\)"):
        batch_norm_relu(torch.zeros(4, H), torch.ones(2), *p[1:], True)
    with pytest.raises(ValueError, match="more than one value per channel"):
        batch_norm_relu(torch.zeros(1, H), *p, True)
    with pytest.raises(TypeError, match="float32 or float64"):
        batch_norm_relu(torch.zeros(4, H, dtype=torch.int64), *p, True)


@pytest.mark.parametrize("M, H", [(0, 3), (5, 0), (0, 0), (1, 3), (7, 4)])
def test_composed_backward_is_the_batch_norm_gradient_on_every_shape(M, H):
    """The composed backward (torch's batch-norm backward on the normalised input) gives
    autograd's gradients of relu(F.batch_norm(x)) in training, empty batches and widths included
    (torch's CPU kernel divides by zero on those: they take the elementwise formula)."""
    from rpfast.ops.norm import bn_relu_backward_op, bn_relu_forward_op

    gen = torch.Generator().manual_seed(M * 10 + H)
    x = torch.randn(M, H, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(H, dtype=torch.float64, generator=gen, requires_grad=True)
    bias = torch.randn(H, dtype=torch.float64, generator=gen, requires_grad=True)
    grad = torch.randn(M, H, dtype=torch.float64, generator=gen)
    stats = (torch.zeros(H, dtype=torch.float64), torch.ones(H, dtype=torch.float64))
    if M:
        y, xhat, invstd, _, _ = bn_relu_forward_op.composed(x.detach(), weight.detach(), bias.detach(), *stats, True,
                                                              0.1, 1e-5)
    else:  # torch's batch norm refuses an empty batch; the backward is given one all the same
        y, xhat, invstd = x.detach().clone(), x.detach().clone(), torch.ones(H, dtype=torch.float64)
    got = bn_relu_backward_op.composed(grad, y, xhat, weight.detach(), invstd, True)
    assert [tuple(t.shape) for t in got] == [(M, H), (H,), (H,)]
    if M > 1 and H:
        torch.relu(F.batch_norm(x, *(s.clone() for s in stats), weight, bias, training=True)).backward(grad)
        for mine, autograd in zip(got, (x.grad, weight.grad, bias.grad)):
            torch.testing.assert_close(mine, autograd)
