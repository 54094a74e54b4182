"""The one boundary between rpfast's Python code and its compiled kernels (``rpfast._C``,
or its AVX2 twin ``rpfast._C_avx2``).

An op's declared C++ implementation (:mod:`rpfast.ops._registry`) allocates its outputs and
hands tensors to :func:`call`. This module alone imports the extension; it sits below
``rpfast.data`` (whose GraphBatch builds its CSR and selects graphs with kernels) and imports
only ``rpfast._validation``. It

* says whether an op runs its kernels or its torch-composed implementation
  (:func:`runs_kernels`: the backend, ``RPFAST_BACKEND=auto|torch``, and the tensor's device),
* answers :func:`compiling`, the one call of ``torch.compiler.is_compiling()``,

* checks that every tensor argument lives on a device that has kernels
  (:func:`check_device`; one error message for every op),
* turns tensors into the buffers the bindings take (zero-copy NumPy views of CPU tensors;
  outputs are written in place through them),
* passes the thread count (:func:`num_threads`, i.e. ``torch.get_num_threads()``) to every
  kernel that parallelises.

rpfast's CUDA kernels (``rpfast._C_cuda``) take device pointers, not NumPy buffers: they live in
:mod:`rpfast._cuda`, and an op declares its CUDA form beside its C++ kernel
(``declare(..., cuda=...)``, :mod:`rpfast.ops._registry`).
"""
import importlib.machinery
import os
from typing import Any, Dict

import torch

from rpfast import _validation

__all__ = ["call", "create", "prepare", "Buffers", "check_device", "num_threads", "build_info", "kernel_devices",
           "testing_hooks", "set_threads_policy", "threads_policy", "THREADS_POLICIES", "BACKENDS", "set_backend",
           "backend", "runs_kernels", "kernels_enabled", "compiling"]


def _cpu_has_avx2() -> bool:
    """Whether this CPU runs AVX2 + FMA code (torch's own dispatch detects it)."""
    try:
        return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
    except (AttributeError, RuntimeError):  # pragma: no cover - older torch
        return False


def _import_extension():
    """Import the compiled kernels, turning a missing or stale build into an actionable error.

    x86-64 builds hold two modules of the same kernels: ``rpfast._C_avx2`` (AVX2 + FMA), used
    when the CPU has those instructions, and ``rpfast._C`` (any CPU). ``RPFAST_SIMD=baseline``
    forces ``_C`` (for comparisons, or a CPU that misreports its features).

    Run from a source checkout without a build in it (e.g. after a non-editable
    ``pip install .``, Python started in the repository root imports this source tree, not
    the installed package), the import would otherwise fail with a confusing "partially
    initialized module ... circular import" message.
    """
    choice = os.environ.get("RPFAST_SIMD", "auto")
    if choice not in ("auto", "baseline"):
        raise ImportError(f"RPFAST_SIMD must be 'auto' or 'baseline', got {choice!r}")
    if choice == "auto" and _cpu_has_avx2():
        try:
            from rpfast import _C_avx2
            return _C_avx2
        except ImportError:
            pass  # a build without the AVX2 module (another platform, RPFAST_AVX2=OFF)
    try:
        from rpfast import _C
    except ImportError as error:
        here = os.path.dirname(os.path.abspath(__file__))  # the rpfast package
        if any(os.path.exists(os.path.join(here, "_C" + s)) for s in importlib.machinery.EXTENSION_SUFFIXES):
            message = (f"the compiled extension rpfast._C in {here} could not be loaded ({error}); "
                       "rebuild it with `pip install -e .`")
        else:
            message = (f"the compiled extension rpfast._C is not in this source tree {here}; either run "
                       f"`pip install -e .` in {os.path.dirname(here)} to build it in place, or run "
                       "Python from outside the source directory so the installed package is used")
        raise ImportError(message) from error
    return _C


_C = _import_extension()

THREADS_POLICIES = ("adaptive", "fixed")


def set_threads_policy(policy: str) -> None:
    """``"adaptive"`` (the default): kernels back off to one thread for a while when their other
    threads lag (another process holds a core) or run far apart (the host placed them so), as
    docs/architecture.md describes; ``"fixed"``: kernels always use ``torch.get_num_threads()``
    threads for loops above the serial threshold. The environment variable
    ``RPFAST_THREADS_POLICY`` sets it at import."""
    if policy not in THREADS_POLICIES:
        raise ValueError(f"the threads policy must be 'adaptive' or 'fixed', got {policy!r}")
    _C.set_adaptive_threads(policy == "adaptive")


