"""Default CUDA schedule: one kernel per nest, rows to blocks, race-free feature loops to threads."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..lower.loop_signature import top_level_nests
from ..ir.attrs import PARALLEL_ANNOTATION
from ..errors import SparseTIRValueError
from .common import innermost_spatial_loop, nest_blocks, reads_memory, try_primitive

WARP_SIZE = 32
MAX_THREADS = 1024


def schedule_cuda(sch, nests: list) -> None:
    """Bind each top-level nest numbered in ``nests`` to its own kernel (see ``default``)."""
    stmts = top_level_nests(sch.mod["main"])
    # Plan everything on the unscheduled IR first, then transform by block name.
    local = []  # (writer block, buffer name) of intermediates that become per-thread
    plans = []  # (nest number, outermost block, owned, thread blocks)
    for index, nest in zip(nests, nest_blocks(sch, nests)):
        stmt = stmts[index]
        used = [b for b in _intermediates(sch.mod["main"], stmt)
                if sum(_touches(other, b) for other in stmts) == 1]
        local += [(_writer(nest, b), b.name) for b in used]
        outer = next(b for b, _ in nest if PARALLEL_ANNOTATION in b.annotations) \
            if any(PARALLEL_ANNOTATION in b.annotations for b, _ in nest) else nest[0][0]
        loops = sch.get_loops(sch.get_sblock(outer.name_hint))
        owned = (PARALLEL_ANNOTATION in outer.annotations and bool(loops)
                 and not reads_memory(sch.get(loops[0]).extent))
        threads = _thread_blocks(sch, stmt, nest, sch.get(loops[0])) \
            if owned and not used else []
        plans.append((index, outer.name_hint, owned, threads))
    for writer, name in local:
        try_primitive(sch.set_scope, writer, name, "local")
    for index, outer, owned, threads in plans:
        for name in threads:
            loop = sch.get_loops(sch.get_sblock(name))[-1]
            if sch.get(loop).kind == tirx.ForKind.THREAD_BINDING:
                continue  # shared with an earlier thread block
            extent = sch.get(loop).extent
            if not (isinstance(extent, tirx.IntImm) and extent.value <= MAX_THREADS):
                loop = sch.split(loop, [None, WARP_SIZE])[1]
            try_primitive(sch.bind, loop, "threadIdx.x")
        threaded = any(sch.get(sch.get_loops(sch.get_sblock(name))[-1]).kind
                       == tirx.ForKind.THREAD_BINDING for name in threads)
        rv = sch.get_sblock(outer)
        loops = sch.get_loops(rv)
        _bind_blocks(sch, index, outer,
                     loops[0] if owned else sch.add_unit_loop(loops[0] if loops else rv),
                     threaded)


def _bind_blocks(sch, index: int, outer: str, loop, threaded: bool) -> None:
    """Bind ``loop`` (the rows of nest ``index``, or a unit loop around it) to ``blockIdx.x``.
    Where TVM refuses and no loop of the nest went to ``threadIdx.x`` either (``threaded``),
    the nest cannot run on the GPU: say why."""
    try:
        sch.bind(loop, "blockIdx.x")
    except s_tir.ScheduleError as err:
        if threaded:
            return
        reason = next((line.split(":", 1)[1].strip() for line in str(err).splitlines()
                       if line.startswith("Error message:")), "no reason given")
        raise SparseTIRValueError(
            f"cannot build top-level loop nest {index} (block {outer}) for cuda: TVM binds a "
            f"loop to the GPU only over complete blocks and reductions with their own init, "
            f"and refuses this one ({reason}). A sum over several sparse axes whose T.init "
            "runs in a nest of its own (MTTKRP over a CSF tensor) is such a nest; build it "
            "for llvm") from None


def _intermediates(func, stmt) -> list:
    """Non-local buffers allocated in the function (root or a block) that ``stmt`` touches."""
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: found.extend(b.alloc_buffers)),
                            order="pre")
    return [b for b in found if str(b.scope()) != "local" and _touches(stmt, b)]


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
        if all(str(w.source.scope()) == "local" for w in block.writes):
            continue  # a search: every thread runs it for itself
        loop_rv = innermost_spatial_loop(sch, block, realize)
        if loop_rv is None or sch.get(loop_rv).same_as(row_loop):
            continue
        cands.append((block, sch.get(loop_rv).extent))
        tvm_ffi.structural_walk(block.body, (s_tir.SBlock, lambda b: inside.add(b.name_hint)),
                                order="pre")
    if not cands or any(not tvm_ffi.structural_equal(e, cands[0][1]) for _, e in cands):
        return []
    private = []  # per-thread: allocated in a thread block, or local (search results)
    for block, _ in cands:
        tvm_ffi.structural_walk(block, (s_tir.SBlock, lambda b: private.extend(b.alloc_buffers)),
                                order="pre")
    tvm_ffi.structural_walk(sch.mod["main"].body.block, (s_tir.SBlock, lambda b: private.extend(
        buf for buf in b.alloc_buffers if str(buf.scope()) == "local")), order="pre")
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
