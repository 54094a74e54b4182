"""Every op declared once: :func:`declare` turns one declaration into the eager fast path and
the ``torch.library`` custom op ``torch.ops.rpfast.<name>`` that ``torch.compile`` traces.

A declaration gives

* ``schema``: the op's ``torch.library`` schema (``"(Tensor x, Tensor ptr) -> Tensor"``);
* ``kernels``: the kernel call per device type, ``{"cpu": ..., "cuda": ...}`` (each allocates
  the outputs and hands them to :func:`rpfast._backend.call`, which picks the device's compiled
  module; often one function serves both), and ``composed``: the same op from torch
  operations, which runs on any device (MPS, ``meta``, CUDA without rpfast's CUDA build) and,
  with ``RPFAST_BACKEND=torch``, everywhere;
* ``fake``: output shapes from input shapes (for ``torch.compile`` and the ``meta`` device);
* for a differentiable op, ``setup(ctx, inputs, output)`` (what to save) and
  ``backward(ctx, *grads)`` (one gradient or None per input), written in terms of registered
  ops, so the gradient runs on every device and is itself differentiable where those are.

The custom op's default implementation is the composed form, and each device's kernel is
registered with ``torch.library``'s ``register_kernel(device, ...)``; which of them runs for a
tensor is :func:`rpfast._backend.kernels_for`'s answer (the backend and the CUDA switch), read
at every call, so ``set_backend("torch")`` reaches compiled code too.

Calling the op (:meth:`Op.__call__`) picks the form:

* under ``torch.compile``, or on a tensor subclass (the fake and functional tensors of an
  AOTAutograd trace, say): the custom op (opaque to Dynamo, with its fake function and autograd
  formula registered, so a model compiles with ``fullgraph=True``);
* eagerly, when an input needs a gradient: an ``autograd.Function`` built from the same
  ``setup``/``backward`` (a custom op's dispatcher costs ~20 us a call, as much as a small kernel);
* otherwise the implementation itself.

Eager calls under ``torch.jit.trace`` or a ``torch.func`` transform (``vmap``, ``grad``,
``jacrev``, ...) raise :class:`NotImplementedError` (:func:`refuse_unsupported`): the tracer
cannot record a C++ kernel, and the kernels read their inputs' memory, which vmap's batched
tensors do not have.

The rule for code that has no compiled form (a module's C++ fast path that holds Python
objects, say): it asks :func:`eager_kernels` whether it may run, and otherwise composes
registered ops. An op whose state cannot travel as tensors (a model's weights bound to C++,
the activations a forward keeps for its backward) names it by an integer from a
:class:`Handles` table: the schema takes an ``int``, which a compiled graph holds as a constant. Only this module and the data layer below it (through
:func:`rpfast._backend.compiling`, the one call of ``torch.compiler.is_compiling()``) ask.
"""
import collections
import itertools
import weakref
from typing import Callable, Dict, Optional

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast import _backend

__all__ = ["Op", "Handles", "declare", "registered", "compiling", "eager_kernels", "runs_kernels",
           "refuse_unsupported"]

_OPS: Dict[str, "Op"] = {}
KERNEL_DEVICE_TYPES = ("cpu", "cuda")  # the device types an op may declare kernels for


compiling = _backend.compiling  # whether torch.compile is tracing the caller


_tracing = torch._C._is_tracing  # torch.jit.is_tracing() without its scripting check (this is Python)
_transforms_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def refuse_unsupported(what: str = "rpfast") -> None:
    """Raise :class:`NotImplementedError` naming ``what`` under ``torch.jit.trace`` or inside a
    ``torch.func`` transform (vmap, grad, jacrev, jvp, ...); return otherwise (also under
    ``torch.compile``, which is supported)."""
    if _tracing():
        raise NotImplementedError(
            f"{what} does not support torch.jit.trace: the tracer cannot record rpfast's C++ kernels and would "
            "freeze the graph structure into the trace; use torch.compile(model) or eager mode")
    if _transforms_active():
        raise NotImplementedError(
            f"{what} does not support torch.func transforms (vmap, grad, jacrev, jvp, ...): batch graphs into one "
            "GraphBatch (or relabelings as x [R, N, F]) instead of vmap, and use torch.autograd.grad for gradients")


def runs_kernels(t: Tensor) -> bool:
    """Whether an op on ``t`` runs the C++ kernels (else its torch-composed implementation)."""
    return _backend.runs_kernels(t)


def eager_kernels(t: Optional[Tensor]) -> bool:
    """Whether code with no compiled form (an eager C++ fast path that keeps Python objects
    between calls) may run for ``t``: not under ``torch.compile``, and kernels run on ``t``'s
    device (None: on the CPU)."""
    if compiling():
        return False
    refuse_unsupported()
    return _backend.runs_kernels(t) if t is not None else _backend.kernels_enabled()


