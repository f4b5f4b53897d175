"""SparseTIR's conversion routines with SparseTIR's arguments and results (``tvm.sparse``).

``column_part_hyb``, ``condense`` and ``csf_to_ell3d`` here take SparseTIR's positional
arguments and return what SparseTIR returns: int32 TVM tensors on the CPU, in SparseTIR's
nesting, padding slots holding column 0 with mask 0 (int32). They run the routines of
``sparsetir.format`` (same checks, same errors, inputs as numpy arrays, lists, CPU torch or
TVM tensors) and only reshape the result; those routines pad with a real column of the row
instead, and return numpy arrays.

Example
-------
>>> row_indices, col_indices, mask = column_part_hyb(2, 4, [0, 3, 4], [0, 1, 3, 2], 2, [2, 4])
>>> row_indices[1][0].numpy().tolist(), col_indices[1][0].numpy().tolist()
([0, 1], [[3, 0], [2, 0]])
>>> mask[1][0].numpy().tolist()
[[1, 0], [1, 0]]
"""

from __future__ import annotations

import numpy as np
import tvm

from .condense import condense as _condense
from .ell3d import csf_to_ell3d as _csf_to_ell3d
from .hyb import column_part_hyb as _column_part_hyb


def _tensor(array) -> tvm.runtime.Tensor:
    return tvm.runtime.tensor(np.ascontiguousarray(array, np.int32), device=tvm.cpu())


def _zero_padded(col_indices, mask):
    """SparseTIR's padding: column 0 where the mask is 0."""
    return np.where(mask != 0, col_indices, 0)


def column_part_hyb(num_rows, num_cols, indptr, indices, num_col_parts, buckets) -> tuple:
    """``(row_indices, col_indices, mask)``, each a ``[num_col_parts][len(buckets)]`` list of
    tensors: ``(rows,)``, ``(rows, width)`` and ``(rows, width)``, as SparseTIR's
    ``column_part_hyb`` (``sparsetir.format.column_part_hyb`` gives ``EllBucket``s)."""
    parts = _column_part_hyb(num_rows, num_cols, indptr, indices, num_col_parts, buckets)
    return ([[_tensor(b.row_indices) for b in part] for part in parts],
            [[_tensor(_zero_padded(b.col_indices, b.mask)) for b in part] for part in parts],
            [[_tensor(b.mask) for b in part] for part in parts])


def condense(indptr, indices, t, g) -> tuple:
    """``(group_indptr, tile_indices, mask)`` as tensors, as SparseTIR's ``condense``: tiles
    of ``t`` rows, their columns in groups of ``g``; ``tile_indices`` ``(groups, g)``,
    ``mask`` ``(groups, t, g)``."""
    group_indptr, tile_indices, mask = _condense(indptr, indices, t, g)
    return (_tensor(group_indptr), _tensor(_zero_padded(tile_indices, mask.any(axis=1))),
            _tensor(mask))


def csf_to_ell3d(csf_indptr_0, csf_indices_0, csf_indptr_1, csf_indices_1, nnz_rows_bkt,
                 nnz_cols_bkt) -> tuple:
    """``(indptr, row_indices, col_indices, mask)``, each a list of one tensor per bucket,
    as SparseTIR's ``csf_to_ell3d``: bucket ``b`` packs ``nnz_rows_bkt[b]`` ELL rows of
    width ``nnz_cols_bkt[b]`` per block (``sparsetir.format.csf_to_ell3d(...,
    buckets=nnz_cols_bkt, rows_per_block=nnz_rows_bkt)``)."""
    indptr, rows, cols, mask = _csf_to_ell3d(csf_indptr_0, csf_indices_0, csf_indptr_1,
                                             csf_indices_1, nnz_cols_bkt,
                                             rows_per_block=nnz_rows_bkt)
    return ([_tensor(a) for a in indptr], [_tensor(a) for a in rows],
            [_tensor(_zero_padded(c, m)) for c, m in zip(cols, mask)],
            [_tensor(a) for a in mask])
