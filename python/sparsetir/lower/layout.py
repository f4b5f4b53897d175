"""Where the values of a sparse buffer live in Stage II (position space).

A buffer's axes are walked outermost first. A fixed axis (``dense_fixed``, ``sparse_fixed``)
keeps a dimension of its own; a variable axis collapses the dimensions of its parent chain into
one dimension of ``nnz`` positions, indexed ``indptr[offset of the parent] + position``. So CSR
values are ``[nnz]``, BSR values ``[nnzb, bs, bs]``, ELL ``[rows, width]`` and dense stays dense,
and the row-major flattening of these dimensions is the layout users pass in (Stage III).

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> from sparsetir.stage1.bsr import bsr_rule
>>> func = sparsetir.format_decompose(csrmm, [bsr_rule("bsr", 4)])
>>> stage2_shape(func.get_buffer("A")), stage2_shape(func.get_buffer("A_bsr"))
([nnz], [nnzb_bsr, 4, 4])
>>> stage2_shape(func.get_buffer("X"))
[n, feat_size]
"""

from __future__ import annotations

from tvm import tirx

from ..ir.buffer import SparseBuffer
from ..errors import LayoutError




def check_axis_order(buf: SparseBuffer) -> None:
    """Every axis with a parent must directly follow that parent in ``buf.axes``."""
    for t, axis in enumerate(buf.axes):
        if axis.parent is None:
            continue
        if t == 0 or buf.axes[t - 1].name != axis.parent.name:
            raise LayoutError(f"sparse buffer {buf.name}: axis {axis.name} must directly follow "
                              f"its parent {axis.parent.name} in the buffer's axes")


def stage2_shape(buf: SparseBuffer) -> list:
    """The Stage II dimensions of ``buf`` (see the module docstring)."""
    check_axis_order(buf)
    dims, chain_start = [], 0
    for axis in buf.axes:
        if axis.parent is None:
            chain_start = len(dims)
        if axis.kind == "dense_fixed":
            dims.append(axis.length)
        elif axis.kind == "sparse_fixed":
            dims.append(axis.nnz_cols)
        else:
            dims[chain_start:] = [axis.nnz]
    return dims


def stage2_indices(buf: SparseBuffer, position_at, indptr_of) -> list:
    """Stage II indices of one element of ``buf``.

    ``position_at(t, parent_offset)`` gives the position on axis ``t`` (local to its row),
    knowing the flat storage offset of the parent axis (None for an axis without parent);
    ``indptr_of(axis)`` gives the Stage II indptr buffer of a variable axis.
    """
    dims, chain_start, offset = [], 0, None
    for t, axis in enumerate(buf.axes):
        pos = position_at(t, offset)
        if axis.parent is None:
            chain_start = len(dims)
            offset = pos
            dims.append(pos)
        elif axis.kind == "sparse_fixed":
            offset = offset * axis.nnz_cols + pos
            dims.append(pos)
        else:
            offset = tirx.BufferLoad(indptr_of(axis), [offset]) + pos
            dims[chain_start:] = [offset]
    return dims


def row_range(axis, parent_offset, indptr_of) -> tuple:
    """``(start, end)`` of the row of ``axis`` under the parent position ``parent_offset``."""
    if axis.kind == "sparse_fixed":
        start = parent_offset * axis.nnz_cols
        return start, start + axis.nnz_cols
    indptr = indptr_of(axis)
    return (tirx.BufferLoad(indptr, [parent_offset]),
            tirx.BufferLoad(indptr, [parent_offset + 1]))
