"""Horizontal fusion: consecutive sub-kernels of one function become one launch (Stage III).

The sub-kernels of a format decomposition (one per ELL bucket, per column partition...) are
separate top-level loop nests. A schedule marks the ones that may share a launch by annotating
a block of each with ``"horizontal_fuse"``; ``horizontal_fuse`` merges runs of consecutive
marked nests. When no nest is marked, or the function carries SparseTIR's attribute
``T.func_attr({"horizontal_fuse": 1})``, every nest is a candidate, and a module where nothing
can be fused is refused with what each nest lacks (never a silent no-op). On CUDA the
attribute asks for SparseTIR's whole-function fusion instead (``function_fusion``, with thread
loops lifted and padded), which the compile pipeline runs once cross-thread reductions are
lowered.

* CPU: nests whose outermost loops are ``parallel`` with the same extent become one parallel
  loop whose body runs each nest's body in turn, so the thread pool starts once. This is safe
  when iteration ``t`` of every nest writes only what no other iteration of any of them touches,
  as for the hyb row tiles of ``transform.hyb`` (tile ``t`` owns the same rows in every bucket).
* CUDA: nests whose outermost loops are bound to ``blockIdx.x`` become one loop over the sum of
  their extents; block ``b`` runs the nest whose range holds ``b`` (SparseTIR's
  ``horizontal_fuse``). Blocks of different nests run concurrently, so an output they share
  must be written with atomics (the ``"atomic"`` block annotation). The nests must use the same
  ``threadIdx`` extents: a launch has one. A ``__syncthreads`` a nest needs (shared-memory
  caches) sits inside the ``if`` choosing the nest, which every thread of a block evaluates
  alike (``backend.uniform_conditions`` tells TVM so).

Fusion changes the order in which the nests' iterations run, so a run is refused
(``HorizontalFusionError`` naming the buffers) when one nest reads or writes a buffer another
one writes, unless every nest touching that buffer only adds into it: each store is
``X[e] = X[e] + v`` (``v`` not reading ``X``; ``- v`` too), the only reads of ``X``. Additions
commute, so their order does not matter (a product or a max mixed with them would not). Iterations of different nests then run at the same time, so
the additions must also be atomic (stores in ``"atomic"`` blocks, or the identity init
``X[e] = X[e]`` that atomic lowering removes). On the CPU, where the fused loop runs iteration
``t`` of every nest in turn, a buffer that iteration ``t`` of each nest alone touches needs
neither (the accesses to each element keep their order, whatever they are): every access is
at one index set one-to-one by ``t`` alone and the same in every nest (``C[i]``), or every
nest's block is annotated ``sparsetir.tile_owns_rows`` (``ir.attrs.TILE_ROWS_ANNOTATION``:
iteration ``t`` of each writes only the rows of tile ``t``, which the kernel's call checks;
``ops.hyb.schedule_hyb_cpu`` marks its buckets so, ``hyb_kernel`` and ``HybLayout.arguments``
check the tiles).

``build(..., horizontal_fuse=True)`` applies it after scheduling and ``lower_sparse_buffer``
(so does ``build`` of a function with the attribute).

Example
-------
``ops.hyb.schedule_hyb_cpu`` annotates each sub-kernel (``sch.annotate(sch.get_sblock(
"spmm_p0b00"), "horizontal_fuse", True)``); its two buckets' parallel loops over the row tiles
become one:

>>> import sparsetir
>>> from sparsetir.ops.hyb import HybConfig, hyb_function, schedule_hyb_cpu
>>> config = HybConfig(parts=1, widths=(1, 2), tiles=2)
>>> mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(hyb_function(config, 16)), config)
>>> flat = sparsetir.lower_sparse_buffer(mod)
>>> fused = HorizontalFuse("llvm")(flat)
>>> def parallel_loops(m):
...     return [line.strip() for line in m.script().splitlines() if "T.parallel(" in line]
>>> parallel_loops(flat)                   # the zeroing nest, then one loop per bucket
['for i in T.parallel(m):', 'for o in T.parallel(2):', 'for o in T.parallel(2):']
>>> parallel_loops(fused)
['for i in T.parallel(m):', 'for fused in T.parallel(2):']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import HorizontalFusionError
from ..ir.attrs import ATOMIC_ANNOTATION, FUSE_ANNOTATION, TILE_ROWS_ANNOTATION, annotated_true
from ..ir.utils import added_value, is_identity_store, substitute
from ..lower.loop_signature import top_level_nests


def HorizontalFuse(target_kind: str = "llvm",  # pylint: disable=invalid-name
                   requested: bool = True) -> tvm.transform.Pass:
    """The pass ``sparsetir.HorizontalFuse``: ``horizontal_fuse`` for ``target_kind`` when
    ``requested`` or when the function has the ``horizontal_fuse`` attribute."""
    def run(mod, _ctx):
        if requested or marked_for_fusion(mod["main"]):
            return horizontal_fuse(mod, target_kind)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="sparsetir.HorizontalFuse")


def horizontal_fuse(mod: tvm.IRModule, target_kind: str = "llvm") -> tvm.IRModule:
    """``mod`` with every run of fusable top-level nests merged (see the module docstring).

    The candidates are the nests marked ``"horizontal_fuse"``, or every nest when none is
    marked or the function has the ``horizontal_fuse`` attribute; in those two cases a module
    where nothing can be fused is refused, naming what each nest lacks. On CUDA a function
    with the attribute is left to ``function_fusion.HorizontalFusion``, which ``build`` runs
    later, once cross-thread reductions are lowered."""
    func = mod["main"]
    whole_function = marked_for_fusion(func)
    if whole_function:
        if target_kind == "cuda":
            return mod
        func = func.without_attr(FUSE_ANNOTATION)
    nests = top_level_nests(func)
    every_nest = whole_function or not any(_marked(nest) for nest in nests)
    eligible = _is_block_x_loop if target_kind == "cuda" else _is_parallel_loop

    def fusable(stmt):
        return eligible(stmt) and (every_nest or _marked(stmt))

    merge = _merge_by_ranges if target_kind == "cuda" else _merge_same_range
    out, run = [], []
    for nest in nests + [None]:
        if nest is not None and fusable(nest) and (not run or target_kind == "cuda"
                                                   or _same_extent(run[0], nest)):
            run.append(nest)
            continue
        if run:
            if len(run) > 1:
                check_independent(run, target_kind)
            out.append(merge(run) if len(run) > 1 else run[0])
            run = []
        if nest is not None and fusable(nest):
            run.append(nest)
        elif nest is not None:
            out.append(nest)
    if len(out) == len(nests):
        if every_nest:
            raise HorizontalFusionError(_nothing_to_fuse(nests, target_kind))
        return mod
    return tvm.IRModule({"main": with_root_body(func, tirx.SeqStmt(out) if len(out) > 1
                                                else out[0])})


def with_root_body(func: tirx.PrimFunc, body) -> tirx.PrimFunc:
    """``func`` with the body of its root block replaced by ``body`` (all else kept)."""
    realize = func.body
    root = realize.block
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                            root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root))


def marked_for_fusion(func) -> bool:
    """Whether ``func`` is a PrimFunc with a nonzero ``horizontal_fuse`` attribute
    (SparseTIR's ``T.func_attr({"horizontal_fuse": 1})``)."""
    if not isinstance(func, tirx.PrimFunc) or func.attrs is None:
        return False
    value = func.attrs.get(FUSE_ANNOTATION)
    return value is not None and bool(int(value) if hasattr(value, "value") else value)


def _nothing_to_fuse(nests: list, target_kind: str) -> str:
    """Why no two of ``nests`` could share a launch, nest by nest."""
    if target_kind == "cuda":
        rule = "consecutive nests whose outermost loop is bound to blockIdx.x"
        reasons = [f"{name}: outermost loop not bound to blockIdx.x"
                   for nest, name in zip(nests, _nest_names(nests)) if not _is_block_x_loop(nest)]
    else:
        rule = "consecutive nests whose outermost loops are parallel with the same extent"
        reasons = [f"{name}: outermost loop not parallel (sch.parallel it)"
                   for nest, name in zip(nests, _nest_names(nests)) if not _is_parallel_loop(nest)]
    detail = "; ".join(reasons) if reasons else (
        "only one nest" if len(nests) == 1 else "their outermost loops differ in extent")
    return (f"horizontal_fuse: nothing to fuse ({detail}). Fusion merges {rule}; mark the "
            "nests to fuse with sch.annotate(block, \"horizontal_fuse\", True), or build "
            "without horizontal_fuse")


def check_independent(nests: list, target_kind: str = "llvm") -> None:
    """Refuse to fuse ``nests`` when one reads or writes what another writes, except a
    buffer each iteration's elements of which only that iteration touches (CPU), or that they
    all only add into atomically; see the module docstring."""
    uses = [_Footprint(nest) for nest in nests]
    tiles_own_rows = all(_marked(nest, TILE_ROWS_ANNOTATION) for nest in nests)
    shared = {}
    for n, use in enumerate(uses):
        for buf in use.written:
            others = [m for m, other in enumerate(uses) if m != n and buf in other.touched]
            if others:
                shared[buf] = sorted({n, *others})

    def owned(buf) -> bool:       # iteration t of every nest alone touches its elements
        return target_kind != "cuda" and (tiles_own_rows or _one_element_per_iteration(
            [nests[m] for m in shared[buf]], buf))

    conflicts = sorted((buf for buf, members in shared.items() if not owned(buf)
                        and not all(uses[m].adds_atomically(buf) for m in members)),
                       key=lambda b: b.name)
    if conflicts:
        names = ", ".join(b.name for b in conflicts)
        why = "" if target_kind == "cuda" else (
            " (on the CPU too, unless iteration t of every nest alone touches its elements: "
            "one element set by t, or rows every nest's block declares with the annotation "
            f"\"{TILE_ROWS_ANNOTATION}\"; iterations of different nests run at the same time)")
        raise HorizontalFusionError(
            f"cannot fuse nests {', '.join(_nest_names(nests))}: they share {names}, which "
            f"one writes and another reads or writes other than by atomically adding into it "
            f"(X[e] = X[e] + ...){why}; fusing would reorder their iterations. "
            "Make the additions atomic (sch.annotate(block, \"atomic\", True)), leave one of "
            "them unmarked (no \"horizontal_fuse\" annotation) or build without "
            "horizontal_fuse")


class _Footprint:
    """The buffers one nest stores to and loads from, and how (buffers allocated inside the
    nest are its own and left out)."""

    def __init__(self, nest):
        own = []
        tvm_ffi.structural_walk(nest, [
            (s_tir.SBlock, lambda b: own.extend(b.alloc_buffers)),
            (tirx.AllocBuffer, lambda a: own.append(a.buffer))], order="pre")
        self.private = set(own)
        self.stores, self.loads, self.atomic = {}, {}, set()
        tvm_ffi.structural_walk(nest, [(tirx.BufferStore, self._add_store),
                                       (tvm.ir.TensorLoad, self._add_load),
                                       (s_tir.SBlock, self._add_atomic)], order="pre")
        self.written = [b for b in self.stores if b not in self.private]
        self.touched = set(self.written) | {b for b in self.loads if b not in self.private}

    def _add_store(self, store):
        self.stores.setdefault(store.buffer, []).append(store)

    def _add_load(self, load):
        self.loads[load.source] = self.loads.get(load.source, 0) + 1

    def _add_atomic(self, block):
        if annotated_true(block, ATOMIC_ANNOTATION):      # what atomic lowering makes atomic
            tvm_ffi.structural_walk(block.body, (tirx.BufferStore, self.atomic.add),
                                    order="pre")

    def adds_atomically(self, buf) -> bool:
        """Whether every access of ``buf`` in the nest is an atomic addition into it (or the
        identity init that atomic lowering removes)."""
        stores = self.stores.get(buf, [])
        return bool(stores) and all(
            is_identity_store(store) or (added_value(store) is not None and store in self.atomic)
            for store in stores) and len(stores) == self.loads.get(buf, 0)


def _one_element_per_iteration(nests: list, buf) -> bool:
    """Whether every access of ``buf`` in ``nests`` is at one index that only the outermost
    loop's variable ``t`` sets, one-to-one (a step of ``t`` moves it by a nonzero constant),
    the same in every nest (``C[i]`` in each): iteration ``t`` of each then touches one
    element, the same one, and no other iteration touches it."""
    var = tirx.Var("t", nests[0].loop_var.ty)
    indices = []
    for nest in nests:
        found, bound = [], {nest.loop_var: var}     # block variables -> what they are bound to
        tvm_ffi.structural_walk(nest, [
            (s_tir.SBlockRealize, lambda r: bound.update(
                (iv.var, value) for iv, value in zip(r.block.iter_vars, r.iter_values))),
            (tirx.BufferStore, lambda st: found.append(list(st.indices))
             if st.buffer.same_as(buf) else None),
            (tvm.ir.TensorLoad, lambda ld: found.append(list(ld.indices))
             if ld.source.same_as(buf) else None)], order="pre")
        for index in found:
            for _ in range(len(bound)):          # blocks inside blocks: bindings of bindings
                index = [substitute(e, bound) for e in index]
            indices.append(index)
    leaves = []
    tvm_ffi.structural_walk(indices[0], [(tirx.Var, leaves.append),
                                         (tvm.ir.TensorLoad, leaves.append)], order="pre")
    analyzer = tvm.sym.Analyzer()
    steps = [analyzer.simplify(substitute(e, {var: var + 1}) - e) for e in indices[0]]
    return all(tvm_ffi.structural_equal(ix, indices[0]) for ix in indices) \
        and all(isinstance(leaf, tirx.Var) and leaf.same_as(var) for leaf in leaves) \
        and any(isinstance(step, tirx.IntImm) and step.value != 0 for step in steps)


def _nest_names(nests: list) -> list:
    names = []
    for nest in nests:
        found = tvm_ffi.structural_walk(nest, (s_tir.SBlock, lambda b: tvm_ffi.VisitInterrupt(
            b.name_hint)), order="pre")
        names.append(str(getattr(found, "value", "?")))
    return names


def _is_parallel_loop(stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL


def _is_block_x_loop(stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.thread_binding is not None \
        and stmt.thread_binding.thread_tag == "blockIdx.x"


def _marked(stmt, annotation: str = FUSE_ANNOTATION) -> bool:
    """Whether a block of ``stmt`` is annotated ``annotation`` with a true value
    (``horizontal_fuse=False`` opts a nest out)."""
    found = tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: tvm_ffi.VisitInterrupt(True)
                                           if annotated_true(b, annotation)
                                           else None), order="pre")
    return bool(getattr(found, "value", False))



def _same_extent(a, b) -> bool:
    return tvm_ffi.structural_equal(a.extent, b.extent) and tvm_ffi.structural_equal(a.min, b.min)


def _merge_same_range(loops: list):
    var = tirx.Var("fused", loops[0].loop_var.ty)
    bodies = [substitute(loop.body, {loop.loop_var: var}) for loop in loops]
    return tirx.For(var, loops[0].min, loops[0].extent, tirx.ForKind.PARALLEL,
                    tirx.SeqStmt(bodies))


def _merge_by_ranges(loops: list):
    extents = [_thread_extents(loop) for loop in loops]
    if any(e != extents[0] for e in extents):
        raise HorizontalFusionError(f"the nests to fuse bind threads differently ({extents}); "
                                    "give them the same threadIdx extents")
    first = loops[0]
    var = tirx.Var("fused_bx", first.loop_var.ty)
    analyzer = tvm.sym.Analyzer()
    bodies, start = [], tirx.const(0, first.loop_var.ty)
    for loop in loops:
        end = analyzer.simplify(start + loop.extent)
        inner = substitute(loop.body, {loop.loop_var: var - start + loop.min})
        bodies.append(tirx.IfThenElse(tirx.all(start <= var, var < end), inner, None))
        start = end
    binding = tirx.IterVar(tvm.ir.Range.from_min_extent(0, start), var,
                           first.thread_binding.iter_type, "blockIdx.x")
    return tirx.For(var, tirx.const(0, first.loop_var.ty), start, tirx.ForKind.THREAD_BINDING,
                    tirx.SeqStmt(bodies), binding)


def _thread_extents(loop) -> dict:
    found = {}

    def on_for(node):
        if node.thread_binding is not None and node.thread_binding.thread_tag != "blockIdx.x":
            found[str(node.thread_binding.thread_tag)] = str(node.extent)

    tvm_ffi.structural_walk(loop.body, (tirx.For, on_for), order="pre")
    return found
