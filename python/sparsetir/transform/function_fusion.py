"""SparseTIR's ``HorizontalFusion``: every launch of a function marked ``horizontal_fuse``
becomes one.

A function with ``T.func_attr({"horizontal_fuse": 1})`` whose top-level nests are each a loop
bound to ``blockIdx.x`` compiles to a single CUDA kernel. Its ``blockIdx.x`` extent is the sum
of the nests' extents; every other thread tag (``threadIdx.x``...) gets the largest extent any
nest binds. All thread loops are lifted above the nests (outermost first, as they first appear),
and block ``b`` runs the nest whose range of blocks holds ``b``:

    for bx in T.thread_binding(48, "blockIdx.x"):
        for tx in T.thread_binding(128, "threadIdx.x"):
            if bx < 32:   <first nest, its blockIdx var replaced by bx, threadIdx var by tx>
            else:
                if bx < 48:   <second nest, blockIdx var replaced by bx - 32>

A nest that binds a tag to fewer threads (or not at all) than the launch runs under
``if tx < extent``. The attribute is removed. ``sparsetir.build`` runs the pass on CUDA in the
middle of TVM's block lowering, after cross-thread reductions are lowered (as SparseTIR did),
and ``backend.uniform_conditions`` then lets TVM put ``__syncthreads`` inside the ``bx``
conditions, which every thread of a block evaluates alike. Nests are refused
(``HorizontalFusionError``) when one reads or writes what another writes other than by
accumulating atomically (``horizontal_fusion.check_independent``), or when a nest narrower
than the launch holds a cross-thread reduction, which needs every thread of the block.

Example
-------
>>> from tvm.script import tirx as T
>>> @T.prim_func(s_tir=True, private=True)
... def main(a: T.Buffer((256,), "float32"), b: T.Buffer((64,), "float32")):
...     T.func_attr({"horizontal_fuse": 1})
...     for bx in T.thread_binding(4, thread="blockIdx.x"):
...         for tx in T.thread_binding(64, thread="threadIdx.x"):
...             with T.sblock("double"):
...                 vi = T.axis.spatial(256, bx * 64 + tx)
...                 a[vi] = a[vi] * T.float32(2)
...     for bx in T.thread_binding(2, thread="blockIdx.x"):
...         for tx in T.thread_binding(32, thread="threadIdx.x"):
...             with T.sblock("halve"):
...                 vi = T.axis.spatial(64, bx * 32 + tx)
...                 b[vi] = b[vi] * T.float32(0.5)
>>> fused = HorizontalFusion()(tvm.IRModule({"main": main}))
>>> [line.strip() for line in fused.script().splitlines()
...  if "thread_binding" in line or "if " in line]
['for block_idx_x in T.thread_binding(6, thread="blockIdx.x"):',
 'for thread_idx_x in T.thread_binding(64, thread="threadIdx.x"):',
 'if block_idx_x < 4:', 'if block_idx_x < 6:', 'if thread_idx_x < 32:']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import HorizontalFusionError
from ..ir.attrs import FUSE_ANNOTATION
from ..ir.utils import structural_map, substitute
from .horizontal_fusion import check_independent, marked_for_fusion, with_root_body

BLOCK_X = "blockIdx.x"


def HorizontalFusion() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.HorizontalFusion`` (``fuse_function`` on every function that has
    the ``horizontal_fuse`` attribute; the others are left as they are)."""
    def run(mod, _ctx):
        funcs = {gv: fuse_function(f) if marked_for_fusion(f) else f
                 for gv, f in mod.functions.items()}
        return tvm.IRModule(funcs, attrs=mod.attrs)

    return tvm.transform.module_pass(run, opt_level=0, name="sparsetir.HorizontalFusion")


