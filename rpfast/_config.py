"""Build and runtime configuration report."""
import platform

import torch

from rpfast._backend import build_info as extension_build_info
from rpfast._backend import backend, cuda_build_info, num_threads, set_backend, set_threads_policy, threads_policy

__all__ = ["build_config", "show_config", "set_threads_policy", "threads_policy", "set_backend", "backend"]


def build_config() -> dict:
    """The compiled extension's build settings plus the runtime thread count."""
    info = extension_build_info()
    info["torch_threads"] = num_threads()
    info["threads_policy"] = threads_policy()
    info["backend"] = backend()
    info["cuda_kernels"] = cuda_build_info()
    info["torch"] = torch.__version__
    info["python"] = platform.python_version()
    info["gpus"] = gpu_names()
    return info


def gpu_names() -> list:
    """The names of the CUDA devices torch sees (``cuda:0`` first); empty without any."""
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def _gpu_line(names: list) -> str:
    """The GPUs in one line, or why there is none."""
    if names:
        return "; ".join(f"cuda:{i} {name}" for i, name in enumerate(names)) + " (--device cuda)"
    if torch.version.cuda is None:
        return f"none (torch {torch.__version__} is a CPU build)"
    return f"none (torch {torch.__version__} is built for CUDA {torch.version.cuda} but sees no device)"


def show_config() -> None:
    """Print how rpfast was built: compiler, flags, OpenMP, threads, the CUDA kernels."""
    import rpfast

    info = build_config()
    lines = [
        f"rpfast {rpfast.__version__}",
        f"  compiler       : {info['compiler']}",
        f"  C++ flags      : {' '.join(info['cxx_flags'].split())}",
        f"  kernel module  : {info.get('simd', 'baseline')} (RPFAST_SIMD=auto|avx2|baseline)",
        f"  AVX-512 kernels: {', '.join(info.get('avx512_kernels', [])) or 'none'} (rpfast._C_avx512, where the "
        f"CPU runs AVX-512)",
        f"  OpenMP         : {info['openmp']} (max threads {info['omp_max_threads']})",
        f"  kernel threads : {info['torch_threads']} (torch.get_num_threads())",
        f"  threads policy : {info['threads_policy']} (RPFAST_THREADS_POLICY=adaptive|fixed)",
        f"  backend        : {info['backend']} (RPFAST_BACKEND=auto|torch; auto: the kernels on the CPU and, "
        f"where built, CUDA; torch-composed ops elsewhere)",
        f"  GPUs           : {_gpu_line(info['gpus'])}",
        f"  CUDA kernels   : {_cuda_line(info['cuda_kernels'])}",
        f"  torch          : {info['torch']}",
        f"  python         : {info['python']}",
    ]
    print("\n".join(lines))


def _cuda_line(cuda: dict) -> str:
    """The CUDA build in one line: built or not, its architectures, the devices, on or off."""
    if not cuda["built"]:
        return "not built (pip install -Ccmake.define.RPFAST_CUDA=ON . on a machine with nvcc)"
    devices = f"{cuda['devices']} device(s)" if cuda["devices"] else f"no device ({cuda['device_error']})"
    if cuda["kernels_enabled"] and backend() == "torch":
        state = "off (the torch backend)"
    elif cuda["kernels_enabled"]:
        state = "on"
    elif cuda["devices"]:
        state = "off (RPFAST_CUDA_KERNELS=0)"
    else:
        state = "off"
    return f"built for {cuda['architectures']}; {devices}; {state}"
