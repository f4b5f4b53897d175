"""Padding slots of a sparse axis: a slot whose coordinate an earlier slot of its row holds.

A sparse axis with a fixed number of slots per row (ELL), or rows padded to a multiple, fills
the slots a short row does not need with a coordinate the row already has: the conversion
routines of ``sparsetir.format`` repeat the row's last real column, SparseTIR pads with column
0. Such a slot names an element that the row's first slot with that coordinate already holds.

An iteration annotated ``{FIRST_SLOTS_ANNOTATION: ["j"]}`` (``format_decompose`` gives one to
the ``preprocess`` iterations that fill a new format by looking its values up in the old one)
stores 0 instead of its value at every slot of ``j``'s axis that is not the first of its row to
hold its coordinate. The test looks the slot's own coordinate up in its row up to the slot (a
binary search on a sorted axis, whose rows may then repeat a coordinate but not descend; a scan
otherwise) and compares the position found with the slot's.

Example
-------
>>> # ELL row with columns [3, 5, 5, 5] (one real entry repeated as padding):
>>> #   A_ell[o, i, j] = A[i, j]  ->  values [A[i, 3], A[i, 5], 0, 0]
"""

from __future__ import annotations

from tvm import tirx

from ..ir.attrs import FIRST_SLOTS_ANNOTATION
from ..ir.utils import structural_map
from ..errors import LoweringError


def zero_repeated_slots(stmts: list, it, env: dict, lowering, block) -> list:
    """``stmts`` (the Stage II plan of ``it``'s body) whose statements store 0 at repeated
    slots of the variables ``it`` names in its ``FIRST_SLOTS_ANNOTATION`` (nested iterations
    are left as they are); unchanged without one."""
    names = [str(n) for n in it.annotations.get(FIRST_SLOTS_ANNOTATION, [])]
    if not names:
        return stmts
    first = tirx.all(*[_first_slot(it, name, env, lowering, block) for name in names])

    def on_store(store):
        zero = tirx.const(0, store.value.ty.dtype)
        return tirx.BufferStore(store.buffer, tirx.Select(first, store.value, zero),
                                list(store.indices))

    return [structural_map(s, (tirx.BufferStore, on_store)) if isinstance(s, tirx.Stmt)
            else s for s in stmts]


def _first_slot(it, name: str, env: dict, lowering, block):
    """Whether the slot of variable ``name`` is the first of its row with its coordinate."""
    var = next((v.var for v in it.sp_iter_vars if v.var.name == name), None)
    info = env.get(var) if var is not None else None
    if info is None or not info.axis.is_sparse or info.attached:
        raise LoweringError(f"sparse iteration {it.name}: {FIRST_SLOTS_ANNOTATION} names "
                            f"{name}, which must be one of its variables iterating a sparse "
                            "axis (not attached)")
    start = lowering.simplify(info.off - info.pos)
    found = block.request_search(lowering.indices(info.axis), start, info.off + 1, info.coord,
                                 "left" if info.axis.sorted else "equal")
    return found == info.off
