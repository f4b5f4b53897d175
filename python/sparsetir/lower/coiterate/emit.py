"""The emitter of co-iteration kernels: one Stage II function of a plan (``main`` or ``count``).

``Emitter`` writes the function with TVM's IR builder: parameters (each Stage I handle as a
buffer, named like ``lower_sparse_iter`` names them: ``B``, ``B1_indptr``), the outer block
(a ``for`` binding the outer dense variable, or one block), local pointers (``ptr``), and the
variables level by level: a dense walk or one ``while`` loop per lattice point with its cases,
followers looked up, the output written by its mode (``coiterate_plan``). ``fold`` gives the
value where some operands are absent (0, folded away).

Example
-------
The ``count`` function of ``A(i,j) = B(i,j) + C(i,j)`` in CSR, as ``lower_sparse_iter`` emits it:

>>> import sparsetir.algebra as alg
>>> from tvm.script.ir_builder import IRBuilder
>>> from tvm.script.ir_builder import tirx as Tb
>>> from sparsetir.lower.coiterate.plan import plan_coiteration
>>> csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
>>> plan = plan_coiteration(alg.compile("A(i,j) = B(i,j) + C(i,j)", formats=csr).func)
>>> def emit(slots):
...     with IRBuilder() as builder:
...         with Tb.prim_func(s_tir=True):
...             emitter = Emitter(plan, "count", slots)
...             emitter.declare_params()
...             emitter.body()
...     return builder.get(), emitter.slots
>>> func, needed = emit(1)
>>> needed                      # the local pointers it uses: emitted again with as many
6
>>> func, _ = emit(needed)
>>> [line.strip() for line in func.script().splitlines() if "ptr = " in line]
['ptr = T.sblock_alloc_buffer((6,), "int32", scope="local")']
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from ...errors import LoweringError, MergeTooLargeError
from ...ir.utils import is_handle
from .plan import Operand, Plan, level_at, positions, row_major
from .tir import INT, INT64, all_of, and_then, any_of, root_pos
from .onepass import OnePassRows
from .workspace import WorkspaceRows
from .merge_lattice import EMPTY, FULL, lattice_points, point_count, simplify, sub_points

SUM_MODES = ("dense", "rows", "append")
"""Output modes that sum into a local once every output variable is bound."""
MAX_CASES = 96
"""The most places one function evaluates its expression at (one per case of each lattice
point, per combination of followers present, at every level): a k-way union emits about 3^k
of them (4 CSR operands: 65, compiled in about 6 s; 5: 211, 27 s; 6: 665, 69 s; 3 CSF
operands: 127).
``MergeTooLargeError`` past it, raised while emitting: ``sparsetir.algebra`` then splits
the statement's sum into kernels under the limit (``algebra.grouped``)."""


