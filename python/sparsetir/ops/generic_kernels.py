"""The Stage I kernels of DGL's generalised operators, written once as templates.

``gspmm``: ``out[v] = reduce over in-edges e = (u, v) of op(lhs[u], rhs[e])``, and
``gsddmm``: ``out[e] = op(lhs[target(e)], rhs[target(e)])``, over the rows (``v``,
destinations) and columns (``u``, sources) of a CSR matrix walked through row tiles balanced by
nonzeros, as ``kernels.spmm_tiled`` walks it. One template per operator: the message, the
reduction and the feature blocks (``broadcast.feature_blocks``: which feature axes each operand
has) are filled into TVMScript text, parsed by ``script.from_source`` and lowered by the
compiler like any hand-written Stage I kernel. ``gspmm_arg`` records, for ``max`` and ``min``,
the first in-edge whose message reached the result (the positions the backward pass uses).

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

# where each target's data lives: its axes and its iterators
_TARGET_AXES = {"u": (["J_detach"], ["j"]), "v": (["I_detach"], ["i"]),
                "e": (["O", "I", "J"], ["o", "i", "j"])}


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


def gspmm_source(op: str, reduce_op: str, dtype: str, sizes: tuple, lhs_full: tuple,
                 rhs_full: tuple, record_arg: bool = False) -> str:
    """TVMScript text of ``gspmm`` (or, with ``record_arg``, of ``gspmm_arg``: the first
    in-edge whose message equals the reduced value ``y``, into the int32 ``arg``, ``nnz``
    where there is none)."""
    uses_lhs, uses_rhs = op != "copy_rhs", op != "copy_lhs"
    params = ([("x", "X")] if uses_lhs else []) + ([("e", "E")] if uses_rhs else []) \
        + [("y", "Y")] + ([("eid", "EID"), ("arg", "ARG")] if record_arg else [])
    text = _HEADER.format(params=", ".join(f"{handle}: T.handle" for handle, _ in params))
    text += _feature_axes(sizes)
    every = (True,) * len(sizes)
    lhs_decl, lhs = _buffer("X", "x", "u", lhs_full, dtype)
    rhs_decl, rhs = _buffer("E", "e", "e", rhs_full, dtype)
    out_decl, out = _buffer("Y", "y", "v", every, dtype)
    text += (lhs_decl if uses_lhs else "") + (rhs_decl if uses_rhs else "") + out_decl
    features = [f"K{b}" for b in range(len(sizes))]
    iters = ["o", "i", "j"] + [f"k{b}" for b in range(len(sizes))]
    message = _message(op, lhs, rhs)
    if record_arg:
        eid_decl, eid = _buffer("EID", "eid", "e", (), "int32")
        arg_decl, arg = _buffer("ARG", "arg", "v", every, "int32")
        text += eid_decl + arg_decl
        text += _iteration(["O", "I", "J"] + features, iters, "SSR" + "S" * len(sizes),
                           "gspmm_arg") + _TILES_SHARE_NO_ROW
        return text + (f"        with T.init():\n            {arg} = nnz\n"
                       f"        {arg} = T.min({arg}, T.if_then_else({message} == {out} or "
                       f"(T.isnan({out}) and T.isnan({message})), {eid}, nnz))\n")
    text += _iteration(["O", "I", "J"] + features, iters, "SSR" + "S" * len(sizes), "gspmm") \
        + _TILES_SHARE_NO_ROW
    init = _INIT[reduce_op].format(dtype=dtype)
    return text + (f"        with T.init():\n            {out} = {init}\n"
                   f"        {out} = {_COMBINE[reduce_op].format(acc=out, msg=message)}\n")


def gsddmm_source(op: str, dtype: str, sizes: tuple, lhs_full: tuple, rhs_full: tuple,
                  lhs_target: str, rhs_target: str, dot_size: int = 0) -> str:
    """TVMScript text of ``gsddmm``; for ``op == "dot"``, ``dot_size`` is the length of the
    last feature dimension, summed over (both operands have it)."""
    uses_lhs, uses_rhs = op != "copy_rhs", op != "copy_lhs"
    params = ([("x", "X")] if uses_lhs else []) + ([("y", "Y")] if uses_rhs else []) \
        + [("out", "OUT")]
    text = _HEADER.format(params=", ".join(f"{handle}: T.handle" for handle, _ in params))
    text += _feature_axes(sizes)
    reduced = (("D", "d"),) if op == "dot" else ()
    if op == "dot":
        text += f"    D = T.dense_fixed({dot_size})\n"
    lhs_decl, lhs = _buffer("X", "x", lhs_target, lhs_full, dtype, reduced)
    rhs_decl, rhs = _buffer("Y", "y", rhs_target, rhs_full, dtype, reduced)
    out_decl, out = _buffer("OUT", "out", "e", (True,) * len(sizes), dtype)
    text += (lhs_decl if uses_lhs else "") + (rhs_decl if uses_rhs else "") + out_decl
    axes = ["O", "I", "J"] + [f"K{b}" for b in range(len(sizes))]
    iters = ["o", "i", "j"] + [f"k{b}" for b in range(len(sizes))]
    if op == "dot":
        text += _iteration(axes + ["D"], iters + ["d"], "SSS" + "S" * len(sizes) + "R",
                           "gsddmm")
        return text + (f"        with T.init():\n            {out} = T.{dtype}(0)\n"
                       f"        {out} = {out} + {lhs} * {rhs}\n")
    text += _iteration(axes, iters, "SSS" + "S" * len(sizes), "gsddmm")
    return text + f"        {out} = {_message(op, lhs, rhs)}\n"


@lru_cache(maxsize=None)
def gspmm_kernel(*key):
    """The Stage I function of ``gspmm_source(*key)``."""
    return from_source(gspmm_source(*key))


@lru_cache(maxsize=None)
def gsddmm_kernel(*key):
    """The Stage I function of ``gsddmm_source(*key)``."""
    return from_source(gsddmm_source(*key))
