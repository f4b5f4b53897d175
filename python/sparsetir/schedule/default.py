"""Default schedules: what ``build`` applies to a kernel nobody scheduled.

CPU: the outermost loop of every nest whose rows are owned (``sparsetir.rows_owned``, set by
``lower_sparse_iter`` when each outer iteration writes its own outputs) runs in parallel; the
innermost loop of a block is vectorised when it is spatial, has a constant extent and is the
last index of every store (field guide §11.4: a symbolic extent stays scalar, so ``specialize``
the feature size first).

CUDA: every top-level loop nest becomes its own kernel. The outermost loop of an owned nest
goes to ``blockIdx.x`` and the innermost spatial loop of fixed (not data-dependent) extent
that is the last index of its block's stores (features) to ``threadIdx.x``; a nest whose rows
are not owned runs in one thread (a unit loop bound to ``blockIdx.x``). Threads are bound only
when that leaves no race: every access in the nest to a buffer it writes must sit in a
thread-bound block and be indexed last by that block's thread variable, so each thread reads
and writes only its own elements (no reduction crosses threads, no ``__syncthreads`` is
needed). Otherwise the whole row runs in one thread. A feature loop of symbolic or large
extent is split by 32 and its inner part bound, so launches stay within 1024 threads and all
thread loops of a kernel have one extent (a constant extent up to 1024 is bound as is). An
intermediate (root ``alloc_buffer``) used by a single nest becomes ``local``: the row's one
thread keeps its own element, which TVM compacts to the region the row touches (CUDA kernels
cannot allocate global memory); such a nest gets no thread bindings. An intermediate shared
by several nests stays global and fails to compile for CUDA.

Example
-------
>>> # sch = default_schedule(sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 64})))
>>> # sch.mod  -> rows parallel, features vectorised
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..transform.lower_sparse_iter import PARALLEL_ANNOTATION

VECTOR_LANES = 16


def default_schedule(mod: tvm.IRModule, target_kind: str = "llvm") -> s_tir.Schedule:
    """Schedule every block of ``mod["main"]`` for ``target_kind`` ("llvm" or "cuda")."""
    sch = s_tir.Schedule(mod, enable_check=False)
    if target_kind == "cuda":
        _schedule_cuda(sch)
    else:
        _schedule_cpu(sch, _blocks(sch.mod["main"]))
    return sch


def is_scheduled(mod: tvm.IRModule) -> bool:
    """Whether any loop of ``mod`` is parallel, vectorised, unrolled or bound to a thread."""
    found = tvm_ffi.structural_walk(
        mod["main"].body,
        (tirx.For, lambda f: tvm_ffi.VisitInterrupt(True)
         if f.kind != tirx.ForKind.SERIAL or f.thread_binding is not None else None),
        order="pre")
    return bool(getattr(found, "value", False))


def _blocks(func) -> list:
    """(block, realize) pairs in pre-order, the root excluded."""
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlockRealize, found.append), order="pre")
    return [(r.block, r) for r in found if r.block.name_hint != "root"]


def _owned_roots(blocks) -> list:
    return [b.name_hint for b, _ in blocks if PARALLEL_ANNOTATION in b.annotations]


def _vector_loop(sch, block, realize):
    """The innermost loop of ``block`` if it can carry vector lanes."""
    loop_rv = _innermost_spatial_loop(sch, block, realize)
    if loop_rv is None:
        return None
    iv = block.iter_vars[-1]
    stores = []
    tvm_ffi.structural_walk(block.body, (tirx.BufferStore, stores.append), order="pre")
    if not stores or not all(s.indices and s.indices[-1].same_as(iv.var) for s in stores):
        return None
    return loop_rv


def _innermost_spatial_loop(sch, block, realize):
    """The innermost loop of ``block`` if it binds the block's last iteration variable, which
    is spatial, and its extent reads no memory."""
    loops = sch.get_loops(sch.get_sblock(block.name_hint))
    if not loops or not block.iter_vars:
        return None
    loop = sch.get(loops[-1])
    iv = block.iter_vars[-1]
    if iv.iter_type != tirx.IterVar.DataPar or not realize.iter_values[-1].same_as(loop.loop_var):
        return None
    if _reads_memory(loop.extent):
        return None
    return loops[-1]


def _reads_memory(expr) -> bool:
    found = tvm_ffi.structural_walk(
        expr, (tvm.ir.TensorLoad, lambda _: tvm_ffi.VisitInterrupt(True)), order="pre")
    return bool(getattr(found, "value", False))


def _schedule_cpu(sch, blocks) -> None:
    for block, realize in blocks:
        loop_rv = _vector_loop(sch, block, realize)
        if loop_rv is None:
            continue
        extent = sch.get(loop_rv).extent
        if not isinstance(extent, tirx.IntImm):
            continue
        if extent.value > VECTOR_LANES and extent.value % VECTOR_LANES == 0:
            loop_rv = sch.split(loop_rv, [None, VECTOR_LANES])[1]
        elif extent.value > 4 * VECTOR_LANES:
            continue
        sch.vectorize(loop_rv)
    for name in _owned_roots(blocks):
        sch.parallel(sch.get_loops(sch.get_sblock(name))[0])


WARP_SIZE = 32
MAX_THREADS = 1024


def _schedule_cuda(sch) -> None:
    """Bind each top-level nest of ``sch`` to its own kernel (see the module docstring)."""
    root = sch.mod["main"].body.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    nests = []
    for stmt in stmts:
        found = []
        tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, found.append), order="pre")
        if found:
            nests.append((stmt, [(r.block, r) for r in found]))
    # Plan everything on the unscheduled IR first, then transform by block name.
    local = []  # (writer block, buffer name) of intermediates that become per-thread
    plans = []  # (outermost block, owned, thread blocks)
    for stmt, nest in nests:
        used = [b for b in root.alloc_buffers if _touches(stmt, b)]
        local += [(_writer(nest, b), b.name) for b in used
                  if sum(_touches(other, b) for other, _ in nests) == 1]
        outer = nest[0][0]
        loops = sch.get_loops(sch.get_sblock(outer.name_hint))
        owned = (PARALLEL_ANNOTATION in outer.annotations and bool(loops)
                 and not _reads_memory(sch.get(loops[0]).extent))
        threads = _thread_blocks(sch, stmt, nest, sch.get(loops[0])) \
            if owned and not used else []
        plans.append((outer.name_hint, owned, threads))
    for writer, name in local:
        sch.set_scope(writer, name, "local")
    for outer, owned, threads in plans:
        for name in threads:
            loop = sch.get_loops(sch.get_sblock(name))[-1]
            if sch.get(loop).kind == tirx.ForKind.THREAD_BINDING:
                continue  # shared with an earlier thread block
            extent = sch.get(loop).extent
            if not (isinstance(extent, tirx.IntImm) and extent.value <= MAX_THREADS):
                loop = sch.split(loop, [None, WARP_SIZE])[1]
            sch.bind(loop, "threadIdx.x")
        rv = sch.get_sblock(outer)
        loops = sch.get_loops(rv)
        if owned:
            sch.bind(loops[0], "blockIdx.x")
        else:
            sch.bind(sch.add_unit_loop(loops[0] if loops else rv), "blockIdx.x")


def _thread_blocks(sch, stmt, nest, row_loop) -> list:
    """Names of the blocks of ``nest`` whose innermost loop can go to ``threadIdx.x``.

    All or nothing: the candidate loops must share one extent, and every access in the nest
    to a buffer the nest writes (other than buffers allocated inside a candidate block) must
    sit in a candidate block with that block's thread variable as its last index. Then each
    thread touches only its own elements, and code outside the thread loops (which every
    thread runs) writes nothing shared.
    """
    cands, inside = [], set()
    for block, realize in nest:
        if block.name_hint in inside:
            continue  # covered by an enclosing candidate's thread
        loop_rv = _innermost_spatial_loop(sch, block, realize)
        if loop_rv is None or sch.get(loop_rv).same_as(row_loop):
            continue
        cands.append((block, sch.get(loop_rv).extent))
        tvm_ffi.structural_walk(block.body, (s_tir.SBlock, lambda b: inside.add(b.name_hint)),
                                order="pre")
    if not cands or any(not tvm_ffi.structural_equal(e, cands[0][1]) for _, e in cands):
        return []
    private = []
    for block, _ in cands:
        tvm_ffi.structural_walk(block, (s_tir.SBlock, lambda b: private.extend(b.alloc_buffers)),
                                order="pre")
    written = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, lambda s: written.append(s.buffer)),
                            order="pre")
    shared = [b for b in written if not any(b.same_as(p) for p in private)]
    covered = 0
    for block, _ in cands:
        var = block.iter_vars[-1].var
        accesses = _accesses(block, shared)
        if not all(a.indices and a.indices[-1].same_as(var) for a in accesses):
            return []
        covered += len(accesses)
    if covered != len(_accesses(stmt, shared)):
        return []
    return [block.name_hint for block, _ in cands]


def _accesses(node, buffers) -> list:
    """Loads and stores in ``node`` of any of ``buffers``."""
    found = []

    def visit(n):
        buf = n.buffer if isinstance(n, tirx.BufferStore) else n.source
        if any(buf.same_as(b) for b in buffers):
            found.append(n)

    tvm_ffi.structural_walk(node, ((tirx.BufferStore, tvm.ir.TensorLoad), visit), order="pre")
    return found


def _touches(node, buf) -> bool:
    return bool(_accesses(node, [buf]))


def _writer(nest, buf) -> str:
    """The first block of ``nest`` that lists ``buf`` in its write regions."""
    return next(b.name_hint for b, _ in nest if any(w.source.same_as(buf) for w in b.writes))
