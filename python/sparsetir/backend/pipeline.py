"""The TIR pipeline ``build`` compiles with: TVM's own, plus one repair and one optimisation.

TVM 0.27 loses track of a buffer in two situations that sparse schedules produce: a block-local
buffer whose shape depends on a block variable (``cache_read`` of one row's values gives
``A_local`` of shape ``indptr[vi+1] - indptr[vi]``), and a buffer compacted to a region whose
bounds read another compacted buffer. ``ConvertBlocksToOpaque`` and ``CompactBufferAllocation``
then leave the body referring to a copy of the buffer that is never allocated, and
``FlattenBuffer`` stops with "Buffer A_local is used before its definition". The ``sparsetir``
pipeline runs TVM's block lowering (with SparseTIR's ``HorizontalFusion`` of a function marked
``horizontal_fuse`` where SparseTIR ran it, once cross-thread reductions are lowered: see
``transform.function_fusion``), points every such reference back at the buffer that is
allocated under the same name, and then runs TVM's default pipeline (whose block passes have
nothing left to do); ``mark_uniform_conditions`` lets TVM put a ``__syncthreads`` inside an
``if`` that all threads of a block take alike (a fused kernel's ``blockIdx`` ranges);
``check_indices_inline`` makes the index checks of a kernel so marked inside its loops
(``backend.inline_checks``), ``report_parallel_checks`` makes a check that fails in a
parallel loop stop the call even on one thread (where TVM drops the error),
``vectorize_reductions`` splits scalar dot products into vector lanes (CPU), ``prefetch_gathers`` prefetches gathered rows ahead in loops annotated
for it, ``realign_gathers`` loads gathered rows that start off a cache line as the whole lines
they span, shifted in registers (loops annotated for it), ``hoist_index_loads`` moves
loop-invariant tests out of loops and binds loads of read-only index arrays once per loop
iteration, and ``stack_scratch`` puts small scratch buffers of CPU kernels on the stack (a
failing check cannot leak them). Where an allocation's size depends on a loop variable, TVM's
``StorageRewrite`` (which would hoist it out of that loop) is turned off for that module.
TVM's passes see float values protected from its simplifier, which would fold ``x - x`` to 0
(``exact_floats``): a kernel computes them as written, as numpy does.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.transform.pipeline import stage3_passes
>>> mod = stage3_passes("llvm")(sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 16})))
>>> main = tvm.compile(mod, "llvm", tir_pipeline=PIPELINE_NAME)["main"]  # registered on import
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> args = [tvm.runtime.tensor(a) for a in (A.data, X.ravel(), Y.ravel(), A.indptr, A.indices)]
>>> main(*args, 6, 5, A.nnz)
>>> np.allclose(args[2].numpy().reshape(6, 16), A @ X)
True
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx import compilation_pipeline

from ..ir.utils import retarget_buffers
from ..transform.function_fusion import HorizontalFusion
from .exact_floats import protect_floats, restore_floats
from .index_loads import hoist_index_loads
from .inline_checks import check_indices_inline
from .parallel_checks import report_parallel_checks
from .prefetch import prefetch_gathers
from .realign_gathers import realign_gathers
from .stack_scratch import stack_scratch
from .uniform_conditions import mark_uniform_conditions
from .vector_reductions import vectorize_reductions
from ..errors import BufferReferenceError

PIPELINE_NAME = "sparsetir"

# TVM's default s_tir pipeline up to the point where blocks are gone (same passes, same order),
# with SparseTIR's HorizontalFusion where SparseTIR ran it (a no-op without the attribute)
_BLOCK_LOWERING = (
    "CanonicalizeLoop", "LowerCrossThreadReduction", "LowerInitBlock",
    "PlanAndUpdateBufferAllocationLocation", "ConvertBlocksToOpaque", HorizontalFusion,
    "LiftThreadBinding", "ManifestSharedMemoryLocalStage", "CompactBufferAllocation",
    "LowerAutoCopy", "UnifyThreadBinding", "LowerMatchBuffer", "StmtSimplify",
    "InjectPermutedLayout", "AnnotateIrregularLoop", "InjectSoftwarePipeline",
    "TransformMmaBufferLayout", "LowerOpaqueBlock",
)


def lower_blocks(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with its blocks lowered to plain loops as the ``sparsetir`` pipeline lowers them
    (TVM's block passes, then ``repair_buffer_references``): what the later passes and the
    analyses of generated loops see."""
    return tvm.transform.Sequential(_block_passes() + [repair_buffer_references])(mod)


