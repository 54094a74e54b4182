"""The cost of crossing into C++: every registered op on one CSL graph against its bare kernel
and against its own torch-composed form, in alternating rounds.

* bare: the binding calls the op's kernel makes, replayed with their arguments converted once
  (what a call costs with no Python around it);
* op: the registered op called as a layer calls it, gradients off (no autograd node);
* composed: the op's torch-composed form (what ``set_backend("torch")`` and devices without
  kernels run);
* and forward + backward of the op against the composed form under torch's autograd.

Issue 42's targets: the op at most 5 us above its bare kernel, and never slower than its own
composed form, forward or forward + backward. ``report.py`` prints the table from extra_info.
"""
import statistics
import time

import pytest
import torch

from benchmarks.op_samples import NOT_DIFFERENTIABLE, NOT_KERNELS, RANDOM, op_samples
from rpfast import _backend
from rpfast.ops import _registry

CALLS_PER_ROUND, ROUNDS = 200, 15
OPS = _registry.registered()
SAMPLES = op_samples()


def _bare_calls(op, args):
    """The binding calls ``op.kernel(*args)`` makes, as ``(function, converted args)`` to replay."""
    recorded = []
    real_call = _backend.call

    def record(kernel, *kernel_args):
        recorded.append((kernel, kernel_args))
        return real_call(kernel, *kernel_args)

    _backend.call = record
    try:
        op.kernel(*args)
    finally:
        _backend.call = real_call
    calls = []
    for kernel, kernel_args in recorded:
        function = getattr(_backend._C, kernel)
        converted = [_backend._convert(a, kernel) for a in kernel_args]
        if kernel not in _backend._SINGLE_THREADED:
            converted.append(_backend.num_threads())
        calls.append((function, converted))
    return calls


def _per_call(fn, grad: bool) -> float:
    with torch.set_grad_enabled(grad):  # outside the loop: entering no_grad costs ~1 us itself
        start = time.perf_counter()
        for _ in range(CALLS_PER_ROUND):
            fn()
        return (time.perf_counter() - start) / CALLS_PER_ROUND


def _float_outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]


def _training_step(fn, args, frozen=frozenset()):
    """Forward and backward of ``fn`` with every float input requiring a gradient (but the
    argument positions in ``frozen``)."""
    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
              and i not in frozen else a for i, a in enumerate(args)]

    def step():
        outs = _float_outputs(fn(*leaves))
        torch.autograd.backward([o.sum() for o in outs])

    return step


def _check_agreement(op, args):
    """rpfast's kernel and the composed form agree before either is timed."""
    expected = op.kernel(*args)
    got = op.composed(*args)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    got = got if isinstance(got, (tuple, list)) else [got]
    for e, g in zip(expected, got):
        torch.testing.assert_close(g.to(e.dtype), e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(set(OPS) - NOT_KERNELS))
def test_op_boundary(benchmark, name):
    op, args = OPS[name], SAMPLES[name]
    if name not in RANDOM:
        _check_agreement(op, args)
    bare_calls = _bare_calls(op, args)

    def bare():
        for function, converted in bare_calls:
            function(*converted)

    def call_op():
        op(*args)

    def composed():
        op.composed(*args)

    forms = {"bare": bare, "op": call_op, "composed": composed}
    if op.backward is not None:
        frozen = NOT_DIFFERENTIABLE.get(name, frozenset())
        forms["op_step"] = _training_step(op, args, frozen)
        forms["composed_step"] = _training_step(op.composed, args, frozen)
    times = {form: [] for form in forms}
    for _ in range(ROUNDS):  # alternating rounds: every form sees the same machine minute
        for form, fn in forms.items():
            times[form].append(_per_call(fn, grad=form.endswith("_step")))
    medians = {form: statistics.median(t) * 1e6 for form, t in times.items()}
    benchmark.extra_info.update({f"{form}_us": value for form, value in medians.items()})
    benchmark.extra_info.update(impl="rpfast", boundary_op=name,
                                above_bare_us=medians["op"] - medians["bare"],
                                composed_over_op=medians["composed"] / medians["op"])
    if "op_step" in medians:
        benchmark.extra_info["composed_step_over_op_step"] = medians["composed_step"] / medians["op_step"]
    with torch.no_grad():
        benchmark.pedantic(call_op, rounds=5, iterations=CALLS_PER_ROUND, warmup_rounds=1)