class Handles:
    """Opaque integer handles for objects an op cannot take as tensors.

    ``weak=True``: a handle names its object while something else keeps it alive (a model's
    bound weights: the handle dies with the model). ``weak=False``: the table keeps the object
    until :meth:`take` hands it out once, and keeps at most ``keep`` of them, dropping the
    oldest (a forward's activations whose backward never ran). ``gone``: the error message of a
    :meth:`take` whose object is not there (taken already, or dropped)."""

    def __init__(self, gone: str, weak: bool, keep: Optional[int] = None):
        self.gone = gone  # the error of a take() that finds nothing
        self.keep = keep
        self._objects = weakref.WeakValueDictionary() if weak else collections.OrderedDict()
        self._numbers = itertools.count(1)

    def add(self, obj) -> int:
        """A new handle naming ``obj``."""
        handle = next(self._numbers)
        self._objects[handle] = obj
        if self.keep is not None:
            while len(self._objects) > self.keep:
                self._objects.popitem(last=False)
        return handle

    def get(self, handle: int):
        """The object ``handle`` names, or None once it is gone."""
        return self._objects.get(int(handle))

    def take(self, handle: int):
        """The object ``handle`` names, removed from the table; RuntimeError if it is gone."""
        obj = self._objects.pop(int(handle), None)
        if obj is None:
            raise RuntimeError(f"rpfast: {self.gone}")
        return obj

    def __len__(self) -> int:
        return len(self._objects)


class Op:
    """One registered op (see the module docstring); call it like a function."""

    def __init__(self, name: str, schema: str, kernels: Dict[str, Callable], composed: Callable, fake: Callable,
                 setup: Optional[Callable] = None, backward: Optional[Callable] = None,
                 double_backward: bool = True, device_arg: int = 0):
        if name in _OPS:
            raise ValueError(f"the op rpfast::{name} is declared twice")
        if (setup is None) != (backward is None):
            raise ValueError(f"rpfast::{name}: give both setup and backward, or neither")
        unknown = set(kernels) - set(KERNEL_DEVICE_TYPES)
        if unknown or "cpu" not in kernels:
            raise ValueError(f"rpfast::{name}: kernels must map 'cpu' (and optionally 'cuda') to a function, "
                             f"got {sorted(kernels)}")
        self.name, self.schema = name, schema
        self.kernels, self.composed, self.fake = dict(kernels), composed, fake
        self.setup, self.backward = setup, backward
        self.device_arg = device_arg
        self.library_op = torch.library.custom_op(f"rpfast::{name}", composed, mutates_args=(), schema=schema)
        for device in self.kernels:
            self.library_op.register_kernel(device, self.run)
        self.library_op.register_fake(fake)
        self.function = None
        if backward is not None:
            self.library_op.register_autograd(backward, setup_context=setup)
            self.function = _eager_function(name, self.run, setup,
                                            backward if double_backward else once_differentiable(backward))
        _OPS[name] = self

    @property
    def kernel(self) -> Callable:
        """The CPU kernel call (``kernels["cpu"]``)."""
        return self.kernels["cpu"]

    def run(self, *args):
        """The forward without autograd: the kernel of the device :func:`rpfast._backend.kernels_for`
        names for the deciding argument, else the composed form."""
        device = _backend.kernels_for(args[self.device_arg])
        kernel = self.kernels.get(device) if device is not None else None
        return kernel(*args) if kernel is not None else self.composed(*args)

    def __call__(self, *args):
        if compiling() or type(args[self.device_arg]) not in _PLAIN_TENSORS:
            # traced (Dynamo; AOTAutograd's fake and functional tensors in a backward formula) or
            # a tensor subclass: the custom op, whose dispatcher serves them
            return self.library_op(*args)
        if _tracing() or _transforms_active():
            refuse_unsupported(f"rpfast op {self.name}")
        if self.function is not None and torch.is_grad_enabled() and _needs_grad(args):
            return self.function.apply(*args)
        return self.run(*args)

    def __repr__(self) -> str:
        return f"<rpfast op {self.name}{self.schema}>"


_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)


def _needs_grad(args) -> bool:
    for a in args:
        if isinstance(a, Tensor):
            if a.requires_grad:
                return True
        elif type(a) in (list, tuple) and any(isinstance(t, Tensor) and t.requires_grad for t in a):
            return True
    return False


def _eager_function(name: str, run: Callable, setup: Callable, backward: Callable) -> type:
    """An ``autograd.Function`` running ``run`` with the op's ``setup`` and ``backward``."""

    def forward(ctx, *args):
        output = run(*args)
        setup(ctx, args, output)
        return output

    return type(f"{name}_function", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def declare(name: str, schema: str, *, kernels: Dict[str, Callable], composed: Callable, fake: Callable,
            setup: Optional[Callable] = None, backward: Optional[Callable] = None, double_backward: bool = True,
            device_arg: int = 0) -> Op:
    """Register the op ``rpfast::name`` (see the module docstring) and return it.

    ``double_backward=False``: the backward is not itself differentiable (a second derivative
    raises a clear ``RuntimeError``). Ops are functional (an op that updates state, such as
    BatchNorm's running statistics, returns the new values for its caller to copy).
    ``device_arg``: the argument whose device picks kernel or composed form. ``kernels``: the
    kernel call per device type (``"cpu"`` required, ``"cuda"`` where rpfast has a CUDA kernel;
    same arguments and results as the composed form)."""
    return Op(name, schema, kernels, composed, fake, setup, backward, double_backward, device_arg)


def registered() -> Dict[str, Op]:
    """Every declared op by name (the tests run ``torch.library.opcheck`` on each)."""
    return dict(_OPS)