def fuse_function(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its top-level ``blockIdx.x`` nests fused into one launch (module
    docstring), without the ``horizontal_fuse`` attribute."""
    root = func.body.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    allocations = [s for s in stmts if isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    nests = stmts[len(allocations):]
    for index, nest in enumerate(nests):
        if not (isinstance(nest, tirx.For) and _tag(nest) == BLOCK_X):
            raise HorizontalFusionError(
                f"cannot fuse the launches of {_name(func)}: its top-level nest {index} is not a "
                f"loop bound to {BLOCK_X} (bind the outermost loop of every nest to {BLOCK_X})")
    if len(nests) > 1:
        check_independent(nests, "cuda")
    tags = _launch_extents(nests)
    fused = {tag: tirx.Var(tag.replace("Idx.", "_idx_").lower(), "int32") for tag in tags}
    parts, start = [], 0
    for nest in nests:
        extent = _extent(nest)
        body = substitute(nest.body, {nest.loop_var: fused[BLOCK_X] - start if start
                                      else fused[BLOCK_X]})
        body = _lift_threads(body, fused, tags, _name(func))
        parts.append((start + extent, body))
        start += extent
    chain = None
    for end, body in reversed(parts):
        chain = tirx.IfThenElse(fused[BLOCK_X] < end, body, chain)
    for tag in reversed(list(tags)):
        binding = tirx.IterVar(None, tirx.Var("", "int32"), tirx.IterVar.ThreadIndex, tag)
        chain = tirx.For(fused[tag], 0, tags[tag], tirx.ForKind.THREAD_BINDING, chain, binding)
    body = tirx.SeqStmt(allocations + [chain]) if allocations else chain
    return with_root_body(func, body).without_attr(FUSE_ANNOTATION)


def _launch_extents(nests: list) -> dict:
    """Thread tag -> the launch's extent, in the order the tags first appear: the sum of the
    nests' ``blockIdx.x`` extents, the largest extent of any other tag."""
    tags = {}
    for nest in nests:
        tags[BLOCK_X] = tags.get(BLOCK_X, 0) + _extent(nest)
        for loop in _thread_loops(nest.body):
            tag = _tag(loop)
            if tag == BLOCK_X:
                raise HorizontalFusionError(
                    f"loop {loop.loop_var.name} binds {BLOCK_X} inside another {BLOCK_X} loop")
            tags[tag] = max(tags.get(tag, 0), _extent(loop))
    return tags


def _lift_threads(body, fused: dict, tags: dict, func_name: str):
    """``body`` without its thread loops: each loop variable becomes the launch's variable of
    its tag; a loop over fewer threads than the launch has, and a nest that binds a tag not at
    all (one thread of it), run under a guard."""
    thread_vars = set(fused.values())
    bound = set()

    def guard(stmt, tag: str, extent: int, reduces: bool):
        if extent == tags[tag]:
            return stmt
        if reduces:
            raise HorizontalFusionError(
                f"cannot fuse the launches of {func_name}: a nest runs on {extent} of the "
                f"{tags[tag]} {tag} threads and holds a cross-thread reduction, which needs "
                f"every thread of the block; give every nest the same {tag} extent")
        return tirx.IfThenElse(fused[tag] < extent, stmt, None)

    def on_for(loop):
        if loop.kind != tirx.ForKind.THREAD_BINDING:
            return loop
        tag = _tag(loop)
        bound.add(tag)
        inner = substitute(loop.body, {loop.loop_var: fused[tag]})
        return guard(inner, tag, _extent(loop),
                     _has_cross_thread_reduction(loop, thread_vars | {loop.loop_var}))

    body = structural_map(body, (tirx.For, on_for), order="post")
    for tag in reversed([t for t in tags if t != BLOCK_X and t not in bound]):
        body = guard(body, tag, 1, _has_cross_thread_reduction(body, thread_vars))
    return body


def _has_cross_thread_reduction(node, thread_vars: set) -> bool:
    """Whether ``node`` reduces across threads: a lowered ``tvm_thread_allreduce``, or a
    reduction block whose reduction variable is bound through one of ``thread_vars``."""
    allreduce = tvm.ir.Op.get("tirx.tvm_thread_allreduce")
    found = []

    def on_realize(realize):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type == tirx.IterVar.CommReduce:
                tvm_ffi.structural_walk(value, (tirx.Var, lambda v: found.append(v)
                                                if v in thread_vars else None), order="pre")

    tvm_ffi.structural_walk(node, [
        (tvm.ir.Call, lambda call: found.append(call) if call.op.same_as(allreduce) else None),
        (s_tir.SBlockRealize, on_realize)], order="pre")
    return bool(found)


def _thread_loops(node) -> list:
    loops = []
    tvm_ffi.structural_walk(node, (tirx.For, lambda loop: loops.append(loop)
                                   if loop.kind == tirx.ForKind.THREAD_BINDING else None),
                            order="pre")
    return loops


def _tag(loop) -> str:
    binding = loop.thread_binding
    return str(binding.thread_tag) if binding is not None else ""


def _extent(loop) -> int:
    if not (isinstance(loop.extent, tirx.IntImm) and isinstance(loop.min, tirx.IntImm)
            and int(loop.min) == 0):
        raise HorizontalFusionError(
            f"loop {loop.loop_var.name} bound to {_tag(loop)} must run from 0 over a constant "
            f"extent to be fused (it runs from {loop.min} over {loop.extent})")
    return int(loop.extent)


def _name(func) -> str:
    symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
    return str(symbol) if symbol is not None else "the function"
