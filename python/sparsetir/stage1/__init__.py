"""Stage I -> Stage I: rewrites of a sparse function that stay in coordinate space.

``Schedule`` (SparseTIR's Stage I schedule: ``sparse_reorder``, ``sparse_fuse``, annotations),
``format_decompose`` with its ``FormatRewriteRule``s, and the rules of the formats ``sparsetir``
ships (``bsr.bsr_rule``, ``hyb.ell_bucket_rule``).

Example
-------
>>> import sparsetir
>>> from sparsetir.stage1.hyb import ell_bucket_rule
>>> from sparsetir.ops.kernels import spmm                 # a Stage I SparseFunction over CSR
>>> hyb = sparsetir.format_decompose(spmm, [ell_bucket_rule("b0", 4, tiles=8)])
>>> [param.name for param in hyb.params][9:]             # the ELL bucket's own arrays
['a_b0', 'tile_ptr_b0', 'rows_b0', 'cols_b0', 'mask_b0', 'nrows_b0']
"""
from .format_decompose import (FormatRewriteRule, extract_preprocess, format_decompose,
                               remove_preprocess)
from .schedule import Schedule

__all__ = ["FormatRewriteRule", "Schedule", "extract_preprocess", "format_decompose",
           "remove_preprocess"]
