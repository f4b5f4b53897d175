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
An ELL row with columns ``[3, 5, 5, 5]`` (one real entry repeated as padding), filled by
``A_ell[i, j] = A[i, j]``, holds ``[A[i, 3], A[i, 5], 0, 0]``:

>>> import numpy as np, sparsetir
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def fill(a: T.handle, a_ell: T.handle, indptr: T.handle, indices: T.handle,
...          ell_cols: T.handle, m: T.int32, n: T.int32, nnz: T.int32):
...     I = T.dense_fixed(m)
...     J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
...     JE = T.sparse_fixed(I, (n, 4), ell_cols, "int32")
...     A = T.match_sparse_buffer(a, (I, J), "float32")
...     A_ell = T.match_sparse_buffer(a_ell, (I, JE), "float32")
...     with T.sp_iter([I, JE], "SS", "fill") as [i, j]:
...         T.sp_iter_attr({"sparsetir.first_slots": ["j"]})
...         A_ell[i, j] = A[i, j]
>>> kernel = sparsetir.build(fill, "llvm", cache=True)
>>> a_ell = np.full((1, 4), np.nan, np.float32)
>>> kernel(np.float32([1, 2]), a_ell, np.int32([0, 2]), np.int32([3, 5]),
...        np.int32([[3, 5, 5, 5]]), 1, 6, 2)
>>> a_ell.tolist()
[[1.0, 2.0, 0.0, 0.0]]
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
