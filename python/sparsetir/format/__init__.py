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

__all__ = ["check_csr", "csr_to_bsr"]
