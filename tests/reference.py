"""Small, obviously-correct references the fast kernels are compared against."""
import torch
import torch.nn.functional as F


def _padded_index(perms: torch.Tensor, n: int) -> torch.Tensor:
    """Map -1 to n, the index of an all-zero row appended to the input."""
    return torch.where(perms < 0, torch.full_like(perms, n), perms)


def permute_adjacency_reference(adj: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    """out[b, p, i, j] = adj[b, perms[b,p,i], perms[b,p,j]] by torch advanced indexing."""
    B, n = adj.shape[0], adj.shape[1]
    padded = F.pad(adj, (0, 0, 0, 1, 0, 1))  # [B, n+1, n+1, C], zeros at index n
    idx = _padded_index(perms, n)
    b = torch.arange(B).view(B, 1, 1, 1)
    return padded[b, idx.unsqueeze(-1), idx.unsqueeze(-2)]


def permute_nodes_reference(x: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    B, n = x.shape[0], x.shape[1]
    padded = F.pad(x, (0, 0, 0, 1))
    idx = _padded_index(perms, n)
    return padded[torch.arange(B).view(B, 1, 1), idx]
