"""Assertions shared by the test files (references live in reference.py)."""
import contextlib
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

import torch

T = TypeVar("T")


def op_gradients(op, args) -> tuple:
    """Gradients of ``sum(w * out)`` over a registered op's float outputs (fixed weights
    ``w = linspace(-1, 1)``) for every float tensor in ``args`` (cloned), through the op's
    autograd; None for an input the outputs do not reach."""
    inputs = [a.clone().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args]
    out = op(*inputs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if o.is_floating_point()]
    weights = [torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    leaves = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
    return torch.autograd.grad(loss, leaves, allow_unused=True)


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Within the block, ``rpfast.set_backend(name)`` ("auto": the C++ kernels; "torch": every op
    on its composed path); the previous backend afterwards."""
    import rpfast

    before = rpfast.backend()
    rpfast.set_backend(name)
    try:
        yield
    finally:
        rpfast.set_backend(before)


def bitwise_equal(a, b) -> bool:
    """Same structure, and every tensor has the same dtype, shape and bits (``torch.equal``).

    Tuples and lists are compared element by element (their type and length must match);
    anything else (None, numbers, strings) with ``==``.
    """
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b))
    return a == b


def _snapshot(value):
    """Detached copies of every tensor, so later calls (``x.grad = None``, in-place
    updates of module state) cannot change a result already returned."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_snapshot(v) for v in value)
    return value


def assert_thread_invariant(fn: Callable[[], T], threads: Sequence[int] = (1, 2)) -> T:
    """Run ``fn()`` under ``torch.set_num_threads(t)`` for every ``t`` in ``threads`` and assert
    that every run returns bitwise the same result (see ``bitwise_equal``: a tensor, or a
    tuple/list of tensors, ``None`` entries and numbers). The thread count in force before
    is restored whatever happens. Every kernel loop of two or more items takes the parallel
    path while it runs (the kernels otherwise keep small loops on one thread, and would then
    compare the serial path with itself). Returns the first run's result.
    """
    from rpfast import _testing

    before = torch.get_num_threads()
    threshold = _testing.serial_work(1, adaptive=False)
    results = []
    try:
        for count in threads:
            torch.set_num_threads(count)
            results.append(_snapshot(fn()))
    finally:
        torch.set_num_threads(before)
        _testing.serial_work(threshold, adaptive=True)
    for count, result in zip(threads[1:], results[1:]):
        assert bitwise_equal(results[0], result), \
            f"the result with {count} threads differs from the result with {threads[0]}"
    return results[0]


def assert_backward_matches(out: torch.Tensor, ref: torch.Tensor, g: torch.Tensor,
                            pairs: Iterable, **tolerance) -> None:
    """Backpropagate ``sum(out * g)`` and ``sum(ref * g)``, then compare the gradients of every
    ``(ours, reference)`` leaf pair with ``torch.testing.assert_close(**tolerance)``.

    ``pairs`` is read after the backward passes, so it may be a generator over modules'
    parameters.
    """
    (out * g).sum().backward()
    (ref * g).sum().backward()
    for a, b in pairs:
        torch.testing.assert_close(a.grad, b.grad, **tolerance)


def stream_failing_after_first_chunk(monkeypatch, error: BaseException, directory, seen: list) -> None:
    """Make ``rpfast subsets``' stream raise ``error`` once its first chunk has been written,
    noting in ``seen`` the names in ``directory`` at that moment (to check that only a
    temporary file existed and nothing is left behind)."""
    import rpfast.experiments.subsets as subsets_tool

    real = subsets_tool.iter_k_subsets

    def failing(*args, **kwargs):
        stream = real(*args, **kwargs)

        class Failing:
            total = stream.total

            def __iter__(self):
                for i, chunk in enumerate(stream):
                    if i == 1:
                        seen.extend(p.name for p in directory.iterdir())
                        raise error
                    yield chunk

        return Failing()

    monkeypatch.setattr(subsets_tool, "iter_k_subsets", failing)


def cli_fails(argv, capsys, code: int = 2) -> str:
    """Run ``rpfast.cli.main(argv)`` expecting an error exit ``code``; returns stderr, checked
    to be one line with no traceback."""
    import pytest

    from rpfast.cli import main

    with pytest.raises(SystemExit) as exit_info:
        try:
            main(argv)
        except KeyboardInterrupt:  # would otherwise stop the whole pytest session
            pytest.fail("KeyboardInterrupt escaped rpfast.cli.main")
    assert exit_info.value.code == code
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err
