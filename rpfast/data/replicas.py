"""``GraphBatch.replicate``: P copies of a batch as one batch, built from its own tensors and host
views (ID-based RP runs its relabelings on them) without reading the device."""
import torch
from torch import Tensor

from rpfast._validation import check_int
from rpfast.data import moves

__all__ = ["replicate"]


def replicate(batch, copies: int):
    """``copies`` copies of ``batch``, graph ``b`` of copy ``p`` at position ``p * B + b``: node,
    edge and CSR indices shifted copy by copy, the host views repeated; no features."""
    P = check_int(copies, "copies", minimum=1)
    N, E = batch.total_nodes, batch.num_edges

    def shifted(index: Tensor, step: int) -> Tensor:  # [P * len]: copy p's indices + p * step
        return (index.unsqueeze(0) + step * torch.arange(P, device=index.device).unsqueeze(1)).reshape(-1)

    def stacked_offsets(ptr: Tensor, step: int) -> Tensor:  # P copies of offsets ending at P * step
        return torch.cat([shifted(ptr[:-1], step), ptr.new_full((1,), P * step)])

    views = [(stacked_offsets(rowptr, E), shifted(col, N), shifted(order, E))
             for rowptr, col, order in (batch._csr_views, batch._csr_t_views)]
    edge_index = (batch.edge_index.unsqueeze(0) + N * torch.arange(P, device=batch.device).view(P, 1, 1)) \
        .permute(1, 0, 2).reshape(2, P * E)
    out = type(batch)._assemble(edge_index, None, None, stacked_offsets(batch.ptr, N), *views)
    out.__dict__["_lazy_host_ptr"] = stacked_offsets(batch.host_ptr, N)
    # the host in-degrees: a CPU batch's own, a device batch's where it keeps them (never read here)
    in_degree = batch._host_in_degree if batch.device.type == "cpu" else batch.__dict__.get(moves.HOST_VIEWS
                                                                                              + "_in_degree")
    if in_degree is not None:
        out.__dict__[moves.HOST_VIEWS + "_in_degree"] = in_degree.repeat(P)
    out.__dict__["_lazy_n_max"] = batch.n_max
    return out
