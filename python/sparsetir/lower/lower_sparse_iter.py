"""``lower_sparse_iter``: Stage I (sparse iterations) to Stage II (schedulable TensorIR).

Each sparse iteration becomes a loop nest in position space. Loops of one iteration share an
sblock until a loop's extent depends on a variable of that block (``indptr[vi+1]-indptr[vi]``);
then a new block starts, binding the outer variable (TVM allows an extent to use a block
variable of an enclosing block, not a loop variable). Blocks are named
``<iteration>0``, ``<iteration>1``, ...; a fused group ``T.fuse(I, J)`` is one loop over the
nonzeros, its row found by binary search where it is needed.

A coordinate looked up on a sparse axis (``A[i, j]`` while iterating a dense ``j``; the row of
a fused nonzero) is a binary search in a block of its own, ``<block>_search<n>``, placed under
the outermost loop where its inputs are fixed; it stores the position in a one-element local
buffer that the compute block reads. Intermediates (``T.alloc_sparse_buffer``) are allocated in
the innermost block that holds all their uses, so the enclosing blocks stay complete.

``T.init`` becomes the native init of the block of the first reduction loop, so the block is a
reduction block that TVM's checked primitives (``parallel``, ``vectorize``, ``rfactor``,
``decompose_reduction``, ``cache_write``...) accept. TVM runs such an init when the reduction
variables are at their start, which never happens when a reduction loop is empty (an empty row,
a zero feature size); ``lower_sparse_buffer`` therefore decomposes every reduction whose loops
may be empty (``decompose_conditional_inits``), so the init runs once for every spatial point.
Where a native init would run more than once for an output element (a spatial variable that
does not index the output) or cannot be placed (a spatial loop below a reduction block), the
init becomes a nest of its own, ``<iteration>_init``, before the iteration, which then adds
into the output (``init_placement``; ``sparsetir.init_per_point`` keeps the native init).

Index arrays an axis stores narrower than its ``idtype`` (``indices_dtype="int8"``) keep their
type: every read is widened to ``idtype`` and the call checks that the array can hold the
axis's coordinates and positions (``index_storage``).

What later steps need stays on the function (``ir.attrs``): each parameter's Stage I name and
the loops lowering made (attributes), and the index checks and declared value domains the call
verifies (annotations of the root block, sizes as expressions over the parameters).

Example
-------
>>> import sparsetir
>>> import tvm
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm)     # an IRModule with "main"
>>> [gv.name_hint for gv in mod.functions]
['main']
>>> sch = tvm.s_tir.Schedule(mod)
>>> [sch.get(sch.get_sblock(name)).name_hint for name in ("spmm0", "spmm1")]
['spmm0', 'spmm1']
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from ..ir.axis import AttachedAxis
from ..ir.buffer import BufferDomain
from ..ir.function import SparseFunction
from ..ir.iteration import SparseIteration
from ..ir.attrs import (
    FIRST_SLOTS_ANNOTATION,
    INIT_PER_POINT_ANNOTATION,
    LOWERED_LOOPS_ATTR,
    PARALLEL_ANNOTATION,
    PARAM_NAMES_ATTR,
    PREPROCESS_ANNOTATION,
    IndexCheck,
    ValueDomain,
    metadata_annotations,
    with_root_annotations,
)
from ..ir.utils import is_handle, is_identity_store
from ..ir.visit import iterations, tir_stmts
from .access import AccessRewriter, IterInfo
from .coiterate import has_coiteration, lower_coiteration
from .coordinate_checks import CoordinateChecker, assertion
from .emit import Emitter
from ..errors import LoweringError, SparseTIRTypeError
from .first_slots import zero_repeated_slots
from .index_storage import store_narrow_indices
from .init_placement import split_init
from .layout import stage2_shape
from .loop_signature import loop_signature
from .plan import BlockIterPlan, BlockPlan, LoopPlan, hoist_searches
from .regions import widen_local_regions


@dataclass
class _Unit:
    """One loop of an iteration: a single variable, or a fused group of variables."""

    sp_vars: list          # SpIterVar, outermost first
    deps: list             # Stage I vars of the same iteration the loop extent depends on

    @property
    def is_reduction(self) -> bool:
        return self.sp_vars[0].is_reduction

    @property
    def name(self) -> str:
        return self.sp_vars[-1].var.name


def lower_sparse_iter(func: SparseFunction) -> tvm.IRModule:
    """Lower a Stage I function to an IRModule of schedulable TensorIR (function ``"main"``)."""
    if not isinstance(func, SparseFunction):
        raise SparseTIRTypeError(f"lower_sparse_iter expects a SparseFunction, got {type(func).__name__}")
    if not any(isinstance(stmt, SparseIteration) for stmt in func.body):
        raise LoweringError(
            f"function {func.name} has no sparse iteration to lower (remove_preprocess removes "
            f"those annotated {PREPROCESS_ANNOTATION!r}: the iterations that fill a new format "
            "from an old one, as format_decompose makes them, not the compute)")
    _check_domains(func)
    if has_coiteration(func):        # T.coiterate: merge loops and assembled outputs
        mod = lower_coiteration(func)
    else:
        mod = tvm.IRModule({"main": _Lowering(func).run()})
    return tvm.IRModule({gv: store_narrow_indices(f, func) for gv, f in mod.functions.items()},
                        attrs=mod.attrs)


class _Lowering:
    """Plans and emits one function."""

    def __init__(self, func: SparseFunction):
        self.func = func
        self.analyzer = tvm.sym.Analyzer()
        self.views = {buf.view: buf for buf in func.buffers}
        self.stage2 = {}            # name -> Stage II buffer
        self.aux = {}               # (axis name, "indptr"|"indices") -> Stage II buffer
        self.handle_buffers = {}    # handle param -> Stage II buffer (axes may share an indptr)
        self.intermediates = []     # placeholder buffers of T.alloc_sparse_buffer
        self.checker = None         # CoordinateChecker, once the buffers exist
        self.parallel_axes = set()  # names of the axes the loops of owned rows iterate

    # -- services used by AccessRewriter ------------------------------------------------------
    def sparse_buffer(self, view):
        return self.views.get(view)

    def stage2_buffer(self, name: str):
        return self.stage2[name]

    def indptr(self, axis):
        return self._aux(axis, "indptr")

    def indices(self, axis):
        return self._aux(axis, "indices")

    def simplify(self, expr):
        return self.analyzer.simplify(expr)

    def _aux(self, axis, role: str):
        key = (axis.name, role)
        if key not in self.aux:
            raise LoweringError(f"axis {axis.name} has no {role} parameter")
        return self.aux[key]

    # -- driver ---------------------------------------------------------------------------------
    def run(self) -> tirx.PrimFunc:
        func = self.func
        with IRBuilder() as builder:
            with Tb.prim_func(s_tir=True):
                Tb.func_name(str(func.attrs.get("global_symbol", "main")))
                Tb.func_attr({**dict(func.attrs),
                              "global_symbol": func.attrs.get("global_symbol", "main")})
                for param in func.params:
                    Tb.arg(param.name, param)
                self._declare_buffers()
                self.checker = CoordinateChecker(self._value_domains(), self._data_buffers())
                plan = []
                for stmt in func.body:
                    if isinstance(stmt, SparseIteration):
                        plan += self._plan_iteration(stmt, {}, None)
                Emitter().emit_function(plan, self.intermediates)
        lowered = widen_local_regions(builder.get())
        ordered = _searched_axes(plan, self) | self.parallel_axes
        lowered = with_root_annotations(lowered, metadata_annotations(
            _index_checks(func, ordered), _declared_domains(func)))
        lowered = lowered.with_attr(PARAM_NAMES_ATTR, {
            p2.name: p1.name for p2, p1 in zip(lowered.params, func.params)})
        return lowered.with_attr(LOWERED_LOOPS_ATTR, loop_signature(lowered))

    def _declare_buffers(self) -> None:
        func = self.func
        used = set()
        for buf in func.buffers:
            if buf.handle is not None:
                continue
            placeholder = tirx.decl_buffer(stage2_shape(buf), buf.dtype, name=buf.name,
                                           scope=buf.scope)
            self.stage2[buf.name] = placeholder
            self.intermediates.append(placeholder)
        for param in func.params:
            if not is_handle(param):
                continue
            buf = next((b for b in func.buffers if b.handle is not None
                        and b.handle.same_as(param)), None)
            if buf is not None:
                self.stage2[buf.name] = IRBuilder.name(
                    buf.name, Tb.match_buffer(param, stage2_shape(buf), buf.dtype))
                used.add(param)
                continue
            for axis in func.axes:
                for role in ("indptr", "indices"):
                    handle = getattr(axis, role)
                    if handle is None or not handle.same_as(param):
                        continue
                    if param not in used:
                        size = (axis.parent.storage_size + 1 if role == "indptr"
                                else axis.storage_size)
                        self.handle_buffers[param] = IRBuilder.name(
                            f"{axis.name}_{role}", Tb.match_buffer(param, [size], axis.idtype))
                        used.add(param)
                    self.aux[(axis.name, role)] = self.handle_buffers[param]
            if param not in used:
                raise LoweringError(f"parameter {param.name} is neither matched to a sparse "
                                    "buffer nor used as an indptr or indices of an axis")

    def _value_domains(self) -> dict:
        """Stage II buffer -> (lo, hi) of its values, as the call wrapper validates them."""
        domains = {}
        for axis in self.func.axes:
            if (axis.name, "indices") in self.aux:
                domains[self.aux[(axis.name, "indices")]] = (tirx.const(0, "int32"), axis.length)
        for stmt in self.func.body:
            if isinstance(stmt, BufferDomain) and stmt.buffer.name in self.stage2:
                domains[self.stage2[stmt.buffer.name]] = (stmt.min, stmt.max)
        return domains

    def _data_buffers(self) -> dict:
        return {buf: name for name, buf in self.stage2.items()}

    # -- planning -------------------------------------------------------------------------------
    def _plan_iteration(self, it: SparseIteration, outer_env: dict, enclosing) -> list:
        """The plan of ``it``; ``enclosing`` is the block whose body holds it (None: root)."""
        groups = _partition(self._units(it, outer_env))
        zero, it = split_init(it, self.views, nested=enclosing is not None,
                              late=_late_spatial(groups))
        items = [] if zero is None else self._plan_iteration(zero, outer_env, enclosing)
        init_group = None
        if it.init is not None:
            _check_init(it, groups)
            init_group = next((g for g, group in enumerate(groups)
                               if any(u.is_reduction for u in group)), len(groups) - 1)
        return items + self._plan_groups(it, groups, 0, outer_env, init_group, enclosing)

    def _units(self, it: SparseIteration, outer_env: dict) -> list:
        """Group the variables into loops and find what each loop's extent depends on (a
        fused group obeys ``check_fused_group``: ``SparseIteration`` checks it when built)."""
        units = []
        own = {}
        for members in it.loops:
            if members[0].fused is not None:
                units.append(_Unit(members, []))
                for w in members:
                    own[w.axis.name] = w.var
                continue
            v = members[0]
            deps = []
            parent_var = self._parent_var(it, v, own, outer_env)
            if parent_var is not None and parent_var in own.values() and (
                    v.base_axis.is_variable or isinstance(v.axis, AttachedAxis)):
                deps.append(parent_var)
            units.append(_Unit([v], deps))
            own[v.base_axis.name] = v.var
        return units

    def _parent_var(self, it, v, own: dict, outer_env: dict):
        """The Stage I variable that selects ``v``'s row (None for an axis without parent)."""
        if isinstance(v.axis, AttachedAxis):
            name = v.axis.new_parent.name
        elif v.axis.parent is not None:
            name = v.axis.parent.name
        else:
            return None
        if name in own:
            return own[name]
        for var, info in reversed(list(outer_env.items())):
            if info.axis.name == name and not info.attached:
                return var
        raise LoweringError(f"sparse iteration {it.name}: axis {v.base_axis.name} needs its "
                            f"parent {name} to be iterated before it")

    def _plan_groups(self, it, groups, g, env, init_group, enclosing) -> list:
        """Loops and block for group ``g``, with the following groups nested inside; the
        loops sit in the body of ``enclosing``, which checks what their extents read."""
        env_outer = env
        block = BlockPlan(f"{it.name}{g}")
        if g == 0 and it.annotations:
            block.annotations = {k: v for k, v in it.annotations.items()
                                 if k not in (FIRST_SLOTS_ANNOTATION, INIT_PER_POINT_ANNOTATION)}
        if g == 0 and not env and _rows_owned(it, groups[0][0]):
            block.annotations[PARALLEL_ANNOTATION] = 1
            self.parallel_axes.update(v.base_axis.name for v in groups[0][0].sp_vars)
        loops = []
        env = dict(env)
        for unit in groups[g]:
            self._check_attached_row(unit, env, it, enclosing)
            extent = self.simplify(self._extent(unit, env, it))
            loop_var = tirx.Var(unit.name, "int32")
            block_var = tirx.Var(f"v{unit.name}", "int32")
            loops.append(LoopPlan(loop_var, extent))
            block.iter_vars.append(BlockIterPlan(block_var, extent, loop_var, unit.is_reduction))
            self.checker.bind(block_var, extent)
            env.update(self._infos(unit, block_var, env, it, block))
        if g + 1 < len(groups):
            block.body += self._plan_groups(it, groups, g + 1, env, init_group, block)
        else:
            block.body += zero_repeated_slots(self._plan_body(it.body, env, block), it, env,
                                              self, block)
        if init_group == g:
            block.init = self._plan_init(it, env, block)
        items, tables = hoist_searches(block, loops, top_level=g == 0 and not env_outer)
        self.intermediates += tables
        return items

    def _plan_init(self, it, env, block) -> list:
        """The init's statements, after the checks of their coordinates: the init runs before
        the block's own checks (alone, when the reduction is empty). An init that keeps its
        output as it is (``Y[e] = Y[e]``, a ``format_decompose`` part) needs none: it is
        removed before compiling (``atomic.lower_atomic_blocks``)."""
        rewriter = AccessRewriter(self, env, block)
        init = [rewriter.stmt(s) for s in it.init]
        if all(is_identity_store(s) for s in init):
            return init
        return rewriter.checks + init

    def _plan_body(self, stmts, env, block) -> list:
        out = []
        rewriter = AccessRewriter(self, env, block)
        for stmt in stmts:
            if isinstance(stmt, SparseIteration):
                out += self._plan_iteration(stmt, env, block)
            else:
                out.append(rewriter.stmt(stmt))
        return out

    def _extent(self, unit: _Unit, env: dict, it) -> tvm.ir.Expr:
        if len(unit.sp_vars) > 1:
            return unit.sp_vars[-1].axis.storage_size
        v = unit.sp_vars[0]
        axis = v.base_axis
        if axis.kind == "dense_fixed":
            return axis.length
        if axis.kind == "sparse_fixed":
            return axis.nnz_cols
        parent_off = self._parent_offset(v, env, it)
        indptr = self.indptr(axis)
        return (tirx.BufferLoad(indptr, [parent_off + 1]) - tirx.BufferLoad(indptr, [parent_off]))

    def _check_attached_row(self, unit: _Unit, env: dict, it, enclosing) -> None:
        """An attached axis takes the coordinate of its new parent as its row, which indexes
        its ``indptr``: prove it below the axis's own parent length, or check it in the block
        holding the loop (before the loop's extent reads ``indptr``)."""
        v = unit.sp_vars[0]
        if not isinstance(v.axis, AttachedAxis):
            return
        row = self._parent_offset(v, env, it)
        axis = v.axis.axis
        what = (f"coordinate of {v.axis.new_parent.name} used as a row of {axis.name} "
                f"(T.attach in {it.name})")
        condition = self.checker.condition(row, axis.parent.length, what)
        if condition is None:
            return
        if enclosing is None:
            raise LoweringError(f"sparse iteration {it.name}: {what} needs a check, but no "
                                "block encloses the loop")
        check = assertion(condition, f"{what} must lie in [0, {axis.parent.length})")
        if not any(tvm_ffi.structural_equal(check, c) for c in enclosing.checks):
            enclosing.checks.append(check)

    def _parent_offset(self, v, env: dict, it):
        parent_var = self._parent_var(it, v, {}, env)
        if parent_var is None:
            return None
        info = env[parent_var]
        return info.coord if isinstance(v.axis, AttachedAxis) else info.off

    def _infos(self, unit: _Unit, block_var, env: dict, it, block: BlockPlan) -> dict:
        """IterInfo of every variable of ``unit`` once its block variable exists."""
        if len(unit.sp_vars) == 1:
            v = unit.sp_vars[0]
            axis = v.base_axis
            parent_var = self._parent_var(it, v, {}, env)
            parent_off = self._parent_offset(v, env, it)
            return {v.var: self._info(axis, isinstance(v.axis, AttachedAxis), parent_var,
                                      block_var, parent_off)}
        # fused: the loop runs over offsets of the innermost axis; find each parent's row
        offsets = [None] * len(unit.sp_vars)
        offsets[-1] = block_var
        for t in range(len(unit.sp_vars) - 1, 0, -1):
            axis = unit.sp_vars[t].axis
            if axis.kind == "sparse_fixed":
                offsets[t - 1] = tirx.floordiv(offsets[t], axis.nnz_cols)
            else:
                indptr = self.indptr(axis)
                size = axis.parent.storage_size
                row = block.request_search(indptr, tirx.const(0, "int32"), size + 1, offsets[t], "right")
                offsets[t - 1] = row - 1
        infos, parent_var, parent_off = {}, None, None
        for v, off in zip(unit.sp_vars, offsets):
            axis = v.axis
            if axis.parent is None:
                pos = off
            elif axis.kind == "sparse_fixed":
                pos = tirx.floormod(off, axis.nnz_cols)
            else:
                pos = off - tirx.BufferLoad(self.indptr(axis), [parent_off])
            infos[v.var] = self._info(axis, False, parent_var, pos, parent_off)
            parent_var, parent_off = v.var, off
        return infos

    def _info(self, axis, attached: bool, parent_var, pos, parent_off) -> IterInfo:
        if axis.kind == "dense_fixed" and axis.parent is None:
            off = pos
        elif axis.kind == "sparse_fixed":
            off = parent_off * axis.nnz_cols + pos
        else:
            off = tirx.BufferLoad(self.indptr(axis), [parent_off]) + pos
        coord = tirx.BufferLoad(self.indices(axis), [off]) if axis.is_sparse else pos
        return IterInfo(axis, attached, parent_var, self.simplify(pos), self.simplify(off),
                        self.simplify(coord))


