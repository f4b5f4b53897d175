"""Run-time format conversion: the arrays of a new format, filled from CSR.

These routines produce what a ``FormatRewriteRule``'s description declares, so the decomposed
kernel can run without its ``preprocess`` iterations (``remove_preprocess``). Each is
vectorised numpy and checks its input first, all through the one check of ``checks``: 1-D
integer index arrays in range, float values, integer sizes, ids that fit the output index
type ``idtype`` (else ``idtype=np.int64``); a refusal is a ``ValueError`` naming the argument
(``FormatTypeError``, also a ``TypeError``, for a value of the wrong kind). Padding slots hold
the value 0 and repeat a real column of their row (so every index is in range);
``sparsetir.format.compat`` has SparseTIR's ``column_part_hyb``, ``condense`` and
``csf_to_ell3d`` with SparseTIR's arguments and results (TVM tensors, padding column 0).

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(A.indptr, A.indices, A.data,
...                                                           A.shape, 2)
>>> B = scipy.sparse.bsr_matrix((data_b, indices_b, indptr_b), shape=(6, 6))
>>> np.array_equal(B.toarray()[:, :5], A.toarray())   # the last block column is padded
True
>>> sparsetir.format.csr_to_bsr(A.indptr, A.indices + 5, A.data, A.shape, 2)
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRValueError: indices[0] = 9 is out of range [0, 5)
"""
from .bsr import csr_to_bsr
from .checks import FormatTypeError, check_csr
from .condense import condense
from .declare import declare
from .declare_spmm import encoded_spmm
from .declare_sddmm import encoded_sddmm
from .ell import EllBucket, csr_to_ell
from .ell3d import csf_to_ell3d
from .encoding import Encoding, EncodingError, LevelType, Slice
from .hyb import column_part_hyb, row_tiles
from .pad import csr_pad
from .segments import row_segments
from .storage import SparseTensor
from .tiled_layout import TiledLayout, TiledLayoutError
from .tiled_layout_access import apply_tiled_layout

__all__ = ["EllBucket", "FormatTypeError", "check_csr", "column_part_hyb", "condense",
           "csf_to_ell3d", "csr_pad", "csr_to_bsr", "csr_to_ell", "row_segments", "row_tiles",
           "TiledLayout", "TiledLayoutError", "apply_tiled_layout",
           "declare", "encoded_spmm", "encoded_sddmm",
           "Encoding", "EncodingError", "LevelType", "Slice", "SparseTensor"]
