"""What a plain-PyTorch user would write: advanced indexing with a zero row for padding.

This is exactly the tests' reference (``tests/helpers/reference.py``), so the timed baseline is
the code the tests trust.
"""
from tests.helpers.reference import permute_adjacency_reference as permute_adjacency

__all__ = ["permute_adjacency"]
