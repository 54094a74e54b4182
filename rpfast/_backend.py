"""The one boundary between rpfast's Python code and its compiled kernels: ``rpfast._C`` (or its
AVX2 twin ``rpfast._C_avx2``) for CPU tensors and ``rpfast._C_cuda`` for CUDA tensors, where
it is built.

An op's declared kernel (:mod:`rpfast.ops._registry`, one per device) allocates its outputs
and hands tensors to :func:`call`. This module alone imports the extensions; it sits below
``rpfast.data`` (whose GraphBatch builds its CSR and selects graphs with kernels) and imports
only ``rpfast._validation``. It

* says which kernels an op on a tensor runs (:func:`kernels_for`: the backend,
  ``RPFAST_BACKEND=auto|torch``, the CUDA switch ``RPFAST_CUDA_KERNELS`` and the tensor's
  device), and whether the CPU's C++ kernels serve a tensor (:func:`runs_kernels`);
* answers :func:`compiling`, the one call of ``torch.compiler.is_compiling()``;
* hands every tensor over as a DLPack capsule (zero-copy; outputs are written in place), the
  one array type both modules take: their bindings check dtype, shape, layout and device in
  C++ (``csrc/bindings/arrays.hpp``);
* appends the launch context: the thread count (:func:`num_threads`, i.e.
  ``torch.get_num_threads()``) for a CPU kernel that parallelises, torch's current stream for a
  CUDA kernel.
"""
import importlib.machinery
import os
from typing import Any, Dict, Optional

import torch

from rpfast import _validation

__all__ = ["call", "create", "prepare", "Buffers", "check_device", "num_threads", "build_info", "kernel_devices",
           "testing_hooks", "set_threads_policy", "threads_policy", "THREADS_POLICIES", "BACKENDS", "set_backend",
           "backend", "runs_kernels", "kernels_for", "kernels_enabled", "compiling", "cuda_kernels_enabled",
           "cuda_build_info", "require_cuda", "all_testing_hooks", "AVX512_KERNELS", "SIMD_CHOICES",
           "set_avx512_kernels"]


