"""Stage I IR: axes, sparse buffers, sparse iterations and sparse functions."""
from .axis import (
                   AXIS_KINDS,
                   AttachedAxis,
                   Axis,
                   FusedAxis,
                   dense_fixed,
                   dense_variable,
                   sparse_fixed,
                   sparse_variable,
)
from .buffer import BufferDomain, SparseBuffer
from .function import SparseFunction
from .iteration import SparseIteration, SpIterVar

__all__ = ["AXIS_KINDS", "AttachedAxis", "Axis", "BufferDomain", "FusedAxis", "SparseBuffer",
           "SparseFunction", "SparseIteration", "SpIterVar", "dense_fixed", "dense_variable",
           "sparse_fixed", "sparse_variable"]