class Emitter(WorkspaceRows, OnePassRows):
    """Writes one function (``fill`` = ``main``, ``count``, or ``onepass``) of a plan with the IR
    builder."""

    def __init__(self, plan: Plan, mode: str, slots: int):
        self.plan = plan
        self.mode = mode
        self.size = slots          # entries of the local pointer buffer ``ptr``
        self.handles = {}          # Stage I handle param -> Stage II buffer
        self.stage1_names = {}
        self.slots = 0
        self.ptr = None
        self.acc = None
        self.counts = None
        self.ends = None
        self.cases = 0             # evaluations of the expression emitted (``MAX_CASES``)

    # parameters ---------------------------------------------------------------------------
    def declare_params(self) -> None:
        plan = self.plan
        roles = {}
        for buf in [op.buf for op in plan.operands.values()] + [plan.out.buf]:
            sizes = positions(buf)
            roles[buf.handle] = (buf.name, sizes[-1], buf.dtype, buf is plan.out.buf)
            for k, axis in enumerate(buf.axes):
                if axis.kind == "sparse_variable":
                    roles[axis.indptr] = (f"{axis.name}_indptr", sizes[k - 1] + 1,
                                          axis.idtype, buf is plan.out.buf)
                    roles[axis.indices] = (f"{axis.name}_indices", axis.nnz, axis.idtype,
                                           buf is plan.out.buf)
        out_axes = plan.out.buf.axes
        dropped = set()
        if self.mode == "count":
            dropped.add(plan.out.buf.handle)
            for axis in out_axes:
                if axis.kind == "sparse_variable":
                    dropped.add(axis.indices)
                    if plan.out_mode == "append":
                        dropped.add(axis.indptr)
        for param in plan.func.params:
            if is_handle(param):
                if param not in roles:
                    raise LoweringError(f"co-iteration: parameter {param.name} is no buffer or "
                                        "index array of the iteration")
                if param in dropped:
                    continue
                name, size, dtype, _ = roles[param]
                handle = Tb.arg(name, tirx.Var(name, "handle"))
                self.handles[param] = IRBuilder.name(name, Tb.match_buffer(handle, (size,), dtype))
                self.stage1_names[name] = param.name
            else:
                Tb.arg(param.name, param)
                self.stage1_names[param.name] = param.name
        if self.mode == "count" and plan.out_mode == "append":
            levels = sum(1 for lv in plan.out.levels if lv.kind == "compressed")
            name = f"{plan.out.buf.name}_counts"
            handle = Tb.arg(name, tirx.Var(name, "handle"))
            self.counts = IRBuilder.name(name, Tb.match_buffer(handle, (levels,), INT64))
            self.stage1_names[name] = name
        if self.mode == "onepass":
            self.declare_chunks()

    def values(self, op: Operand):
        return self.handles[op.buf.handle]

    def indptr(self, axis):
        return self.handles[axis.indptr]

    def indices(self, axis):
        return self.handles[axis.indices]

    # body ------------------------------------------------------------------------------------
    def body(self) -> None:
        plan = self.plan
        reads = [self.handles[p] for p in plan.func.params if p in self.handles]
        if plan.out_mode == "workspace":
            self.workspace_body(reads)
            return
        if self.mode == "onepass":
            self.onepass_body(reads)
            return
        if plan.outer_for:
            length = plan.vars[0].base_axis.length
            with Tb.serial(0, length) as i:
                IRBuilder.name(plan.vars[0].var.name, i)
                with Tb.sblock(f"{plan.name}0"):
                    vi = IRBuilder.name("v" + plan.vars[0].var.name,
                                        Tb.axis.spatial(length, i))
                    self.regions(reads, vi)
                    self.locals()
                    self.start_outputs()
                    self.level_cases(0, self.root_env(), set(plan.operands), vi)
                    self.finish_outputs()
        else:
            with Tb.sblock(f"{plan.name}0"):
                self.regions(reads, None)
                self.locals()
                self.start_outputs()
                if plan.out_mode == "scatter":
                    self.zero_output(root_pos(), -1)
                self.level(0, self.root_env(), set(plan.operands))
                self.finish_outputs()

    def root_env(self) -> dict:
        names = list(self.plan.operands) + [self.plan.out.buf.name]
        return {name: root_pos() for name in names}

    def regions(self, buffers, vi) -> None:
        plan = self.plan
        out_names = {f"{a.name}_{r}" for a in plan.out.buf.axes if a.kind == "sparse_variable"
                     for r in ("indptr", "indices")} | {plan.out.buf.name}
        reads, writes = [], []
        for buf in buffers:
            whole = buf[0:buf.shape[0]]
            if buf.name not in out_names:
                reads.append(whole)
            elif plan.out_mode in ("rows", "workspace") and buf.name.endswith("_indptr"):
                if self.mode == "count":
                    writes.append(buf[vi + 1:vi + 2] if vi is not None else whole)
                elif self.mode == "onepass":   # rows' starts (and the chunk's, read first)
                    writes.append(whole)
                else:
                    reads.append(buf[vi:vi + 1] if vi is not None else whole)
            else:
                writes.append(whole)
        for extra in (self.counts, self.ends):
            if extra is not None:
                writes.append(extra[0:extra.shape[0]])
        Tb.reads(*reads)
        Tb.writes(*writes)

    def locals(self) -> None:
        """The block's locals: pointers, coordinates and counters (``ptr``), sums (``acc``).
        ``count`` of an appended output counts in int64 (its totals may pass int32: an outer
        product of two vectors of 65,537 nonzeros has 4,295,098,369 entries), so the caller
        refuses a result past the int32 positions before allocating it, or calls the kernel
        generated with int64 positions (``index_dtype``), whose pointers are all int64."""
        plan = self.plan
        n_levels = len(plan.vars) + 1
        wide = self.mode == "count" and plan.out_mode == "append"
        self.ptr = IRBuilder.name("ptr", Tb.sblock_alloc_buffer((self.size,), INT64 if wide
                                                                else index_dtype(plan),
                                                                scope="local"))
        size = n_levels + len(plan.operands)      # sums, then values (``select_case``)
        self.acc = IRBuilder.name("acc", Tb.sblock_alloc_buffer((size,), plan.out.buf.dtype,
                                                                scope="local"))

    def slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def get(self, slot):
        return self.ptr[slot]

    def set(self, slot, value) -> None:
        dtype = str(self.ptr.dtype)
        if str(value.ty.dtype) != dtype:
            value = tirx.Cast(dtype, value)
        Tb.buffer_store(self.ptr, value, [slot])

    # outputs ---------------------------------------------------------------------------------
    def out_compressed(self) -> list:
        """The output's compressed levels."""
        return [lv for lv in self.plan.out.levels if lv.kind == "compressed"]

    def start_outputs(self) -> None:
        """Counters of an assembled output: slot per compressed level."""
        plan = self.plan
        self.counter = {}
        if plan.out_mode == "rows":                 # set for each row (enter)
            self.counter[1] = self.slot()
        elif plan.out_mode == "append":
            for lv in self.out_compressed():
                slot = self.slot()
                self.set(slot, tirx.const(0, INT))
                self.counter[lv.var] = slot
                if self.mode == "fill":
                    Tb.buffer_store(self.indptr(lv.axis), tirx.const(0, INT), [0])

    def finish_outputs(self) -> None:
        """Close an appended output: the counts (``count``) or the root position (``main``)."""
        plan = self.plan
        if plan.out_mode == "append":
            first = self.out_compressed()[0]
            if self.mode == "count":
                for n, lv in enumerate(self.out_compressed()):
                    Tb.buffer_store(self.counts, self.get(self.counter[lv.var]), [n])
            else:
                Tb.buffer_store(self.indptr(first.axis), self.get(self.counter[first.var]), [1])

    def store(self, env, value, coords, step=1) -> None:
        """The output action once every output variable is bound (and the sum is done)."""
        plan = self.plan
        out = plan.out
        if plan.out_mode in ("dense", "scatter"):
            if self.mode == "fill":
                pos = env[out.buf.name]
                if plan.out_mode == "scatter":
                    value = self.values(out)[pos] + value
                Tb.buffer_store(self.values(out), value, [pos])
            return
        if plan.out_mode == "workspace":
            self.scatter_workspace(value, coords[max(coords)])
            return
        last = max(self.counter)
        slot = self.counter[last]
        if self.mode != "count":
            axis = self.out_compressed()[-1].axis
            Tb.buffer_store(self.indices(axis), coords[last], [self.get(slot)])
            Tb.buffer_store(self.values(out), value, [self.get(slot)])
        self.set(slot, self.get(slot) + step)

    def value_of(self, expr, env, present, loaded=None):
        """``fold`` of the statement's ``expr`` (its value or its sum's initial value) at one
        case, counted against ``MAX_CASES``."""
        self.cases += 1
        self.check_cases(self.cases)
        return fold(self, expr, env, present, loaded)

    def check_cases(self, cases: int) -> None:
        """``MergeTooLargeError`` when ``cases`` pass ``MAX_CASES`` (counted as emitted, or a
        lattice's points counted before they are listed: 2^k - 1 for k operands)."""
        if cases > MAX_CASES:
            plan = self.plan
            sizes = ", ".join(f"{v.var.name}: {point_count(tree)} points"
                              for v, tree in zip(plan.vars, plan.trees) if tree is not None)
            raise MergeTooLargeError(
                f"co-iteration {plan.name}: its merge ({sizes}) needs more than {MAX_CASES} "
                "cases in one function, which would take minutes to compile; merge fewer "
                "operands in one T.coiterate (sum the others in another kernel)")

    # levels ------------------------------------------------------------------------------------
    def level(self, t: int, env: dict, present: set, coords=None, summing: bool = False) -> None:
        """Emit variable ``t`` and everything inside it."""
        plan = self.plan
        coords = dict(coords or {})
        if t == plan.n_out_vars and plan.reduce and plan.out_mode in SUM_MODES and not summing:
            init = self.value_of(plan.init, env, present)
            Tb.buffer_store(self.acc, init if init is not None else
                            tirx.const(0, plan.out.buf.dtype), [t])
            self.acc_slot = t
            self.level(t, env, present, coords, summing=True)
            self.store(env, self.acc[t], coords)
            return
        if t == len(plan.vars):
            value = self.value_of(plan.value, env, present)
            if plan.reduce and plan.out_mode in SUM_MODES:
                if value is not None:
                    Tb.buffer_store(self.acc, self.acc[self.acc_slot] + value, [self.acc_slot])
            elif value is not None or not plan.reduce:
                self.store(env, value if value is not None else tirx.const(0, plan.out.buf.dtype),
                           coords)
            return
        self.level_cases(t, env, present, None, coords=coords)

    def level_cases(self, t, env, present, vi, coords=None) -> None:
        plan = self.plan
        coords = dict(coords or {})
        at_t = {name: level_at(op, t) for name, op in plan.operands.items() if name in present}
        at_t = {name: lv for name, lv in at_t.items() if lv is not None}
        dense_ops = {name for name, lv in at_t.items() if lv.kind == "dense"}
        sparse_ops = [name for name, lv in at_t.items() if lv.kind == "compressed"]
        absent = set(plan.operands) - present
        tree = plan.trees[t]
        simplified = FULL if tree is None else simplify(tree, dense_ops, absent)
        if simplified == EMPTY:
            return
        if plan.out_mode == "workspace" and t == max(lv.var for lv in plan.out.levels):
            self.start_run()
        length = plan.vars[t].base_axis.length
        out_level = level_at(plan.out, t)
        if out_level is not None and out_level.kind == "dense" and simplified != FULL \
                and plan.out_mode == "dense":
            self.zero_output(env[plan.out.buf.name], t)
        bounds = {}
        for name in sparse_ops:
            axis = at_t[name].axis
            pos = env[name]
            end = self.slot()               # a local: the stores below leave it in a register
            self.set(end, self.indptr(axis)[pos + 1])
            bounds[name] = (self.indptr(axis)[pos], self.get(end))
        if simplified == FULL or vi is not None:    # a given row: each operand looked up
            followers = sparse_ops
            if vi is not None:
                self.emit_case(t, env, present, dense_ops, (), followers, bounds, vi, coords,
                               search=True)
                return
            c = self.slot()
            ptrs = {}
            for name in followers:
                ptrs[name] = self.slot()
                self.set(ptrs[name], bounds[name][0])
            self.set(c, tirx.const(0, INT))
            with Tb.While(self.get(c) < length):
                self.emit_case(t, env, present, dense_ops, (), followers, bounds, self.get(c),
                               coords, ptrs=ptrs)
                self.set(c, self.get(c) + 1)
            return
        drivers = [n for n in sparse_ops if n in leaf_names(simplified)]
        followers = [n for n in sparse_ops if n not in drivers]
        ptrs = {}
        for name in sparse_ops:
            ptrs[name] = self.slot()
            self.set(ptrs[name], bounds[name][0])
        c = self.slot()
        self.check_cases(self.cases + point_count(simplified))   # each point has a case
        points = lattice_points(simplified)
        for point in points:
            cond = all_of([self.get(ptrs[x]) < bounds[x][1] for x in point])
            with Tb.While(cond):
                crd = {x: self.indices(at_t[x].axis)[self.get(ptrs[x])] for x in point}
                cases = sub_points(point, points)
                if len(point) == 2 and self.stores_innermost(t, followers, dense_ops):
                    self.ordered_cases(t, env, present, point, cases, crd, ptrs, coords)
                    continue
                coord = crd[point[0]]
                for x in point[1:]:
                    coord = tirx.min(coord, crd[x])
                self.set(c, coord)
                if self.selects_case(t, point, cases, followers, dense_ops):
                    held = self.select_case(t, env, present, cases, crd, ptrs, self.get(c),
                                            coords)
                    for x in point:
                        self.set(ptrs[x], self.get(ptrs[x]) + self.get(held[x]))
                    continue
                self._cases(t, env, present, dense_ops, cases, crd, followers, bounds, ptrs,
                            self.get(c), coords)
                if len(point) == 1:
                    self.set(ptrs[point[0]], self.get(ptrs[point[0]]) + 1)
                    continue
                for x in point:
                    with Tb.If(crd[x] == self.get(c)):
                        with Tb.Then():
                            self.set(ptrs[x], self.get(ptrs[x]) + 1)

    def stores_innermost(self, t, followers, dense_ops) -> bool:
        """Whether a point's cases at variable ``t`` each store one value and nothing else:
        the innermost variable, an output appended in order, nothing summed or looked up."""
        plan = self.plan
        return (t == len(plan.vars) - 1 and not plan.reduce
                and plan.out_mode in ("rows", "append") and not followers and not dense_ops)

    def selects_case(self, t, point, cases, followers, dense_ops) -> bool:
        """Whether the cases of ``point`` (three operands or more) store a value picked without
        a branch (``select_case``): ``stores_innermost``, and a case for every operand alone
        (some case always holds), or ``onepass``, whose room for a chunk takes a write at every
        step of the merge (each step moves some operand on), kept only where a case holds."""
        return (len(point) > 2 and self.mode != "count"
                and self.stores_innermost(t, followers, dense_ops)
                and (self.mode == "onepass" or all((x,) in cases for x in point)))

    def ordered_cases(self, t, env, present, point, cases, crd, ptrs, coords) -> None:
        """Two operands ``x``, ``y``: ``x`` alone below ``y``'s coordinate, ``y`` alone below
        ``x``'s, else both; each branch stores its case's value (where it is a case) and moves
        its operands on. scipy's loop: on runs of one operand the branches are predicted."""
        x, y = point
        walked = {n for n in present if n in self.walked_at(t)}
        dtype = self.plan.out.buf.dtype

        def emit(case):
            if case in cases:
                case_env = {**env, **{n: self.get(ptrs[n]) for n in case}}
                value = self.value_of(self.plan.value, case_env, (present - walked) | set(case))
                self.store(env, value if value is not None else tirx.const(0, dtype),
                           {**coords, t: crd[case[0]]})
            for n in case:
                self.set(ptrs[n], self.get(ptrs[n]) + 1)

        with Tb.If(crd[x] < crd[y]):
            with Tb.Then():
                emit((x,))
            with Tb.Else():
                with Tb.If(crd[y] < crd[x]):
                    with Tb.Then():
                        emit((y,))
                    with Tb.Else():
                        emit((x, y))

    def select_case(self, t, env, present, cases, crd, ptrs, coord, coords) -> dict:
        """Store the value of the first case whose operands all hold ``coord``, chosen by
        ``Select`` over the operands' values read up front (every operand's position is in
        bounds inside the loop): the cases' unpredictable branches become conditional moves.
        Returns the slot per operand holding 1 where it holds ``coord`` (its pointer's step)."""
        dtype = self.plan.out.buf.dtype
        held, loaded = {}, {}
        first = len(self.plan.vars) + 1
        for n, x in enumerate(crd):   # flags used twice: the compiler keeps them branch-free
            held[x] = self.slot()
            self.set(held[x], tirx.Cast(INT, crd[x] == coord))
            Tb.buffer_store(self.acc, self.values(self.plan.operands[x])[self.get(ptrs[x])],
                            [first + n])
            loaded[x] = self.acc[first + n]
        walked = {n for n in present if n in self.walked_at(t)}
        holds = {case: all_of([self.get(held[x]) != 0 for x in case]) for case in cases}
        value = None
        for case in reversed(cases):
            folded = self.value_of(self.plan.value, env, (present - walked) | set(case), loaded)
            folded = folded if folded is not None else tirx.const(0, dtype)
            value = folded if value is None else tirx.Select(holds[case], folded, value)
        kept = None if all((x,) in cases for x in crd) else any_of(list(holds.values()))
        self.store(env, value, {**coords, t: coord},
                   1 if kept is None else tirx.Cast(INT, kept))
        return held

    def _cases(self, t, env, present, dense_ops, cases, crd, followers, bounds, ptrs, coord,
               coords) -> None:
        if not cases:
            return
        case, rest = cases[0], cases[1:]
        if len(crd) == 1:            # a single operand: its coordinate is the coordinate
            self.emit_case(t, env, present, dense_ops, case, followers, bounds, coord, coords,
                           ptrs=ptrs)
            return
        with Tb.If(all_of([crd[x] == coord for x in case])):
            with Tb.Then():
                self.emit_case(t, env, present, dense_ops, case, followers, bounds, coord,
                               coords, ptrs=ptrs)
            if rest:
                with Tb.Else():
                    self._cases(t, env, present, dense_ops, rest, crd, followers, bounds, ptrs,
                                coord, coords)

    def emit_case(self, t, env, present, dense_ops, case, followers, bounds, coord, coords,
                  ptrs=None, search=False) -> None:
        """The body at coordinate ``coord`` of variable ``t`` with the drivers ``case`` present;
        each follower is looked up and the rest emitted with and without it."""
        plan = self.plan
        new_env = dict(env)
        walked = [n for n in present if n in self.walked_at(t)]
        new_present = {n for n in present if n not in walked} | set(case)
        for name in case:
            new_env[name] = self.get(ptrs[name])
        length = plan.vars[t].base_axis.length
        coords = dict(coords)
        coords[t] = coord
        for name in dense_ops:
            op = plan.operands[name]
            if not op.free:
                new_env[name] = env[name] * length + coord
            elif all(lv.var in coords for lv in op.levels):
                new_env[name] = row_major(op, coords)
        out_level = level_at(plan.out, t)
        if out_level is not None and out_level.kind == "dense":
            new_env[plan.out.buf.name] = env[plan.out.buf.name] * length + coord
            if t == 0 and plan.out_mode == "scatter":
                self.zero_output(new_env[plan.out.buf.name], 1)
        self._followers(t, new_env, new_present, list(followers), bounds, coord, coords, ptrs,
                        search)

    def walked_at(self, t) -> set:
        """The operands with a compressed level at variable ``t`` (walked or looked up there)."""
        return {n for n, op in self.plan.operands.items()
                if (lv := level_at(op, t)) is not None and lv.kind == "compressed"}

    def _followers(self, t, env, present, followers, bounds, coord, coords, ptrs, search):
        if not followers:
            self.enter(t, env, present, coord, coords)
            return
        name, rest = followers[0], followers[1:]
        axis = level_at(self.plan.operands[name], t).axis
        begin, end = bounds[name]
        if search:
            slot = self.slot()
            self.lower_bound(slot, self.indices(axis), begin, end, coord)
        else:
            slot = ptrs[name]
            with Tb.While(and_then(self.get(slot) < end, self.indices(axis)[self.get(slot)] < coord)):
                self.set(slot, self.get(slot) + 1)
        found = and_then(self.get(slot) < end, self.indices(axis)[self.get(slot)] == coord)
        with Tb.If(found):
            with Tb.Then():
                self._followers(t, {**env, name: self.get(slot)}, present | {name}, rest,
                                bounds, coord, coords, ptrs, search)
            with Tb.Else():
                self._followers(t, env, present, rest, bounds, coord, coords, ptrs, search)

    def enter(self, t, env, present, coord, coords) -> None:
        """Go one variable deeper, appending this coordinate to an outer compressed output level
        when something was appended below it."""
        plan = self.plan
        out_level = level_at(plan.out, t)
        last_out = t == plan.n_out_vars - 1
        if plan.out_mode == "rows" and t == 0:      # a row of a CSR result: count or fill it
            axis = self.out_compressed()[0].axis
            if self.mode == "onepass":               # appended after the chunk's last row
                Tb.buffer_store(self.indptr(axis), self.get(self.counter[1]), [coord])
            else:
                self.set(self.counter[1], tirx.const(0, INT) if self.mode == "count"
                         else self.indptr(axis)[coord])
            self.level(t + 1, env, present, coords)
            if self.mode == "count":
                Tb.buffer_store(self.indptr(axis), self.get(self.counter[1]), [coord + 1])
            return
        if plan.out_mode != "append" or out_level is None or last_out:
            self.level(t + 1, env, present, coords)
            return
        inner = self.counter[min(v for v in self.counter if v > t)]
        mine = self.counter[t]
        saved = self.slot()
        self.set(saved, self.get(inner))
        self.level(t + 1, env, present, coords)
        with Tb.If(self.get(inner) > self.get(saved)):
            with Tb.Then():
                if self.mode == "fill":
                    nxt = [lv for lv in self.out_compressed() if lv.var > t][0]
                    Tb.buffer_store(self.indices(out_level.axis), coord, [self.get(mine)])
                    Tb.buffer_store(self.indptr(nxt.axis), self.get(inner), [self.get(mine) + 1])
                self.set(mine, self.get(mine) + 1)

    def lower_bound(self, slot, indices, begin, end, key) -> None:
        """``ptr[slot]`` = the first position in ``[begin, end)`` whose index is >= ``key``."""
        hi = self.slot()
        self.set(slot, begin)
        self.set(hi, end)
        with Tb.While(self.get(slot) < self.get(hi)):
            mid = (self.get(slot) + self.get(hi)) // 2
            with Tb.If(indices[mid] < key):
                with Tb.Then():
                    self.set(slot, mid + 1)
                with Tb.Else():
                    self.set(hi, mid)

    def zero_output(self, base, t) -> None:
        """Zero the dense output elements under position ``base`` of the output's levels before
        variable ``t`` (the merge may skip some; a scatter adds into them)."""
        plan = self.plan
        if self.mode != "fill":
            return
        out = plan.out
        size = tirx.const(1, INT)
        for lv in out.levels:
            if lv.var >= t:
                size = size * lv.axis.length
        z = self.slot()
        self.set(z, tirx.const(0, INT))
        with Tb.While(self.get(z) < size):
            Tb.buffer_store(self.values(out), tirx.const(0, out.buf.dtype),
                            [base * size + self.get(z)])
            self.set(z, self.get(z) + 1)



