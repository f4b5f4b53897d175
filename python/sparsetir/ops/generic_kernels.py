"""The Stage I kernels of DGL's generalised operators, written once as templates.

``gspmm``: ``out[v] = reduce over in-edges e = (u, v) of op(lhs[u], rhs[e])``, and
``gsddmm``: ``out[e] = op(lhs[target(e)], rhs[target(e)])``, over the rows (``v``,
destinations) and columns (``u``, sources) of a CSR matrix walked through row tiles balanced by
nonzeros, as ``kernels.spmm_tiled`` walks it. One template per operator: the message, the
reduction and the feature blocks (``broadcast.feature_blocks``: which feature axes each operand
has) are filled into TVMScript text, parsed by ``script.from_source`` and lowered by the
compiler like any hand-written Stage I kernel. ``gspmm_arg`` records, for ``max`` and ``min``,
the first in-edge whose message reached the result (the positions the backward pass uses).

Dtypes: ``dtype`` is one name for every operand and the output, or ``(lhs, rhs, out)``. The
arithmetic runs in ``accumulator_dtype`` (float64 when an operand is float64, else float32):
bfloat16 and float16 loads are widened by a cast, and the result is rounded to the output's
dtype by one cast at its store (the schedule keeps a reduction's running value in a
float32 buffer, ``schedule.widen``, so a sum is rounded once, not at every edge).

Example
-------
>>> from sparsetir.ops.generic_kernels import gspmm_source
>>> print(gspmm_source("mul", "sum", "float32", (8,), (True,), (False,)).splitlines()[-1].strip())
Y[i, k0] = Y[i, k0] + X[j, k0] * E[o, i, j]
"""

from __future__ import annotations

from functools import lru_cache

from ..ir.attrs import INIT_PER_POINT_ANNOTATION
from ..script import from_source

GSPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
GSDDMM_OPS = GSPMM_OPS + ("dot",)
REDUCE_OPS = ("sum", "max", "min")
TARGETS = ("u", "v", "e")

_HEADER = '''@T.prim_func
def main({params}, tile_ptr: T.handle, rows: T.handle, indptr: T.handle, indices: T.handle,
         t: T.int32, m: T.int32, n: T.int32, nnz: T.int32) -> None:
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    O = T.dense_fixed(t)
    I = T.sparse_variable(O, (m, m), (tile_ptr, rows), "int32")
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    J_detach = T.dense_fixed(n)
'''

# the init stays once per (tile, row): row tiles share no row (lower.init_placement)
_TILES_SHARE_NO_ROW = f'        T.sp_iter_attr({{"{INIT_PER_POINT_ANNOTATION}": True}})\n'

_OPERATORS = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "div": "{} / {}",
              "copy_lhs": "{0}", "copy_rhs": "{1}"}

_INIT = {"sum": "T.{dtype}(0)", "max": 'T.{dtype}("-inf")', "min": 'T.{dtype}("inf")'}
_COMBINE = {"sum": "{acc} + {msg}",
            "max": "T.Select(T.isnan({acc}) or {acc} >= {msg}, {acc}, {msg})",
            "min": "T.Select(T.isnan({acc}) or {acc} <= {msg}, {acc}, {msg})"}

# where each target's data lives: its axes and its iterators; "e_perm" is edge data in another
# edge order, entry (o, i, j) reading row P[o, i, j] of it (``_PERMUTED_EDGES`` declares P)
_TARGET_AXES = {"u": (["J_detach"], ["j"]), "v": (["I_detach"], ["i"]),
                "e": (["O", "I", "J"], ["o", "i", "j"]), "e_perm": (["E_order"], ["P[o, i, j]"])}

_PERMUTED_EDGES = ('    E_order = T.dense_fixed(nnz)\n'
                   '    P = T.match_sparse_buffer(perm, (O, I, J), "int32")\n'
                   '    T.assume_buffer_domain(P, (0, nnz))\n')


def accumulator_dtype(*dtypes) -> str:
    """The dtype a kernel computes in: float64 when one of ``dtypes`` is float64, else
    float32 (bfloat16 and float16 are summed in float32)."""
    return "float64" if "float64" in dtypes else "float32"


def dtype_triple(dtype) -> tuple:
    """``(lhs, rhs, out)`` dtypes of one name or of a triple."""
    return (dtype,) * 3 if isinstance(dtype, str) else tuple(dtype)


def _widen(expr: str, dtype: str, acc: str) -> str:
    """``expr`` (of ``dtype``) as the accumulator dtype ``acc`` reads it."""
    return expr if dtype == acc else f'T.Cast("{acc}", {expr})'


