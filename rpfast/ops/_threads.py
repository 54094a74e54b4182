"""Thread count handed to the kernels."""
import torch


def kernel_threads() -> int:
    """Kernels use torch.get_num_threads() threads, so torch.set_num_threads controls them."""
    return max(1, torch.get_num_threads())