def threads_policy() -> str:
    """The active threads policy: ``"adaptive"`` or ``"fixed"`` (:func:`set_threads_policy`)."""
    return "adaptive" if _C.adaptive_threads() else "fixed"


_policy = os.environ.get("RPFAST_THREADS_POLICY", "adaptive")
if _policy not in THREADS_POLICIES:
    raise ImportError(f"RPFAST_THREADS_POLICY must be 'adaptive' or 'fixed', got {_policy!r}")
set_threads_policy(_policy)

def compiling() -> bool:
    """Whether ``torch.compile`` is tracing the caller. The one place rpfast asks: code that has
    an eager-only form asks :func:`rpfast.ops._registry.eager_kernels` (or this, below ``ops``)."""
    return torch.compiler.is_compiling()


BACKENDS = ("auto", "torch")
_kernels_enabled = True  # "auto": C++ kernels on the devices that have them


def set_backend(name: str) -> None:
    """Which implementation rpfast's ops run: ``"auto"`` (the default) runs the C++ kernels on
    the devices that have them (the CPU) and the torch-composed implementation elsewhere;
    ``"torch"`` runs the composed implementation everywhere (to compare, or to test it without
    a GPU). Data-dependent algorithms (subset enumeration, DFS/BFS/WL orders, CSR building,
    random relabelings) run their CPU code in both. ``RPFAST_BACKEND`` sets it at import."""
    global _kernels_enabled
    if name not in BACKENDS:
        raise ValueError(f"the backend must be 'auto' or 'torch', got {name!r}")
    _kernels_enabled = name == "auto"


def backend() -> str:
    """The active backend, ``"auto"`` or ``"torch"`` (:func:`set_backend`)."""
    return "auto" if _kernels_enabled else "torch"


def kernels_enabled() -> bool:
    """Whether the backend runs C++ kernels at all (``"auto"``)."""
    return _kernels_enabled


def runs_kernels(t: torch.Tensor) -> bool:
    """Whether ops on ``t`` run the C++ kernels: the backend is ``"auto"`` and ``t``'s device has
    kernels. Otherwise they run their torch-composed implementation."""
    return _kernels_enabled and t.device.type in _IMPLEMENTATIONS


_choice = os.environ.get("RPFAST_BACKEND", "auto")
if _choice not in BACKENDS:
    raise ImportError(f"RPFAST_BACKEND must be 'auto' or 'torch', got {_choice!r}")
set_backend(_choice)

# device type -> module with the kernels for tensors on that device
_IMPLEMENTATIONS: Dict[str, Any] = {"cpu": _C}
# The argument checks (rpfast._validation.require_kernel_device, below this module) name the
# devices from their own constant: a device added here must be added there.
assert tuple(_IMPLEMENTATIONS) == _validation.KERNEL_DEVICES, "keep _validation.KERNEL_DEVICES in step"

# kernels that run on one thread (every other kernel takes ``threads=``); for the classes
# that create() builds, "Class" is the constructor and "Class.method" a method
_SINGLE_THREADED = frozenset({"check_permutations", "build_csr", "select_sizes", "select_csr", "SubsetEnumerator",
                              "SubsetEnumerator.next_rows", "GINWeightsF32.set_statistics",
                              "GINWeightsF64.set_statistics", "GINWeightsF32.set_momenta",
                              "GINWeightsF64.set_momenta"})


def kernel_devices() -> tuple:
    """Device types this build has kernels for (``("cpu",)`` without CUDA)."""
    return tuple(_IMPLEMENTATIONS)


