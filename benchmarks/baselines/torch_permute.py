"""What a plain-PyTorch user would write: advanced indexing with a zero row for padding."""
import torch
import torch.nn.functional as F


def permute_adjacency(adj: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    """out[b, p, i, j] = adj[b, perms[b,p,i], perms[b,p,j]], zeros where perms is -1."""
    B, n = adj.shape[0], adj.shape[1]
    padded = F.pad(adj, (0, 0, 0, 1, 0, 1))
    idx = torch.where(perms < 0, torch.full_like(perms, n), perms)
    return padded[torch.arange(B).view(B, 1, 1, 1), idx.unsqueeze(-1), idx.unsqueeze(-2)]
