"""Format rules for hyb (ELL buckets by row length, optionally per column partition) and for
CSR with padded rows.

``ell_bucket_rule(name, width)`` describes one ELL bucket of a CSR buffer ``A`` over axes
``I, J``: rows grouped into row tiles (``O``, a dense axis of ``t`` tiles that own disjoint row
ranges), the bucket's rows of each tile (``I``, sparse: their row ids), and ``width`` columns per
row (``J``, sparse fixed), padding marked by a 0 in the int8 mask. Neither is sorted: a row
longer than the widest bucket comes back as several ELL rows, and padding repeats a column. Every bucket of a
decomposition shares the row tiles, so the sub-kernels of one tile write only that tile's rows:
the CPU runs all of them under one parallel loop over tiles (``horizontal_fuse``) with no race.
The arrays come from ``sparsetir.format.column_part_hyb`` / ``csr_to_ell`` plus ``row_tiles``.

``padded_rows_rule(name)`` stores the buffer as CSR whose rows are padded (to a multiple of 32,
say, by ``sparsetir.format.csr_pad``), the padding masked the same way.

Example
-------
>>> import sparsetir
>>> from sparsetir.ir.visit import iterations
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> parts, ws, tiles = 2, (1, 2), 4
>>> rules = [ell_bucket_rule(f"p{p}b{b}", w, tiles) for p in range(parts)
...          for b, w in enumerate(ws)]
>>> hyb = sparsetir.remove_preprocess(sparsetir.format_decompose(csrmm, rules))
>>> [it.name for it in iterations(hyb.body)]
['spmm_init', 'spmm_p0b0', 'spmm_p0b1', 'spmm_p1b0', 'spmm_p1b1']
>>> [p.name for p in hyb.params if p.name.endswith("_p0b0")]
['a_p0b0', 'tile_ptr_p0b0', 'rows_p0b0', 'cols_p0b0', 'mask_p0b0', 'nrows_p0b0']

``sparsetir.ops.hyb`` fills these arrays (``HybLayout``) and runs the kernel.
"""

from __future__ import annotations

from ..script import tir as T
from .format_decompose import FormatRewriteRule


@T.prim_func
def _ell_bucket(a: T.handle, tile_ptr: T.handle, rows: T.handle, cols: T.handle,
                mask: T.handle, t: T.int32, m: T.int32, n: T.int32, nrows: T.int32,
                width: T.int32) -> None:
    O = T.dense_fixed(t)
    I = T.sparse_variable(O, (m, nrows), (tile_ptr, rows), "int32", False)
    J = T.sparse_fixed(I, (n, width), cols, "int32", False)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    M = T.match_sparse_buffer(mask, (O, I, J), "int8")


def ell_bucket_rule(name: str, width: int, tiles: int, buffers=("A",),
                    axes=("I", "J"), rows: str = "m", cols: str = "n") -> FormatRewriteRule:
    """The rule storing ``buffers`` (over ``axes``, a CSR row axis and its column axis, with
    lengths the function's ``rows`` and ``cols`` parameters) as one ELL bucket of ``width``
    columns in ``tiles`` row tiles; its parameters are suffixed ``_<name>``."""
    desc = _ell_bucket.specialize({"width": width, "t": tiles})
    return FormatRewriteRule(
        name, desc, list(buffers), list(axes), ["O", "I", "J"],
        {axes[0]: ["O", "I"], axes[1]: ["J"]},
        lambda i, j: (0, i, j), lambda o, i, j: (i, j),
        shared_params={"m": rows, "n": cols}, mask="M")


@T.prim_func
def _padded_rows(a: T.handle, indptr: T.handle, indices: T.handle, mask: T.handle,
                 m: T.int32, n: T.int32, nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32", False)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    M = T.match_sparse_buffer(mask, (I, J), "int8")


def padded_rows_rule(name: str, buffers=("A",), axes=("I", "J"), rows: str = "m",
                     cols: str = "n") -> FormatRewriteRule:
    """The rule storing ``buffers`` (over the CSR ``axes``) as CSR with padded rows and a mask;
    the padded ``indptr``, ``indices``, ``mask`` and values come from ``csr_pad``."""
    return FormatRewriteRule(
        name, _padded_rows, list(buffers), list(axes), ["I", "J"],
        {axes[0]: ["I"], axes[1]: ["J"]}, lambda i, j: (i, j), lambda i, j: (i, j),
        shared_params={"m": rows, "n": cols}, mask="M")
