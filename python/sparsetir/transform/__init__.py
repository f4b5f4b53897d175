"""Passes between the three stages."""
from .lower_sparse_buffer import lower_sparse_buffer
from .lower_sparse_iter import LoweringError, lower_sparse_iter

__all__ = ["LoweringError", "lower_sparse_buffer", "lower_sparse_iter"]
