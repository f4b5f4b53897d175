"""The format rule for BSR: a CSR buffer stored as dense ``block_size`` x ``block_size`` blocks.

``bsr_rule(name, block_size)`` describes a CSR buffer ``A`` over axes ``I, J`` as block rows
(``IO``, dense), the nonzero blocks of each block row (``JO``, sparse: their block-column ids),
and the rows and columns inside a block (``II``, ``JI``, dense); element ``(i, j)`` is
``A_bsr[block, i % bs, j % bs]``. Rows and columns past the matrix (the last block row or
column when the shape is not a multiple of the block) are never touched. The arrays come from
``sparsetir.format.csr_to_bsr``.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> bsr = sparsetir.remove_preprocess(sparsetir.format_decompose(csrmm, [bsr_rule("bsr", 4)]))
>>> [p.name for p in bsr.params][-6:]          # filled by sparsetir.format.csr_to_bsr
['a_bsr', 'indptr_bsr', 'indices_bsr', 'mb_bsr', 'nb_bsr', 'nnzb_bsr']

``sparsetir.ops.bsr`` schedules and runs this kernel.
"""

from __future__ import annotations

from ..script import tir as T
from .format_decompose import FormatRewriteRule


@T.prim_func
def _bsr(a: T.handle, indptr: T.handle, indices: T.handle, mb: T.int32, nb: T.int32,
         nnzb: T.int32, bs: T.int32) -> None:
    IO = T.dense_fixed(mb)
    JO = T.sparse_variable(IO, (nb, nnzb), (indptr, indices), "int32")
    II = T.dense_fixed(bs)
    JI = T.dense_fixed(bs)
    A = T.match_sparse_buffer(a, (IO, JO, II, JI), "float32")


def bsr_rule(name: str, block_size: int, buffers=("A",), axes=("I", "J")) -> FormatRewriteRule:
    """The rule storing ``buffers`` (over the CSR ``axes``) as BSR with square blocks of
    ``block_size``; its parameters are suffixed ``_<name>``."""
    bs = block_size
    return FormatRewriteRule(
        name, _bsr.specialize({"bs": bs}), list(buffers), list(axes), ["IO", "JO", "II", "JI"],
        {axes[0]: ["IO", "II"], axes[1]: ["JO", "JI"]},
        lambda i, j: (i // bs, j // bs, i % bs, j % bs),
        lambda io, jo, ii, ji: (io * bs + ii, jo * bs + ji))
