"""The co-iteration constructs of the ``T`` namespace: ``T.coiterate``, ``T.union``, ``T.intersect``.

They build the Stage I nodes of ``sparsetir.ir.coiteration`` directly (the parser reads them
where a ``T.sp_iter`` takes an axis; the printer writes them back with ``CoiteratedAxis.script``).

Example
-------
>>> # with T.sp_iter([I, T.coiterate(J, T.union(B, C))], "SS", "add") as [i, j]:
>>> #     A[i, j] = B[i, j] + C[i, j]
"""

from __future__ import annotations

from ..ir.coiteration import CoiteratedAxis, Merge


def coiterate(axis, merge) -> CoiteratedAxis:
    """Iterate the coordinates of the dense axis ``axis`` that ``merge`` holds."""
    return CoiteratedAxis(axis=axis, merge=merge)


def union(*operands) -> Merge:
    """The coordinates stored in any of ``operands`` (sparse buffers or merges)."""
    return Merge(op="union", operands=list(operands))


def intersect(*operands) -> Merge:
    """The coordinates stored in every one of ``operands`` (sparse buffers or merges)."""
    return Merge(op="intersect", operands=list(operands))
