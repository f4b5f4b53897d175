"""Small TIR helpers of the co-iteration emitters (``coiterate_emit``, ``coiterate_workspace``).

Example
-------
>>> from tvm import tirx
>>> p = tirx.Var("p", "int32")
>>> str(all_of([p < 4, p > 0]))
'p < 4 and p > 0'
"""

from __future__ import annotations

from tvm import tirx

INT = "int32"
"""The index type of co-iteration kernels (positions, coordinates, counters)."""
INT64 = "int64"
"""The type ``count`` counts an appended output's entries in (its totals may pass int32)."""


def root_pos():
    return tirx.const(0, INT)




def all_of(conds):
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out




def any_of(conds):
    out = conds[0]
    for c in conds[1:]:
        out = tirx.Or(out, c)
    return out


def and_then(cond, then):
    """``cond && then`` that evaluates ``then`` only when ``cond`` holds."""
    return tirx.if_then_else(cond, then, tirx.const(False, "bool"))
