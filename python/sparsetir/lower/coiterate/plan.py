"""The plan of a co-iteration: its variables, operands and their levels, and the output mode.

``plan_coiteration(func)`` reads the one ``T.sp_iter`` of a co-iterating function: each buffer
read or written becomes an ``Operand`` whose ``Level``s are ``root`` (a one-position axis read
at 0), ``dense`` or ``compressed``, each indexed by an iteration variable; the store is an
assignment or a sum (``T.init`` + ``out[...] = out[...] + expr``); the output mode says how
the result is written (``coiterate_emit``):

==============  ==============================================================================
``dense``       dense result, every output variable outside the sums
``scatter``     dense result with an output variable under a sum (zeroed, then added into)
``rows``        CSR result: counted, then filled row by row
``workspace``   CSR result with an output variable under a sum (SpGEMM: Gustavson's workspace)
``append``      compressed at every level: counted, then appended in coordinate order
==============  ==============================================================================

Example
-------
>>> import sparsetir.algebra as alg
>>> csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
>>> plan_coiteration(alg.compile("A(i,j) = B(i,j) + C(i,j)", formats=csr).func).out_mode
'rows'
>>> plan_coiteration(alg.compile("A(i,j) = B(i,j) + C(i,j)",
...                              formats={"B": "CSR", "C": "CSR"}).func).out_mode
'dense'
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import tirx

from ...errors import LoweringError
from ...ir.attrs import PREPROCESS_ANNOTATION
from ...ir.axis import Axis
from ...ir.coiteration import CoiteratedAxis, Merge
from ...ir.function import SparseFunction
from ...ir.iteration import SparseIteration
from .tir import INT
from .merge_lattice import FULL, simplify


def merge_tree(merge: Merge):
    """A ``Merge`` as ``(op, [children])`` with buffer names as leaves, and ``FULL`` for the
    co-iterated axis (every coordinate)."""
    return (merge.op, [merge_tree(o) if isinstance(o, Merge) else FULL if isinstance(o, Axis)
                       else o.name for o in merge.operands])


@dataclass
class Level:
    kind: str            # "root" (one position, index 0), "dense" or "compressed"
    var: int             # the iteration variable indexing it (-1 for root)
    axis: object


@dataclass
class Operand:
    buf: object          # SparseBuffer
    levels: list
    free: bool = False   # dense data read in another order: addressed once all its variables are bound


@dataclass
class Plan:
    func: SparseFunction
    name: str
    vars: list           # SpIterVar, outermost first
    operands: dict       # name -> Operand (inputs)
    out: Operand
    value: object        # the expression stored (or accumulated)
    reduce: bool
    init: object         # the reduction's initial value
    n_out_vars: int
    out_mode: str        # "dense", "rows" or "append"
    outer_for: bool      # variable 0 is a dense for loop (the parallel one)
    trees: list = field(default_factory=list)   # merge tree per variable (None: dense)


def plan_coiteration(func: SparseFunction) -> Plan:
    its = [s for s in func.body if isinstance(s, SparseIteration)]
    if len(its) != 1 or len(func.body) != 1:
        raise LoweringError(f"function {func.name}: a co-iterating function holds exactly one "
                            "T.sp_iter and nothing else")
    it = its[0]
    where = f"co-iteration {it.name}"
    if PREPROCESS_ANNOTATION in it.annotations:
        raise LoweringError(f"{where} is annotated {PREPROCESS_ANNOTATION!r}, which marks the "
                            "iterations that fill a new format from an old one (what "
                            "format_decompose makes, split off by extract_preprocess / "
                            "remove_preprocess); a co-iteration computes the result: remove "
                            "the annotation")
    stores = [s for s in it.body if isinstance(s, tirx.BufferStore)]
    if len(stores) != 1 or len(it.body) != 1:
        raise LoweringError(f"{where}: the body must be one buffer store")
    store = stores[0]
    views = {buf.view: buf for buf in func.buffers}
    var_index = {v.var: n for n, v in enumerate(it.sp_iter_vars)}

    def operand(buf, indices) -> Operand:
        if buf.handle is None:
            raise LoweringError(f"{where}: buffer {buf.name} must be a parameter")
        levels = []
        for axis, index in zip(buf.axes, indices):
            if isinstance(index, tirx.IntImm) and index.value == 0 and axis.kind == "dense_fixed" \
                    and isinstance(axis.length, tirx.IntImm) and axis.length.value == 1 \
                    and not levels:
                levels.append(Level("root", -1, axis))
                continue
            if not isinstance(index, tirx.Var) or index not in var_index:
                raise LoweringError(f"{where}: {buf.name} must be indexed by iteration "
                                    f"variables, got {index}")
            if axis.kind == "dense_fixed":
                kind = "dense"
            elif axis.kind == "sparse_variable" and axis.sorted:
                kind = "compressed"
            else:
                raise LoweringError(f"{where}: {buf.name}'s axis {axis.name} is {axis.kind}; "
                                    "co-iteration walks dense_fixed and sorted sparse_variable axes")
            levels.append(Level(kind, var_index[index], axis))
        order = [lv.var for lv in levels if lv.kind != "root"]
        if len(set(order)) != len(order):
            raise LoweringError(f"{where}: {buf.name} is indexed twice by one variable")
        if order != sorted(order):
            if all(lv.kind == "dense" for lv in levels) and buf is not out_buf:
                return Operand(buf, levels, free=True)
            names = [it.sp_iter_vars[t].var.name for t in order]
            raise LoweringError(f"{where}: {buf.name}'s levels are indexed ({', '.join(names)}), "
                                "not in the iteration order; iterate in its level order")
        return Operand(buf, levels)

    operands = {}

    def collect(expr):
        if isinstance(expr, tvm.ir.TensorLoad):
            buf = views.get(expr.source)
            if buf is None:
                raise LoweringError(f"{where}: {expr.source.name} is not a sparse buffer")
            op = operand(buf, list(expr.indices))
            if buf.name in operands and [lv.var for lv in operands[buf.name].levels] \
                    != [lv.var for lv in op.levels]:
                raise LoweringError(f"{where}: {buf.name} is read with two index orders")
            operands[buf.name] = op
            return
        for child in _children(expr):
            collect(child)

    out_buf = views.get(store.buffer)
    out = operand(out_buf, list(store.indices))
    value, reduce, init = store.value, False, None
    if it.init is not None:
        init_store = it.init[0] if len(it.init) == 1 else None
        if not isinstance(init_store, tirx.BufferStore) or not init_store.buffer.same_as(store.buffer) \
                or not isinstance(value, (tirx.Add, tirx.Sub)) \
                or not isinstance(value.a, tvm.ir.TensorLoad) \
                or not value.a.source.same_as(store.buffer):
            raise LoweringError(f"{where}: a reduction is `with T.init(): out[...] = v0` and "
                                "`out[...] = out[...] + expr` (or `- expr`)")
        value = value.b if isinstance(value, tirx.Add) else tirx.const(0, value.b.ty.dtype) - value.b
        reduce, init = True, init_store.value
        collect(init)
    collect(value)
    if out_buf.name in operands:
        raise LoweringError(f"{where}: the output {out_buf.name} is also read")
    _refuse_shared_axes(where, out_buf, [op.buf for op in operands.values()])
    out_vars = [lv.var for lv in out.levels if lv.kind != "root"]
    n_out = len(out_vars)
    for t, v in enumerate(it.sp_iter_vars):
        if v.is_reduction == (t in out_vars):
            raise LoweringError(f"{where}: variable {v.var.name} must be "
                                + ("spatial ('S')" if t in out_vars else "a reduction ('R')"))
    if reduce != (len(it.sp_iter_vars) > n_out):
        raise LoweringError(f"{where}: reduction variables need T.init and an accumulation")
    scatter = out_vars != list(range(n_out))
    if scatter and not (isinstance(init, tirx.FloatImm) and init.value == 0):
        raise LoweringError(f"{where}: an output variable under a reduction needs `T.init()` "
                            "storing 0")
    trees = []
    for t, v in enumerate(it.sp_iter_vars):
        if isinstance(v.axis, CoiteratedAxis):
            for buf in v.axis.merge.buffers:
                if buf.name not in operands or all(lv.var != t for lv in operands[buf.name].levels):
                    raise LoweringError(f"{where}: T.coiterate({v.axis.name}, ...) names "
                                        f"{buf.name}, which no read indexes by {v.var.name}")
            trees.append(merge_tree(v.axis.merge))
        else:
            trees.append(None)
    kinds = [lv.kind for lv in out.levels if lv.kind != "root"]
    outer_for = bool(it.sp_iter_vars) and not it.sp_iter_vars[0].is_reduction and \
        _full_at(trees[0], operands, 0)
    if "compressed" not in kinds:
        mode = "scatter" if scatter else "dense"
    elif kinds == ["dense", "compressed"] and (outer_for or not scatter or out_vars[0] == 0):
        mode = "workspace" if scatter else "rows"
    elif all(k == "compressed" for k in kinds) and not scatter:
        mode = "append"
    else:
        raise LoweringError(f"{where}: output {out_buf.name} has levels {kinds}; assembled "
                            "outputs are CSR under a dense outer loop or compressed at every "
                            "level (the outermost variables, in order)")
    if mode == "append":
        outer_for = False         # appending is in coordinate order: one serial walk
    return Plan(func, it.name, list(it.sp_iter_vars), operands, out, value, reduce, init,
                 n_out, mode, outer_for, trees)


def _refuse_shared_axes(where: str, out_buf, inputs: list) -> None:
    """Refuse an output stored over a sparse axis an input reads too: a co-iteration assembles
    its sparse output, index arrays included, so they cannot be an input's."""
    arrays = [array for buf in inputs for axis in buf.axes if axis.kind == "sparse_variable"
              for array in (axis.indptr, axis.indices)]
    for axis in out_buf.axes:
        if axis.kind == "sparse_variable" and any(
                array.same_as(axis.indptr) or array.same_as(axis.indices) for array in arrays):
            raise LoweringError(
                f"{where}: the output {out_buf.name} is stored over axis {axis.name}, whose "
                "index arrays an input reads too; a co-iteration assembles its sparse output, "
                f"index arrays included, so give {out_buf.name} a sparse axis of its own (with "
                "its own indptr and indices parameters)")