def check_device(t: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` if no kernel runs on ``t``'s device."""
    _validation.require_kernel_device(t, name)


def num_threads() -> int:
    """Threads a kernel uses: ``torch.get_num_threads()``, so ``torch.set_num_threads`` controls them."""
    return max(1, torch.get_num_threads())


def _buffer(t: torch.Tensor):
    """A zero-copy view the bindings can read and write (the tensor must be contiguous)."""
    return t.detach().numpy() if t.requires_grad else t.numpy()


def call(kernel: str, *args):
    """Run kernel ``kernel`` on ``args``; tensors become buffers, other values pass through.

    All tensor arguments must be on one device with kernels. Returns what the kernel returns
    (outputs are usually tensors the caller allocated and passed in).
    """
    device, buffers, _ = _prepare_args(kernel, args)
    return _invoke(kernel, getattr(_IMPLEMENTATIONS[device or "cpu"], kernel), buffers)


def _prepare_args(what: str, args) -> tuple:
    """``(device type or None without tensors, converted args, [first tensor])`` in one pass:
    tensors (also in nested lists and tuples) become buffers, after the first one's device is
    checked for kernels and every other one's compared with it.

    The common arguments (numbers, tensors, prepared Buffers) are handled inline: this runs for
    every kernel call, several times per training step."""
    seen: list = []  # the first tensor or Buffers met
    converted = []
    append = converted.append
    for value in args:
        if type(value) in _PLAIN:
            append(value)
        elif isinstance(value, torch.Tensor):
            _check_same_device(value, what, seen)
            append(value.detach().numpy() if value.requires_grad else value.numpy())
        elif isinstance(value, Buffers):  # checked when prepared
            _check_same_device(value, what, seen)
            append(value.value)
        else:
            append(_convert_checked(value, what, seen))
    return (seen[0].device.type if seen else None), converted, seen


def _convert_checked(value, what: str, seen: list):
    """One argument of :func:`_prepare_args`, which also recurses into lists and tuples."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, torch.Tensor):
        _check_same_device(value, what, seen)
        return _buffer(value)
    if isinstance(value, Buffers):
        _check_same_device(value, what, seen)
        return value.value
    if isinstance(value, KernelObject):
        return value._instance
    if isinstance(value, (list, tuple)):
        items = [_convert_checked(v, what, seen) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples
    return value


def _check_same_device(value, what: str, seen: list) -> None:
    if not seen:
        if isinstance(value, torch.Tensor):
            check_device(value, f"{what}'s input")
        seen.append(value)
    elif not (value.is_cpu and seen[0].is_cpu) and value.device != seen[0].device:
        raise ValueError(f"{what}: arguments are on {seen[0].device} and {value.device}; put them on one device")


class Buffers:
    """Arguments converted once by :func:`prepare` (devices checked), for several kernel calls."""

    __slots__ = ("value", "device", "is_cpu")

    def __init__(self, value, device: torch.device):
        self.value, self.device, self.is_cpu = value, device, device.type == "cpu"


def prepare(value, what: str) -> Buffers:
    """Check and convert the tensors in ``value`` (nested lists and tuples) in one pass, so the
    kernel calls that pass the result skip the per-call scan (a network's dozens of parameter
    tensors, say). All tensors must be on one device with kernels."""
    _, (converted,), seen = _prepare_args(what, (value,))
    return Buffers(converted, seen[0].device if seen else torch.device("cpu"))


# argument types that pass to the bindings unchanged (checked first: most arguments are these)
_PLAIN = frozenset({int, float, bool, str, bytes, type(None)})


def _invoke(name: str, function, buffers: list):
    """``function(*buffers)``, plus ``threads=`` unless ``name`` is single-threaded."""
    if name in _SINGLE_THREADED:
        return function(*buffers)
    return function(*buffers, threads=num_threads())


class KernelObject:
    """A compiled kernel class instance made by :func:`create`.

    Its methods take tensors like :func:`call` (buffers, one device: the one it was created
    on; ``threads=`` unless ``"Class.method"`` is in ``_SINGLE_THREADED``); other attributes
    (properties) pass through, read afresh each time.
    """

    def __init__(self, name: str, device: str, instance):
        self._name, self._device, self._instance = name, device, instance

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        value = getattr(self._instance, attr)
        if not callable(value):
            return value
        name, created_on = self._name, self._device
        kernel = f"{name}.{attr}"

        def method(*args):  # refers to locals only: caching it on self must not make a reference cycle
            device, buffers, _ = _prepare_args(kernel, args)
            if device is not None and device != created_on:
                raise ValueError(f"{kernel}: arguments are on {device}, but the {name} was created on "
                                 f"{created_on}; put them on one device")
            return _invoke(kernel, value, buffers)

        method.__name__ = attr
        self.__dict__[attr] = method  # later look-ups find it without __getattr__
        return method

    def __repr__(self) -> str:
        return f"<rpfast kernel object {self._name} on {self._device}>"


def create(name: str, *args) -> KernelObject:
    """Construct the compiled class ``name`` from ``args`` as :func:`call` runs a kernel.

    Tensors become buffers, all on one device with kernels, which picks the implementation;
    the constructor gets ``threads=`` unless ``name`` is in ``_SINGLE_THREADED``. The
    returned :class:`KernelObject`'s methods take tensors the same way.
    """
    device, buffers, _ = _prepare_args(name, args)
    device = device or "cpu"
    return KernelObject(name, device, _invoke(name, getattr(_IMPLEMENTATIONS[device], name), buffers))


def build_info() -> dict:
    """The extension's build settings (compiler, flags, OpenMP, CUDA)."""
    return dict(_C.build_info())


def testing_hooks():
    """The extension's ``_testing`` submodule (hooks for tests, benchmarks and diagnostics; use
    them through :mod:`rpfast._testing`)."""
    return _C._testing
