"""Passes between the three stages."""
from .atomic import AtomicBlockError, lower_atomic_blocks
from .complete_inits import InitPlacementError, decompose_conditional_inits
from .lower_sparse_buffer import lower_sparse_buffer
from .lower_sparse_iter import LoweringError, lower_sparse_iter

__all__ = ["AtomicBlockError", "InitPlacementError", "LoweringError",
           "decompose_conditional_inits", "lower_atomic_blocks", "lower_sparse_buffer",
           "lower_sparse_iter"]
