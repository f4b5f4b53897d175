"""Run-time format conversion: the arrays of a new format, filled from CSR.

These routines produce what a ``FormatRewriteRule``'s description declares, so the decomposed
kernel can run without its ``preprocess`` iterations (``remove_preprocess``). Each is
vectorised numpy and checks its input first (``ValueError`` naming the problem).

Example
-------
>>> # indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(indptr, indices, data, shape, 4)
"""
from .bsr import csr_to_bsr
from .checks import check_csr
from .condense import condense
from .ell import EllBucket, csr_to_ell
from .ell3d import csf_to_ell3d
from .hyb import column_part_hyb, row_tiles
from .pad import csr_pad

__all__ = ["EllBucket", "check_csr", "column_part_hyb", "condense", "csf_to_ell3d",
           "csr_pad", "csr_to_bsr", "csr_to_ell", "row_tiles"]
