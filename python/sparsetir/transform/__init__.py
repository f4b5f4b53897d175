"""Stage II -> Stage III: what turns a scheduled module into flat buffers ready to compile.

``lower_sparse_buffer`` (with ``complete_inits``: every init runs, empty rows included),
``atomic`` (blocks marked atomic, for CUDA reductions into shared outputs) and
``horizontal_fusion`` (nests marked ``"horizontal_fuse"`` become one parallel loop or launch).

Example
-------
>>> import sparsetir
>>> flat = sparsetir.lower_sparse_buffer(scheduled_stage2_module)
"""
from .atomic import lower_atomic_blocks
from .complete_inits import decompose_conditional_inits
from .horizontal_fusion import horizontal_fuse
from .lower_sparse_buffer import lower_sparse_buffer

__all__ = ["decompose_conditional_inits", "horizontal_fuse", "lower_atomic_blocks",
           "lower_sparse_buffer"]