def index_dtype(plan: Plan) -> str:
    """The type of ``plan``'s positions: int64 where a compressed level of an operand or the
    output declares int64 indices (``sparsetir.algebra`` generates that for results past int32
    positions), else ``INT``."""
    bufs = [op.buf for op in plan.operands.values()] + [plan.out.buf]
    wide = any(axis.kind == "sparse_variable" and str(axis.idtype) == INT64
               for buf in bufs for axis in buf.axes)
    return INT64 if wide else INT


def fold(emitter: Emitter, expr, env, present, loaded=None):
    """``expr`` with each load at its position (or the value in ``loaded``, name -> value),
    absent operands as 0 folded away (None: 0)."""
    if isinstance(expr, tvm.ir.TensorLoad):
        name = expr.source.name
        if name not in present:
            return None
        if loaded and name in loaded:
            return loaded[name]
        op = emitter.plan.operands[name]
        return emitter.values(op)[env[name]]
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return None if float(expr.value) == 0.0 else expr
    if isinstance(expr, tirx.Cast):
        inner = fold(emitter, expr.value, env, present, loaded)
        return None if inner is None else tirx.Cast(expr.ty.dtype, inner)
    a = fold(emitter, expr.a, env, present, loaded)
    b = fold(emitter, expr.b, env, present, loaded)
    if isinstance(expr, tirx.Add):
        return b if a is None else a if b is None else a + b
    if isinstance(expr, tirx.Sub):
        if b is None:
            return a
        return -b if a is None else a - b
    if isinstance(expr, tirx.Mul):
        return None if a is None or b is None else a * b
    if isinstance(expr, tirx.Div):
        if b is None:
            raise LoweringError("co-iteration: division by an operand that may be absent "
                                f"(zero) in {expr}; divide by a dense operand")
        return None if a is None else a / b
    raise LoweringError(f"co-iteration: cannot lower {type(expr).__name__} in {expr}")




def leaf_names(tree) -> set:
    if isinstance(tree, str):
        return {tree}
    return {n for child in tree[1] for n in leaf_names(child)}
