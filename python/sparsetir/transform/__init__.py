"""Passes between the three stages."""
from .lower_sparse_iter import LoweringError, lower_sparse_iter