def _full_at(tree, operands, t) -> bool:
    """Whether the merge of variable ``t`` is whole with every operand present."""
    full = {name for name, op in operands.items()
            if any(lv.var == t and lv.kind == "dense" for lv in op.levels)}
    return tree is None or simplify(tree, full) == FULL


def _children(expr) -> list:
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Min, tirx.Max)):
        return [expr.a, expr.b]
    if isinstance(expr, tirx.Cast):
        return [expr.value]
    if isinstance(expr, tvm.ir.TensorLoad):
        return []
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return []
    raise LoweringError(f"co-iteration: cannot lower expression {expr} ({type(expr).__name__})")




def level_at(op: Operand, t: int):
    return next((lv for lv in op.levels if lv.var == t), None)




def row_major(op: Operand, coords: dict):
    """The position of a dense operand's element at ``coords`` (its levels in storage order)."""
    pos = tirx.const(0, INT)
    for lv in op.levels:
        pos = pos * lv.axis.length + coords[lv.var]
    return pos




def positions(buf) -> list:
    """The number of positions after each of ``buf``'s axes (a dense level multiplies, a
    compressed one has its ``nnz``): the values have the last, ``indptr`` of axis ``k`` one
    more than the one before ``k``."""
    sizes, size = [], tirx.const(1, INT)
    for axis in buf.axes:
        size = axis.nnz if axis.kind == "sparse_variable" else size * axis.length
        sizes.append(size)
    return sizes