def _index_checks(func: SparseFunction, ordered: set) -> list:
    """The ``IndexCheck`` (``ir.attrs``) of every axis with index arrays: what ``build``'s
    call wrapper verifies, with sizes over the function's parameters. A sorted axis's rows
    must increase strictly, except on an axis of rows (one with axes below it) the kernel does
    not rely on the order of (``ordered``: a search reads the axis, or a loop over it runs in
    parallel on rows each iteration owns): there the declaration asks nothing of the call, so
    a row id may repeat, as in SparseTIR's ELL rule on a row cut into pieces that share one
    (the pieces add into their output row in turn)."""
    zero = tirx.const(0, "int32")
    parents = {axis.parent.name for axis in func.axes if axis.parent is not None}
    return [IndexCheck(axis.name,
                       axis.indptr.name if axis.indptr is not None else "",
                       axis.indices.name if axis.indices is not None else "",
                       axis.nnz if axis.nnz is not None else zero, axis.length,
                       axis.nnz_cols if axis.nnz_cols is not None else zero,
                       bool(axis.sorted) and (axis.name in ordered or axis.name not in parents))
            for axis in func.axes if axis.indptr is not None or axis.indices is not None]


def _searched_axes(plan: list, lowering: "_Lowering") -> set:
    """The names of the axes whose indices a search of ``plan`` reads."""
    searched = []

    def visit(item):
        if isinstance(item, LoopPlan):
            for child in item.body:
                visit(child)
        elif isinstance(item, BlockPlan):
            searched.extend(s.buffer for s in item.searches + [item.search] if s is not None)
            for child in (item.init or []) + item.body:
                visit(child)

    for item in plan:
        visit(item)
    return {axis.name for axis in lowering.func.axes
            if any(buffer.same_as(lowering.aux.get((axis.name, "indices")))
                   for buffer in searched)}