def _block_passes() -> list:
    """The passes of ``_BLOCK_LOWERING``: TVM's by name, ours as they are, float values
    protected from TVM's simplifier while they run (``exact_floats``)."""
    return [protect_floats] + [getattr(s_tir.transform, step)() if isinstance(step, str)
                               else step() for step in _BLOCK_LOWERING] + [restore_floats]




@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.RepairBufferReferences")
def repair_buffer_references(func, _mod, _ctx):
    """Point uses of a never-allocated copy of a buffer at the allocated buffer of its name."""
    defined = {p for p in func.params if tirx.is_buffer_var(p)}
    tvm_ffi.structural_walk(func.body, ((tirx.AllocBuffer, tirx.DeclBuffer),
                                        lambda node: defined.add(node.buffer)), order="pre")
    used = set()
    tvm_ffi.structural_walk(func.body, [
        (tirx.BufferStore, lambda s: used.add(s.buffer)),
        (tvm.ir.TensorLoad, lambda load: used.add(load.source))], order="pre")
    stray = [b for b in used if b not in defined and tirx.is_buffer_var(b)]
    if not stray:
        return func
    by_name = {}
    for buf in defined:
        by_name.setdefault(buf.name, []).append(buf)
    mapping = {}
    for buf in stray:
        candidates = [c for c in by_name.get(buf.name, [])
                      if str(c.dtype) == str(buf.dtype) and c.scope() == buf.scope()]
        if len(candidates) != 1:
            raise BufferReferenceError(f"buffer {buf.name} is used but never allocated")
        mapping[buf] = candidates[0]

    return func.with_body(retarget_buffers(func.body, mapping))


def _sparsetir_pipeline(**kwargs):
    default, finalize_host, finalize_device = compilation_pipeline.get_tir_pipeline("s_tir",
                                                                                    **kwargs)
    blocks = tvm.transform.Sequential(
        _block_passes()
        + [repair_buffer_references, mark_uniform_conditions, check_indices_inline,
           report_parallel_checks,
           vectorize_reductions, prefetch_gathers, realign_gathers, hoist_index_loads,
           stack_scratch])

    @tvm.transform.module_pass(opt_level=0, name="sparsetir.Pipeline")
    def pipeline(mod, ctx):
        mod = protect_floats(blocks(mod))      # restored by the finalizing passes
        if not _has_loop_dependent_allocation(mod):
            return default(mod)
        # TVM's StorageRewrite hoists every allocation to the top of the function, which
        # breaks one whose size depends on a loop (a row's cache): keep those in place
        config = dict(ctx.config)
        config["tirx.disable_storage_rewrite"] = True
        with tvm.transform.PassContext(opt_level=ctx.opt_level, config=config):
            return default(mod)

    return pipeline, _restoring(finalize_host), _restoring(finalize_device)


def _restoring(finalize):
    """``finalize`` (a function giving TVM's last passes) followed by ``restore_floats``."""
    return lambda: tvm.transform.Sequential([finalize(), restore_floats])


def _has_loop_dependent_allocation(mod) -> bool:
    for func in mod.functions.values():
        if not isinstance(func, tirx.PrimFunc):
            continue
        params = set(func.params)
        sizes = []
        tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer,
                                            lambda node: sizes.extend(node.buffer.shape)),
                                order="pre")
        free = []
        for size in sizes:
            tvm_ffi.structural_walk(size, (tirx.Var, free.append), order="pre")
        if any(v not in params for v in free):
            return True
    return False


compilation_pipeline.register_tir_pipeline(PIPELINE_NAME, _sparsetir_pipeline)
