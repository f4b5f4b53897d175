"""A row segment that is its row's only one stores its sum instead of adding it atomically.

After ``accumulator.add_into_output`` every segment of ``ops.kernels.spmm_segments`` adds its
register sum into its output row, zeroed before, with one atomic add per feature. On a graph
whose rows are mostly shorter than a segment nearly every such add is its row's only one.
:func:`store_single_segments` makes the write-back a plain store when neither neighbour of the
segment in ``seg_rows`` holds its row. That is exact when ``seg_rows`` never decreases (a row's
segments are then neighbours: a segment whose neighbours hold other rows is its row's only
one, and the zeroed row plus its sum is its sum), so the function also makes every call check
it: the index check of ``seg_rows`` becomes that of one sorted row of ``s`` slots, repeats
allowed (``row_segments`` gives such arrays). Measured on an H200 (``docs/benchmark.md``): the
arxiv-size synthetic graph at 256 features 0.76 -> 0.63 ms with segments of 32; little change
at 32-64 features.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm_segments
>>> from sparsetir.schedule.operators import schedule_for
>>> func = spmm_segments.specialize({"feat_size": 32})
>>> mod = schedule_for("spmm_segments", sparsetir.lower_sparse_iter(func), 32, "cuda")
>>> [line.strip() for line in mod.script().splitlines() if "] = " in line and "Y_local[v0" in line]
['Y[I_indices[vo + vi] + v0, v1] = Y[I_indices[vo + vi] + v0, v1] + Y_local[v0, v1]', \
'Y[I_indices[vo + vi] + v0, v1] = Y_local[v0, v1]']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import SparseTIRValueError
from ..ir.attrs import (ATOMIC_ANNOTATION, INDEX_CHECKS_KEY, param_names, root_annotations,
                        size, with_root_annotations)
from ..ir.utils import added_value, structural_map


def store_single_segments(mod: tvm.IRModule, rows_param: str = "seg_rows") -> tvm.IRModule:
    """``mod`` (a scheduled segment SpMM) with its atomic write-back storing where the
    segment is its row's only one, and the call checking that ``rows_param`` (the Stage I
    name of the segments' row ids) never decreases. Refused (ValueError) when ``mod`` has no
    atomic write-back indexed by that array."""
    func = mod["main"]
    rows = _stage2_buffer(func, rows_param)
    rewritten = []

    def rewrite(block):
        store = block.body
        if ATOMIC_ANNOTATION not in block.annotations or not isinstance(store, tirx.BufferStore):
            return block
        value = added_value(store)
        position = _row_position(store, rows)
        if value is None or position is None:
            return block
        rewritten.append(block.name_hint)
        alone = tirx.BufferStore(store.buffer, value, list(store.indices))
        body = tirx.IfThenElse(_shares_its_row(rows, position), store, alone)
        reads = [*block.reads, tirx.BufferRegion(rows, [tvm.ir.Range.from_min_extent(
            0, rows.shape[0])])]
        return s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint, body,
                            block.init, block.alloc_buffers, block.match_buffers,
                            block.annotations)

    body = structural_map(func.body, (s_tir.SBlock, rewrite))
    if not rewritten:
        raise SparseTIRValueError(f"no atomic write-back indexed by {rows_param} to store from")
    func = _sorted_rows_checked(func.with_body(body), rows_param, rows.shape[0])
    return tvm.IRModule({gv: func if gv.name_hint == "main" else f
                         for gv, f in mod.functions.items()}, attrs=mod.attrs)


def _stage2_buffer(func: tirx.PrimFunc, stage1_name: str):
    """The Stage II buffer of the Stage I parameter ``stage1_name``."""
    stage2 = {v: k for k, v in param_names(func).items()}.get(stage1_name)
    for param in func.params:
        if tirx.is_buffer_var(param) and param.name == stage2:
            return param
    raise SparseTIRValueError(f"the function has no parameter {stage1_name}")


def _row_position(store, rows):
    """The position ``p`` of ``rows[p]`` in the output index of ``store``, or None."""
    found = []

    def on_load(load):
        if load.source.same_as(rows):
            found.append(load.indices[0])
    for index in store.indices:
        tvm_ffi.structural_walk(index, (tvm.ir.TensorLoad, on_load), order="pre")
    return found[0] if found else None


def _shares_its_row(rows, position):
    """Whether segment ``position`` has a neighbour on its row: ``rows[p - 1]`` or
    ``rows[p + 1]`` equal to ``rows[p]``, the neighbours' loads clamped into the array."""
    last = rows.shape[0] - 1
    row = tirx.BufferLoad(rows, [position])
    before = tirx.BufferLoad(rows, [tirx.max(position - 1, 0)])
    after = tirx.BufferLoad(rows, [tirx.min(position + 1, last)])
    return tirx.Or(tirx.And(position > 0, before == row), tirx.And(position < last, after == row))


def _sorted_rows_checked(func: tirx.PrimFunc, rows_param: str, count) -> tirx.PrimFunc:
    """``func`` whose call checks ``rows_param`` as one sorted row of ``count`` slots (its
    ``width`` then counts every segment, no longer an ELL row's slots: a buffer specialised
    after this would read it so)."""
    annotations = root_annotations(func)
    checks = [dict(entry) for entry in annotations.get(INDEX_CHECKS_KEY, [])]
    changed = [entry for entry in checks
               if str(entry["indices"]) == rows_param and not str(entry["indptr"])]
    if not changed:
        raise SparseTIRValueError(f"no index check of {rows_param} to make sorted")
    for entry in changed:
        entry["sorted"], entry["width"] = True, size(count)
    return with_root_annotations(func, {INDEX_CHECKS_KEY: checks})