def _check_domains(func: SparseFunction) -> None:
    """Refuse a ``T.assume_buffer_domain`` that nothing can uphold: the call checks a domain on
    the caller's values once, before the kernel runs, and the lowering then trusts it (a
    coordinate read from the buffer gets no check in the kernel), so the buffer must be a
    parameter the kernel never writes."""
    domains = [stmt.buffer for stmt in func.body if isinstance(stmt, BufferDomain)]
    if not domains:
        return
    written = []
    for it in iterations(func.body):
        for stmt in tir_stmts(it):
            tvm_ffi.structural_walk(stmt, (tirx.BufferStore, lambda s: written.append(s.buffer)),
                                    order="pre")
    for buffer in domains:
        if buffer.handle is None:
            raise LoweringError(
                f"T.assume_buffer_domain({buffer.name}, ...): {buffer.name} is not a parameter, "
                "so no call can check its values; compute it in a kernel of its own and pass it "
                "to this one as a parameter, whose values the call then checks")
        if any(view.same_as(buffer.view) for view in written):
            raise LoweringError(
                f"T.assume_buffer_domain({buffer.name}, ...): the kernel writes {buffer.name}, "
                "so the values it reads back need not be those the call checked against the "
                "domain on entry; compute it in a kernel of its own and pass it to this one, "
                "which only reads it")


