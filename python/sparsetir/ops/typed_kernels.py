"""The Stage I kernels behind ``gather_mm`` and ``segment_mm`` (RGCN's typed products).

Both operators multiply each row ``i`` of ``a`` (N, D1) by one matrix of ``b`` (R, D1, D2),
the one of the row's relation. Written as a sparse iteration, the relation is a sparse axis
with exactly one stored position per row, whose column is the relation ``idx[i]``
(``T.sparse_fixed`` of width 1): ``out[i, k] = sum over r in R(i), d of a[i, d] * b[r, d, k]``.
``segment_mm`` is the same kernel with ``idx = repeat(arange(R), seglen)``.

``relation_outer`` is the weight gradient, iterated over the transposed relation (a CSR axis
from each relation to its rows): ``db[r, d, k] = sum over rows i of r of a[i, d] * g[i, k]``;
a relation with no rows gets zeros. The input gradient is ``gather_mm`` again, of ``g`` and
``b`` transposed.

One kernel per dtype (float32, float64, bfloat16, float16), or per triple of dtypes (the two
operands' and the result's: under ``torch.autocast`` a float32 operand is read as it is and
the result has the autocast dtype, and the backward takes a half gradient with a float32
operand): :func:`kernel` parses the function for the dtypes asked, the same source for all.
bfloat16 and float16 values are widened where they are loaded and the products summed in
float32 (``generic_kernels.accumulator_dtype``), rounded once at the store (the schedule keeps
the running sums in float32, ``schedule.widen``); for float32 and float64 the casts are no-ops
and vanish.

Example
-------
>>> from sparsetir.ops.typed_kernels import kernel
>>> func = kernel("gather_mm", "float64").specialize({"d1": 16, "d2": 8})
>>> [param.name for param in func.params]
['a', 'b', 'out', 'idx', 'n', 'r']
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import SparseTIRValueError
from ..script import tir as T
from .generic_kernels import accumulator_dtype, dtype_triple

DTYPES = ("float32", "float64", "bfloat16", "float16")


def _gather_mm(dtypes: tuple):
    a_dtype, b_dtype, dtype = dtypes
    acc = accumulator_dtype(*dtypes)

    @T.prim_func
    def gather_mm(a: T.handle, b: T.handle, out: T.handle, idx: T.handle, n: T.int32,
                  r: T.int32, d1: T.int32, d2: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        I = T.dense_fixed(n)
        R = T.sparse_fixed(I, (r, 1), idx, "int32", False)
        R_detach = T.dense_fixed(r)
        D1 = T.dense_fixed(d1)
        D2 = T.dense_fixed(d2)
        A = T.match_sparse_buffer(a, (I, D1), a_dtype)
        B = T.match_sparse_buffer(b, (R_detach, D1, D2), b_dtype)
        OUT = T.match_sparse_buffer(out, (I, D2), dtype)
        with T.sp_iter([I, R, D2, D1], "SRSR", "gather_mm") as [i, j, k, d]:
            with T.init():
                OUT[i, k] = T.cast(0, dtype)
            OUT[i, k] = T.cast(T.cast(OUT[i, k], acc) + T.cast(A[i, d], acc)
                               * T.cast(B[j, d, k], acc), dtype)
    return gather_mm


def _relation_outer(dtypes: tuple):
    a_dtype, g_dtype, dtype = dtypes
    acc = accumulator_dtype(*dtypes)

    @T.prim_func
    def relation_outer(a: T.handle, g: T.handle, db: T.handle, rel_ptr: T.handle,
                       rows: T.handle, n: T.int32, r: T.int32, d1: T.int32,
                       d2: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        R = T.dense_fixed(r)
        I = T.sparse_variable(R, (n, n), (rel_ptr, rows), "int32")
        I_detach = T.dense_fixed(n)
        D1 = T.dense_fixed(d1)
        D2 = T.dense_fixed(d2)
        A = T.match_sparse_buffer(a, (I_detach, D1), a_dtype)
        G = T.match_sparse_buffer(g, (I_detach, D2), g_dtype)
        DB = T.match_sparse_buffer(db, (R, D1, D2), dtype)
        with T.sp_iter([R, I, D1, D2], "SRSS", "relation_outer") as [rel, i, d, k]:
            with T.init():
                DB[rel, d, k] = T.cast(0, dtype)
            DB[rel, d, k] = T.cast(T.cast(DB[rel, d, k], acc) + T.cast(A[i, d], acc)
                                   * T.cast(G[i, k], acc), dtype)
    return relation_outer


_MAKERS = {"gather_mm": _gather_mm, "relation_outer": _relation_outer}


@lru_cache(maxsize=None)
def kernel(name: str, dtype):
    """The Stage I kernel ``name`` (``"gather_mm"`` or ``"relation_outer"``) over ``dtype``
    values (one name, or the triple of the operands' and the result's dtypes), with symbolic
    feature sizes ``d1`` and ``d2`` (``specialize`` them)."""
    dtypes = dtype_triple(dtype)
    if name not in _MAKERS or len(dtypes) != 3 or any(d not in DTYPES for d in dtypes):
        raise SparseTIRValueError(f"no typed kernel {name!r} for {dtype!r}")
    return _MAKERS[name](dtypes)