def _cpu_capability() -> str:
    """The CPU's vector capability as torch's own dispatch detects it (``"AVX512"``, ``"AVX2"``,
    ``"DEFAULT"``, ...)."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # pragma: no cover - older torch
        return "DEFAULT"


def _cpu_has_avx2() -> bool:
    """Whether this CPU runs AVX2 + FMA code."""
    return _cpu_capability() in ("AVX2", "AVX512")


#: RPFAST_SIMD: "auto" takes the best build the CPU runs, "avx2" stops at AVX2 (no kernel from
#: rpfast._C_avx512), "baseline" takes rpfast._C alone
SIMD_CHOICES = ("auto", "avx2", "baseline")


def _simd_choice() -> str:
    choice = os.environ.get("RPFAST_SIMD", "auto")
    if choice not in SIMD_CHOICES:
        raise ImportError(f"RPFAST_SIMD must be one of {', '.join(SIMD_CHOICES)}, got {choice!r}")
    return choice


def _import_extension():
    """Import the compiled kernels, turning a missing or stale build into an actionable error.

    x86-64 builds hold two modules of the same kernels: ``rpfast._C_avx2`` (AVX2 + FMA), used
    when the CPU has those instructions, and ``rpfast._C`` (any CPU). ``RPFAST_SIMD=baseline``
    forces ``_C`` (for comparisons, or a CPU that misreports its features). A third module,
    ``rpfast._C_avx512``, holds only the kernels an AVX-512 build speeds up
    (:func:`_import_avx512`).

    Run from a source checkout without a build in it (e.g. after a non-editable
    ``pip install .``, Python started in the repository root imports this source tree, not
    the installed package), the import would otherwise fail with a confusing "partially
    initialized module ... circular import" message.
    """
    choice = _simd_choice()
    if choice != "baseline" and _cpu_has_avx2():
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


def _import_avx512():
    """``rpfast._C_avx512`` where the CPU runs AVX-512 and ``RPFAST_SIMD`` is ``auto``, else None.

    It holds only the kernels whose AVX-512 build pays in a job users run (its ``kernels()``:
    RootedRP's rounds, most of ``rpfast pairs``' time; benchmarks/README.md): :func:`call` takes
    those from it and every other kernel from ``_C``. This is the one place that chooses."""
    if _simd_choice() != "auto" or _cpu_capability() != "AVX512":
        return None
    try:
        from rpfast import _C_avx512
    except ImportError:  # a build without it (another platform, RPFAST_AVX512=OFF, an older compiler)
        return None
    return _C_avx512


_C_AVX512 = _import_avx512()
#: the kernels taken from rpfast._C_avx512 (none without it)
AVX512_KERNELS = frozenset(_C_AVX512.kernels()) if _C_AVX512 is not None else frozenset()
#: every CPU module loaded: each keeps its own thread policy, back-off and interrupt state
_CPU_MODULES = (_C,) if _C_AVX512 is None else (_C, _C_AVX512)
_avx512_enabled = True


def set_avx512_kernels(enabled: bool) -> None:
    """Whether :func:`call` takes ``AVX512_KERNELS`` from ``rpfast._C_avx512`` (True, the default)
    or from the module of every kernel: for comparisons (``rpfast._testing.without_avx512``)."""
    global _avx512_enabled
    _avx512_enabled = bool(enabled)
    _CPU_FUNCTIONS.clear()

THREADS_POLICIES = ("adaptive", "fixed")


def set_threads_policy(policy: str) -> None:
    """``"adaptive"`` (the default): kernels back off to one thread for a while when their other
    threads lag (another process holds a core) or run far apart (the host placed them so), as
    docs/architecture.md describes; ``"fixed"``: kernels always use ``torch.get_num_threads()``
    threads for loops above the serial threshold. The environment variable
    ``RPFAST_THREADS_POLICY`` sets it at import."""
    if policy not in THREADS_POLICIES:
        raise ValueError(f"the threads policy must be 'adaptive' or 'fixed', got {policy!r}")
    for module in _CPU_MODULES:
        module.set_adaptive_threads(policy == "adaptive")


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
_kernels_enabled = True  # "auto": the kernels on the devices that have them


def set_backend(name: str) -> None:
    """Which implementation rpfast's ops run: ``"auto"`` (the default) runs the kernels on the
    devices that have them (the CPU's C++ kernels; the CUDA kernels where ``rpfast._C_cuda`` is
    built and a device is present) and the torch-composed implementation elsewhere; ``"torch"``
    runs the composed implementation everywhere, CUDA included (to compare, or to test it
    without a GPU). Data-dependent algorithms (subset enumeration, DFS/BFS/WL orders, CSR
    building) run their CPU code in both. ``RPFAST_BACKEND`` sets it at import."""
    global _kernels_enabled
    if name not in BACKENDS:
        raise ValueError(f"the backend must be 'auto' or 'torch', got {name!r}")
    _kernels_enabled = name == "auto"


def backend() -> str:
    """The active backend, ``"auto"`` or ``"torch"`` (:func:`set_backend`)."""
    return "auto" if _kernels_enabled else "torch"


def kernels_enabled() -> bool:
    """Whether the backend runs kernels at all (``"auto"``)."""
    return _kernels_enabled


def runs_kernels(t: torch.Tensor) -> bool:
    """Whether the CPU's C++ kernels serve ``t``: the backend is ``"auto"`` and ``t`` is on the
    CPU. (Code with a CPU-only fast path asks this; an op asks :func:`kernels_for`.)"""
    return _kernels_enabled and t.is_cpu


def kernels_for(t: torch.Tensor) -> Optional[str]:
    """The device whose kernels an op on ``t`` runs: ``"cpu"``, ``"cuda"``, or None for the
    torch-composed implementation. The one reader of both switches: the backend
    (:func:`set_backend`) and the CUDA kernels' availability (:func:`cuda_kernels_enabled`:
    built, a device present, not switched off by ``RPFAST_CUDA_KERNELS=0``)."""
    if not _kernels_enabled:
        return None
    if t.is_cpu:
        return "cpu"
    if t.is_cuda and cuda_kernels_enabled():
        return "cuda"
    return None


_choice = os.environ.get("RPFAST_BACKEND", "auto")
if _choice not in BACKENDS:
    raise ImportError(f"RPFAST_BACKEND must be 'auto' or 'torch', got {_choice!r}")
set_backend(_choice)


# ---------------------------------------------------------------- the CUDA kernels (rpfast._C_cuda)
def _import_cuda():
    """The CUDA module, or None: the CPU wheel has no CUDA build."""
    try:
        from rpfast import _C_cuda
        return _C_cuda
    except ImportError:
        return None


_C_cuda = _import_cuda()
_CUDA_SWITCHED_ON = os.environ.get("RPFAST_CUDA_KERNELS", "1") != "0"
_cuda_devices: Optional[int] = None  # the CUDA runtime's device count, asked once


def cuda_kernels_enabled() -> bool:
    """Whether CUDA tensors may run rpfast's CUDA kernels: ``rpfast._C_cuda`` built, a device
    present, not switched off by ``RPFAST_CUDA_KERNELS=0`` (:func:`set_backend` is read by
    :func:`kernels_for`, not here)."""
    global _cuda_devices
    if not _CUDA_SWITCHED_ON or _C_cuda is None:
        return False
    if _cuda_devices is None:
        _cuda_devices = _C_cuda.device_count()[0]
    return _cuda_devices > 0


def cuda_build_info() -> dict:
    """``built`` (whether ``rpfast._C_cuda`` imports), its ``architectures``, ``devices`` (the CUDA
    runtime's count; 0 with ``device_error`` saying why) and whether CUDA tensors run the
    kernels (``kernels_enabled``)."""
    if _C_cuda is None:
        return {"built": False, "architectures": None, "devices": 0, "device_error": "not built with RPFAST_CUDA",
                "kernels_enabled": False}
    count, error = _C_cuda.device_count()
    return {"built": True, "architectures": _C_cuda.architectures, "devices": count, "device_error": error or None,
            "kernels_enabled": cuda_kernels_enabled()}


def require_cuda() -> None:
    """RuntimeError, in one line, unless the CUDA kernels can run here."""
    if _C_cuda is None:
        raise RuntimeError("rpfast was built without CUDA kernels: reinstall with "
                           "`pip install -Ccmake.define.RPFAST_CUDA=ON .` on a machine with nvcc")
    count, error = _C_cuda.device_count()
    if count == 0:
        raise RuntimeError(f"rpfast's CUDA kernels are built but no CUDA device is usable here ({error})")


def _call_cuda(kernel: str, converted: list, device: torch.device):
    """A CUDA kernel on ``device``: launched on torch's current stream there, which the binding
    takes where the CPU's takes its thread count."""
    function = getattr(_C_cuda, kernel, None) if cuda_kernels_enabled() else None
    if function is None:
        raise ValueError(f"{kernel} has no CUDA kernel in this build; its input is on {device}")
    with torch.cuda.device(device):
        return function(*converted, torch.cuda.current_stream(device).cuda_stream)


# device type -> module with the kernels for tensors on that device
_IMPLEMENTATIONS: Dict[str, Any] = {"cpu": _C}
# The argument checks of the CPU-only algorithms (rpfast._validation.require_kernel_device, below
# this module) name the devices from their own constant: a device added here must be added there.
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


_to_dlpack = torch._C._to_dlpack  # torch.utils.dlpack.to_dlpack: ~0.2 us, a third of Tensor.numpy()


def _array(t: torch.Tensor, what: str):
    """What crosses into C++ for a tensor: a DLPack capsule (pointer, shape, strides, dtype, device;
    zero-copy, so kernels write outputs in place). The bindings check dtype, layout and device
    in C++ (csrc/bindings/arrays.hpp); a device without kernels is refused here, by name."""
    if not (t.is_cpu or (t.is_cuda and cuda_kernels_enabled())):
        check_device(t, f"{what}'s input")
    return _to_dlpack(t)


def call(kernel: str, *args):
    """Run kernel ``kernel`` on ``args``: tensors become DLPack capsules, other values pass through
    (nested lists and tuples are converted too); the thread count is appended for kernels
    that parallelise.

    Returns what the kernel returns (outputs are usually tensors the caller allocated and passed
    in). The kernels check every array in C++: its dtype, shape, layout and device (the CPU
    module refuses memory of any other device, naming the argument).
    """
    converted = []
    append = converted.append
    cuda_device = None
    for value in args:  # the common arguments inline: this runs for every kernel call
        kind = type(value)
        if kind in _PLAIN:
            append(value)
        elif kind in _TENSOR_TYPES and value.is_cpu:
            append(_to_dlpack(value))
        else:
            if cuda_device is None and isinstance(value, torch.Tensor) and value.is_cuda:
                cuda_device = value.device
            append(_convert(value, kernel))
    if cuda_device is not None:
        return _call_cuda(kernel, converted, cuda_device)
    function, threaded = _CPU_FUNCTIONS.get(kernel) or _cpu_function(kernel)
    if threaded:
        converted.append(_get_num_threads() or 1)
    return function(*converted)


_get_num_threads = torch.get_num_threads
_CPU_FUNCTIONS: Dict[str, tuple] = {}  # kernel name -> (its CPU function, takes threads), looked up once


def _cpu_function(kernel: str) -> tuple:
    module = _C_AVX512 if _avx512_enabled and kernel in AVX512_KERNELS else _C
    entry = (getattr(module, kernel), kernel not in _SINGLE_THREADED)  # AttributeError: no such kernel
    _CPU_FUNCTIONS[kernel] = entry
    return entry


def _convert(value, what: str):
    """One argument of :func:`call` or :func:`prepare` that is not a plain value or CPU tensor
    (``what`` names the kernel in errors)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, torch.Tensor):
        return _array(value, what)
    if isinstance(value, Buffers):
        return value.value
    if isinstance(value, KernelObject):
        return value._instance
    if isinstance(value, (list, tuple)):
        items = [_convert(v, what) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples
    return value


class Buffers:
    """Arguments converted once by :func:`prepare`, for several kernel calls."""

    __slots__ = ("value", "device", "is_cpu")

    def __init__(self, value, device: torch.device):
        self.value, self.device, self.is_cpu = value, device, device.type == "cpu"


def prepare(value, what: str) -> Buffers:
    """Convert the tensors in ``value`` (nested lists and tuples) once, so the kernel calls that
    pass the result skip the per-call conversion (a network's dozens of parameter tensors, say).
    All tensors must be on one device with kernels."""
    devices = set()
    _collect_devices(value, devices)
    if len(devices) > 1:
        first, second = sorted(devices, key=str)[:2]
        raise ValueError(f"{what}: arguments are on {first} and {second}; put them on one device")
    return Buffers(_convert(value, what), devices.pop() if devices else torch.device("cpu"))


def _collect_devices(value, devices: set) -> None:
    if isinstance(value, torch.Tensor):
        devices.add(value.device)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_devices(v, devices)


# argument types that pass to the bindings unchanged (checked first: most arguments are these)
_PLAIN = frozenset({int, float, bool, str, bytes, type(None)})
_TENSOR_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})


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
        name = self._name
        kernel = f"{name}.{attr}"

        def method(*args):  # refers to locals only: caching it on self must not make a reference cycle
            converted = [_convert(a, kernel) for a in args]
            if kernel in _SINGLE_THREADED:
                return value(*converted)
            return value(*converted, num_threads())

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
    devices = set()
    _collect_devices(args, devices)
    device = devices.pop().type if len(devices) == 1 else "cpu"
    converted = [_convert(a, name) for a in args]
    constructor = getattr(_C, name)
    instance = constructor(*converted) if name in _SINGLE_THREADED else constructor(*converted, num_threads())
    return KernelObject(name, device, instance)


def build_info() -> dict:
    """The extension's build settings (compiler, flags, OpenMP, CUDA; ``avx512_kernels``: the
    kernels taken from ``rpfast._C_avx512``, sorted, empty without it)."""
    info = dict(_C.build_info())
    info["avx512_kernels"] = sorted(AVX512_KERNELS)
    return info


def testing_hooks():
    """The extension's ``_testing`` submodule (hooks for tests, benchmarks and diagnostics; use
    them through :mod:`rpfast._testing`)."""
    return _C._testing


def all_testing_hooks() -> tuple:
    """The ``_testing`` submodule of every CPU module loaded (``_C`` first): the hooks that set
    kernel state (the serial threshold, the back-off, the interrupt countdown) reach them all."""
    return tuple(module._testing for module in _CPU_MODULES)