def _declared_domains(func: SparseFunction) -> list:
    """The ``ValueDomain`` (``ir.attrs``) of every ``T.assume_buffer_domain`` on a parameter."""
    return [ValueDomain(stmt.buffer.handle.name, stmt.min, stmt.max)
            for stmt in func.body
            if isinstance(stmt, BufferDomain) and stmt.buffer.handle is not None]


def _rows_owned(it: SparseIteration, unit: _Unit) -> bool:
    """Whether each iteration of ``unit``'s loop writes its own output elements.

    True when the loop is spatial and its variables index every store of the iteration
    directly: then the outer loop can run in parallel without two threads writing one element.
    """
    if unit.is_reduction:
        return False
    stores = []
    for stmt in tir_stmts(it):
        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, stores.append), order="pre")
    for store in stores:
        for w in unit.sp_vars:
            if not any(isinstance(i, tirx.Var) and i.same_as(w.var) for i in store.indices):
                return False
    return bool(stores)


def _partition(units: list) -> list:
    """Split loops into blocks: a loop whose extent uses a variable of the block starts a new one."""
    groups, current = [], []
    for unit in units:
        bound = {w.var for u in current for w in u.sp_vars}
        if current and any(dep in bound for dep in unit.deps):
            groups.append(current)
            current = []
        current.append(unit)
    if current:
        groups.append(current)
    return groups


def _check_init(it: SparseIteration, groups: list) -> None:
    """Refuse a native T.init that reads a reduction variable: it runs in the block of the
    first reduction loop, once per spatial point, before that point's reduction
    (``init_placement.split_init`` has moved every other init that cannot run there)."""
    reduction_vars = {w.var for group in groups for u in group if u.is_reduction
                      for w in u.sp_vars}
    for stmt in it.init:
        used = [v.name for v in _vars_in(stmt) if v in reduction_vars]
        if used:
            raise LoweringError(f"sparse iteration {it.name}: T.init uses the reduction "
                                f"variable {used[0]}")


def _late_spatial(groups: list) -> list:
    """Names of the spatial loops in a block below the first block with a reduction loop."""
    first_r = next((g for g, group in enumerate(groups)
                    if any(u.is_reduction for u in group)), len(groups))
    return [u.name for group in groups[first_r + 1:] for u in group if not u.is_reduction]


def _vars_in(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, (tirx.Var, found.append), order="pre")
    return found