def _narrow(expr: str, dtype: str, acc: str) -> str:
    """``expr`` (of ``acc``) rounded once to the stored ``dtype``."""
    return expr if dtype == acc else f'T.Cast("{dtype}", {expr})'


def _stored(expr: str, dtype: str, acc: str) -> str:
    """``expr`` (of ``acc``) as it reads back once stored in ``dtype``. bfloat16 is rounded
    to nearest even on the float32 bits: TVM computes bfloat16 in float32 and would fold a
    float32 -> bfloat16 -> float32 cast pair away, unrounded."""
    if dtype != "bfloat16":
        return _widen(_narrow(expr, dtype, acc), dtype, acc)
    bits = f'T.reinterpret("uint32", {expr})'
    return (f'T.reinterpret("float32", T.bitwise_and({bits} + T.uint32(0x7FFF) + '
            f'T.bitwise_and(T.shift_right({bits}, T.uint32(16)), T.uint32(1)), '
            f'T.uint32(0xFFFF0000)))')


def _feature_axes(sizes: tuple) -> str:
    return "".join(f"    K{b} = T.dense_fixed({size})\n" for b, size in enumerate(sizes))


def _buffer(name: str, handle: str, target: str, full: tuple, dtype: str,
            extra: tuple = ()) -> tuple:
    """``(declaration, access)`` of an operand on ``target`` with the feature blocks marked
    in ``full`` (and ``extra`` trailing axes, iterators)."""
    axes, iters = _TARGET_AXES[target]
    axes = axes + [f"K{b}" for b, has in enumerate(full) if has] + [a for a, _ in extra]
    iters = iters + [f"k{b}" for b, has in enumerate(full) if has] + [i for _, i in extra]
    declaration = (f"    {name} = T.match_sparse_buffer({handle}, ({', '.join(axes)},), "
                   f'"{dtype}")\n')
    return declaration, f"{name}[{', '.join(iters)}]"


def _iteration(axes: list, iters: list, kinds: str, name: str) -> str:
    return (f"    with T.sp_iter([{', '.join(axes)}], \"{kinds}\", \"{name}\") as "
            f"[{', '.join(iters)}]:\n")


def _message(op: str, lhs: str, rhs: str) -> str:
    return _OPERATORS[op].format(lhs, rhs)


def gspmm_source(op: str, reduce_op: str, dtype, sizes: tuple, lhs_full: tuple,
                 rhs_full: tuple, record_arg: bool = False, permuted_rhs: bool = False) -> str:
    """TVMScript text of ``gspmm`` (or, with ``record_arg``, of ``gspmm_arg``: the first
    in-edge whose message, rounded to the output's dtype, equals the reduced value ``y``, or is
    NaN where ``y`` is, into the int32 ``arg``, ``nnz`` where there is none). ``dtype``: see the
    module docstring. With ``permuted_rhs`` the edge operand is in another edge order (a
    transpose's backward pass reads its matrix's edge data): edge ``p`` reads row ``perm[p]``
    of it, ``perm`` an int32 permutation of ``[0, nnz)`` (declared so with
    ``T.assume_buffer_domain``; sparsetir makes it, ``SparseMatrix.transposed_pattern``, and
    binds it unchecked)."""
    uses_lhs, uses_rhs = op != "copy_rhs", op != "copy_lhs"
    permuted_rhs = permuted_rhs and uses_rhs
    params = ([("x", "X")] if uses_lhs else []) + ([("e", "E")] if uses_rhs else []) \
        + [("y", "Y")] + ([("eid", "EID"), ("arg", "ARG")] if record_arg else []) \
        + ([("perm", "P")] if permuted_rhs else [])
    text = _HEADER.format(params=", ".join(f"{handle}: T.handle" for handle, _ in params))
    text += _feature_axes(sizes)
    every = (True,) * len(sizes)
    lhs_dtype, rhs_dtype, out_dtype = dtype_triple(dtype)
    acc = accumulator_dtype(*(d for d, used in ((lhs_dtype, uses_lhs), (rhs_dtype, uses_rhs),
                                                (out_dtype, True)) if used))
    lhs_decl, lhs = _buffer("X", "x", "u", lhs_full, lhs_dtype)
    rhs_decl, rhs = _buffer("E", "e", "e_perm" if permuted_rhs else "e", rhs_full, rhs_dtype)
    out_decl, out = _buffer("Y", "y", "v", every, out_dtype)
    text += (_PERMUTED_EDGES if permuted_rhs else "") + (lhs_decl if uses_lhs else "") \
        + (rhs_decl if uses_rhs else "") + out_decl
    features = [f"K{b}" for b in range(len(sizes))]
    iters = ["o", "i", "j"] + [f"k{b}" for b in range(len(sizes))]
    message = _message(op, _widen(lhs, lhs_dtype, acc), _widen(rhs, rhs_dtype, acc))
    if record_arg:
        eid_decl, eid = _buffer("EID", "eid", "e", (), "int32")
        arg_decl, arg = _buffer("ARG", "arg", "v", every, "int32")
        text += eid_decl + arg_decl
        text += _iteration(["O", "I", "J"] + features, iters, "SSR" + "S" * len(sizes),
                           "gspmm_arg") + _TILES_SHARE_NO_ROW
        return text + (f"        with T.init():\n            {arg} = nnz\n"
                       f"        {arg} = T.min({arg}, T.if_then_else("
                       f"{_stored(message, out_dtype, acc)} == {_widen(out, out_dtype, acc)} or "
                       f"(T.isnan({_widen(out, out_dtype, acc)}) and T.isnan({message})), "
                       f"{eid}, nnz))\n")
    text += _iteration(["O", "I", "J"] + features, iters, "SSR" + "S" * len(sizes), "gspmm") \
        + _TILES_SHARE_NO_ROW
    init = _narrow(_INIT[reduce_op].format(dtype=acc), out_dtype, acc)
    combined = _COMBINE[reduce_op].format(acc=_widen(out, out_dtype, acc), msg=message)
    return text + (f"        with T.init():\n            {out} = {init}\n"
                   f"        {out} = {_narrow(combined, out_dtype, acc)}\n")


