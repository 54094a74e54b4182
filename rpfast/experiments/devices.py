"""Where a command trains: ``--device cpu|cuda|auto``, one option and one rule for every command;
and whether its steps on a GPU are captured as CUDA graphs (``--cuda-graphs``).

``auto`` takes the GPU when torch sees one, else the CPU. Graphs of CSL's or a molecule's size
train faster on the CPU's C++ kernels than on a GPU today (benchmarks/README.md), so the commands
default to ``cpu``; ``cuda`` refuses, in one line, a machine where torch has no CUDA device.
"""
import torch

from rpfast._options import option

__all__ = ["DEVICES", "device_option", "check_device", "cuda_graphs_option", "resolve_device", "uses_cuda_graphs"]

DEVICES = ("cpu", "cuda", "auto")


def device_option():
    """The ``--device`` field of a command's config."""
    return option("cpu", "where models train: cpu, cuda (torch's current GPU) or auto (cuda when torch sees a GPU, "
                         "else cpu); --device cuda trains every run in this one process", choices=DEVICES)


def check_device(name) -> None:
    """ValueError unless ``name`` is one of :data:`DEVICES` and, for ``cuda``, torch has a GPU."""
    if name not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        why = "a CPU build" if torch.version.cuda is None else "no usable device"
        raise ValueError(f"--device cuda: torch {torch.__version__} sees no CUDA device ({why}); use --device cpu")


def resolve_device(name: str) -> torch.device:
    """The torch device ``name`` (checked by :func:`check_device`) trains on."""
    check_device(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def cuda_graphs_option(default: bool):
    """The ``--cuda-graphs`` switch: on by default where the batches' shapes repeat (CSL's
    mini-batches, a pair's full batch), off where nearly every batch has its own (molecules)."""
    return option(default, "on a GPU (--device cuda or auto), capture each batch shape's training step as a CUDA "
                           "graph and replay it (rpfast.experiments.step_graphs); steps that cannot be captured run "
                           "as usual; no effect on the CPU")


def uses_cuda_graphs(switch: bool, device: torch.device, distributed: bool = False) -> bool:
    """Whether ``fit`` captures the steps: the switch on, training on a CUDA device, one process."""
    return bool(switch) and device.type == "cuda" and not distributed
