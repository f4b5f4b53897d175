"""The short names DGL users know, as thin aliases of ``gspmm`` and ``gsddmm``.

``{lhs}_{op}_{rhs}_{reduce}`` is ``gspmm(M, op, reduce, x, y)`` with ``x`` on the sources
``u`` and ``y`` on the edges ``e`` (``u_mul_e_sum``, ``u_add_e_max``...); ``copy_u_{reduce}``
and ``copy_e_{reduce}`` reduce one operand. ``{lhs}_{op}_{rhs}`` with targets among ``u``,
``v``, ``e`` is ``gsddmm(M, op, x, y, lhs, rhs)`` (``u_dot_v``, ``u_add_v``, ``e_div_v``...);
``copy_u`` and ``copy_v`` give each edge its source's or destination's data, ``copy_e`` its
own (a copy, as DGL's operator set has it).

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix, copy_u_mean, u_dot_v
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[1, 1], [0, 0]])))
>>> copy_u_mean(M, np.float32([[2], [4]])).ravel().tolist()
[3.0, 0.0]
>>> u_dot_v(M, np.float32([[1, 2], [3, 4]]), np.float32([[1, 1], [5, 5]])).ravel().tolist()
[3.0, 7.0]
"""

from __future__ import annotations

from .graph_ops import REDUCERS, gsddmm, gspmm

_BINARY = ("add", "sub", "mul", "div")


def _spmm_alias(op: str, reduce_op: str, name: str):
    if op == "copy_lhs":
        def alias(M, x):
            return gspmm(M, "copy_lhs", reduce_op, x, None)
    elif op == "copy_rhs":
        def alias(M, x):
            return gspmm(M, "copy_rhs", reduce_op, None, x)
    else:
        def alias(M, x, y):
            return gspmm(M, op, reduce_op, x, y)
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"``gspmm(M, {op!r}, {reduce_op!r}, ...)``: DGL's ``{name}``."
    return alias


def _sddmm_alias(op: str, lhs: str, rhs: str, name: str):
    if op == "copy_lhs":
        def alias(M, x):
            return gsddmm(M, "copy_lhs", x, None, lhs, rhs)
    else:
        def alias(M, x, y):
            return gsddmm(M, op, x, y, lhs, rhs)
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"``gsddmm(M, {op!r}, x, y, {lhs!r}, {rhs!r})``: DGL's ``{name}``."
    return alias


def _aliases() -> dict:
    made = {}
    for reduce_op in REDUCERS:
        for op in _BINARY:
            made[f"u_{op}_e_{reduce_op}"] = _spmm_alias(op, reduce_op, f"u_{op}_e_{reduce_op}")
        made[f"copy_u_{reduce_op}"] = _spmm_alias("copy_lhs", reduce_op, f"copy_u_{reduce_op}")
        made[f"copy_e_{reduce_op}"] = _spmm_alias("copy_rhs", reduce_op, f"copy_e_{reduce_op}")
    for lhs in "uve":
        for rhs in "uve":
            if lhs != rhs:
                for op in _BINARY + ("dot",):
                    made[f"{lhs}_{op}_{rhs}"] = _sddmm_alias(op, lhs, rhs, f"{lhs}_{op}_{rhs}")
    made["copy_u"] = _sddmm_alias("copy_lhs", "u", "v", "copy_u")
    made["copy_v"] = _sddmm_alias("copy_lhs", "v", "u", "copy_v")
    made["copy_e"] = _sddmm_alias("copy_lhs", "e", "u", "copy_e")
    return made


ALIASES = _aliases()
globals().update(ALIASES)
__all__ = sorted(ALIASES)