def gsddmm_source(op: str, dtype, sizes: tuple, lhs_full: tuple, rhs_full: tuple,
                  lhs_target: str, rhs_target: str, dot_size: int = 0) -> str:
    """TVMScript text of ``gsddmm``; for ``op == "dot"``, ``dot_size`` is the length of the
    last feature dimension, summed over (both operands have it). ``dtype``: see the module
    docstring."""
    uses_lhs, uses_rhs = op != "copy_rhs", op != "copy_lhs"
    params = ([("x", "X")] if uses_lhs else []) + ([("y", "Y")] if uses_rhs else []) \
        + [("out", "OUT")]
    text = _HEADER.format(params=", ".join(f"{handle}: T.handle" for handle, _ in params))
    text += _feature_axes(sizes)
    reduced = (("D", "d"),) if op == "dot" else ()
    if op == "dot":
        text += f"    D = T.dense_fixed({dot_size})\n"
    lhs_dtype, rhs_dtype, out_dtype = dtype_triple(dtype)
    acc = accumulator_dtype(*(d for d, used in ((lhs_dtype, uses_lhs), (rhs_dtype, uses_rhs),
                                                (out_dtype, True)) if used))
    lhs_decl, lhs = _buffer("X", "x", lhs_target, lhs_full, lhs_dtype, reduced)
    rhs_decl, rhs = _buffer("Y", "y", rhs_target, rhs_full, rhs_dtype, reduced)
    out_decl, out = _buffer("OUT", "out", "e", (True,) * len(sizes), out_dtype)
    text += (lhs_decl if uses_lhs else "") + (rhs_decl if uses_rhs else "") + out_decl
    lhs, rhs = _widen(lhs, lhs_dtype, acc), _widen(rhs, rhs_dtype, acc)
    axes = ["O", "I", "J"] + [f"K{b}" for b in range(len(sizes))]
    iters = ["o", "i", "j"] + [f"k{b}" for b in range(len(sizes))]
    if op == "dot":
        text += _iteration(axes + ["D"], iters + ["d"], "SSS" + "S" * len(sizes) + "R",
                           "gsddmm")
        total = f"{_widen(out, out_dtype, acc)} + {lhs} * {rhs}"
        return text + (f"        with T.init():\n"
                       f"            {out} = {_narrow(f'T.{acc}(0)', out_dtype, acc)}\n"
                       f"        {out} = {_narrow(total, out_dtype, acc)}\n")
    text += _iteration(axes, iters, "SSS" + "S" * len(sizes), "gsddmm")
    return text + f"        {out} = {_narrow(_message(op, lhs, rhs), out_dtype, acc)}\n"


@lru_cache(maxsize=None)
def gspmm_kernel(*key, permuted_rhs: bool = False):
    """The Stage I function of ``gspmm_source(*key, permuted_rhs=permuted_rhs)``."""
    return from_source(gspmm_source(*key, permuted_rhs=permuted_rhs))


@lru_cache(maxsize=None)
def gsddmm_kernel(*key):
    """The Stage I function of ``gsddmm_source(*key)``."""
    return from_source(gsddmm_source(*key))
