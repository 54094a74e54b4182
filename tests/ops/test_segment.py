"""segment_sum (rpfast/ops/segment.py) against index_add: values, gradcheck, errors."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rpfast.ops import segment_sum


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=6), st.integers(1, 3), st.integers(1, 5))
def test_segment_sum_matches_index_add(sizes, R, F_):
    ptr = torch.tensor([0] + sizes).cumsum(0)
    N = int(ptr[-1])
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    x = torch.randn(R, N, F_, dtype=torch.float64, requires_grad=True)
    out = segment_sum(x, ptr)
    ref = torch.zeros(R, len(sizes), F_, dtype=torch.float64).index_add(1, batch, x)
    torch.testing.assert_close(out, ref)
    assert torch.autograd.gradcheck(lambda v: segment_sum(v, ptr), (x,))


def test_segment_sum_rejects_bad_ptr():
    with pytest.raises(ValueError, match="ptr must start at 0 and end at N = 3"):
        segment_sum(torch.zeros(3, 2), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="non-decreasing"):
        segment_sum(torch.zeros(3, 2), torch.tensor([0, 2, 1, 3]))
