"""``lower_sparse_buffer``: Stage II to Stage III, every init unconditional, every buffer flat.

``lower_sparse_buffer(mod)`` runs two passes: ``sparsetir.DecomposeConditionalInits``
(``complete_inits``: every reduction whose init TVM would skip when a reduction loop is empty
is decomposed, so outputs never depend on what the arrays held), then
``sparsetir.LowerSparseBuffer``, which flattens the buffers as follows.

Stage II keeps a sparse buffer's fixed trailing axes as dimensions (BSR values are
``[nnzb, bs, bs]``) so that schedules and tensorize see tiles. Users pass flat arrays, so this
pass gives every buffer parameter and every global intermediate one dimension, with the
row-major offset arithmetic in every access; the regions of a flattened buffer cover all of it
(no schedule runs after this pass), those of a buffer that was already 1-D are kept.
Parameters assume only their element's alignment (numpy allocates at 16 bytes). A buffer whose
tiles a tensorized block matches keeps its dimensions and TVM's alignment (the call passes a
view of that shape). Loops, blocks, annotations and thread bindings (the user's schedule) are
left as they are. The Stage II shape of each parameter it re-declares is recorded on the root
block (``ir.attrs.stage2_shapes``): a call checks a multi-dimensional argument against it.

Example
-------
A BSR output ``C: T.Buffer((nb, blk, feat), "float32")`` read at ``C[vi, vbi, vf]`` becomes
``C: T.Buffer((nb * blk * feat,), "float32")`` read at ``C[(vi * blk + vbi) * feat + vf]``;
the CSR SpMM's output so:

>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 16}))
>>> 'Y: T.Buffer(("m", 16), "float32")' in mod.script()
True
>>> flat = lower_sparse_buffer(mod).script()
>>> 'Y: T.Buffer(("m * 16",), "float32", align=4)' in flat, "Y[vi * 16 + vk]" in flat
(True, True)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script.ir_builder import tirx as Tb

from ..ir.attrs import shapes_annotation, with_root_annotations
from ..ir.utils import structural_map
from .complete_inits import DecomposeConditionalInits
from ..errors import SparseTIRTypeError


def lower_sparse_buffer(mod: tvm.IRModule) -> tvm.IRModule:
    """Decompose conditional inits, then flatten the buffer parameters and global
    intermediates of every function in ``mod``."""
    if not isinstance(mod, tvm.IRModule):
        raise SparseTIRTypeError(f"lower_sparse_buffer expects an IRModule, got {type(mod).__name__}")
    return tvm.transform.Sequential([DecomposeConditionalInits(), LowerSparseBuffer()])(mod)


def LowerSparseBuffer() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.LowerSparseBuffer``: flatten the buffer parameters and global
    intermediates of every function (inits must already be unconditional)."""
    def flatten(mod, _ctx):
        funcs = {gv: _flatten_function(f) if isinstance(f, tirx.PrimFunc) else f
                 for gv, f in mod.functions.items()}
        return tvm.IRModule(funcs, attrs=mod.attrs)

    return tvm.transform.module_pass(flatten, opt_level=0, name="sparsetir.LowerSparseBuffer")


def _flatten_function(func: tirx.PrimFunc) -> tirx.PrimFunc:
    analyzer = tvm.sym.Analyzer()
    flat = {}
    tiles = _matched_buffers(func)
    for param in func.params:
        # parameters assume only their element's alignment, so any contiguous numpy array
        # or torch tensor is passed without a copy; a buffer whose tiles a tensorized block
        # matches keeps its dimensions and alignment (the call passes a view of that shape)
        if not tirx.is_buffer_var(param):
            continue
        if param in tiles:
            continue  # tensor intrinsics ask for TVM's default alignment: keep it
        if len(param.shape) != 1 or param.data_alignment != _itemsize(param):
            flat[param] = _flat_buffer(param, analyzer, align=_itemsize(param))
    root = func.body.block if isinstance(func.body, s_tir.SBlockRealize) else None
    if root is not None:
        for buf in root.alloc_buffers:
            if len(buf.shape) > 1 and _scope(buf) == "global":
                flat[buf] = _flat_buffer(buf, analyzer)
    if not flat:
        return func

    def offset(buf, indices):
        if len(flat[buf].shape) == len(buf.shape):    # a tile buffer keeps its dimensions
            return list(indices)
        result = tirx.const(0, "int32")
        for dim, index in zip(buf.shape, indices):
            result = result * dim + index
        return [analyzer.simplify(result)]

    def on_load(load):
        if load.source not in flat:
            return load
        return tirx.BufferLoad(flat[load.source], offset(load.source, load.indices))

    def on_store(store):
        if store.buffer not in flat:
            return store
        return tirx.BufferStore(flat[store.buffer], store.value,
                                offset(store.buffer, store.indices))

    def on_region(region):
        # Regions only guide scheduling, which is over once buffers are flat: cover the buffer.
        buf = flat.get(region.source)
        if buf is None:
            return region
        if len(buf.shape) == len(region.source.shape):
            return tirx.BufferRegion(buf, list(region.region))
        return tirx.BufferRegion(buf, [tvm.ir.Range.from_min_extent(0, buf.shape[0])])

    def on_block(block):
        allocs = [flat.get(b, b) for b in block.alloc_buffers]
        matches = [s_tir.MatchBufferRegion(m.buffer, on_region(m.source))
                   for m in block.match_buffers]
        return s_tir.SBlock(block.iter_vars, [on_region(r) for r in block.reads],
                            [on_region(r) for r in block.writes], block.name_hint, block.body,
                            block.init, allocs, matches, block.annotations)

    body = structural_map(
        func.body, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store),
                    (s_tir.SBlock, on_block)], order="post")
    params = [flat.get(p, p) for p in func.params]
    flattened = tirx.PrimFunc(params, body, func.ret_type, func.attrs)
    shapes = {p.name: list(p.shape) for p in func.params if p in flat}
    if root is None or not shapes:
        return flattened
    return with_root_annotations(flattened, shapes_annotation(shapes))


def _flat_buffer(buf, analyzer, align: int = 0):
    size = tirx.const(1, "int32")
    for dim in buf.shape:
        size = size * dim
    # layout=None: the layout TVM's own parser and match_buffer give a parameter buffer
    return Tb.buffer([analyzer.simplify(size)], buf.dtype, layout=None, buffer_name=buf.name,
                     align=align)


def _matched_buffers(func) -> set:
    """Buffers a block's ``match_buffer`` takes a region of (tensorized tiles)."""
    found = set()
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: found.update(
        m.source.source for m in b.match_buffers)), order="pre")
    return found


def _itemsize(buf) -> int:
    return max(1, tvm.runtime.DataType(str(buf.dtype)).bits // 8)


def _scope(buf) -> str:
    return str(buf.scope()) if callable(getattr(buf, "scope", None)) else "global"
