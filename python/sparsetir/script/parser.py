"""Parse sparse kernels written in TVMScript into ``SparseFunction``s.

TVM's parser core does the work that is not specific to us: the Python AST, scopes, evaluation
of expressions into TIR (``self.eval_expr``), and errors that point at a line and column. This
module registers the statement handlers of the ``sparsetir`` dispatch token: function
definitions, declarations (``I = T.dense_fixed(m)``), ``with T.sp_iter(...)``, ``with T.init()``,
stores (``C[i, k] = ...``), ``if`` and expression statements. It does not know the ``T``
namespace (``tir.py``), which calls ``parse`` from ``T.prim_func``.

Example
-------
>>> from sparsetir.script import from_source
>>> from sparsetir.ops.kernels import spmm
>>> text = spmm.script()                     # as printed by SparseFunction.script()
>>> func = from_source(text)
>>> func.script() == text
True
>>> from_source(text.replace('"SRS"', '"SR"'))
Traceback (most recent call last):
...
sparsetir.errors.SparseScriptError: error: sparse iteration spmm: the kinds string 'SR' needs one
'S' or 'R' for each of the 3 axes (I, J, K)
...
"""

from __future__ import annotations

import ast

import tvm
from tvm import tirx
from tvm.script.parser.core import dispatch, doc, utils
from tvm.script.parser.core.diagnostics import Source
from tvm.script.parser.core.error import ParserError
from tvm.script.parser.core.parser import Parser

from ..ir.axis import AttachedAxis, Axis, FusedAxis, narrower
from ..ir.coiteration import CoiteratedAxis
from ..ir.buffer import BufferDomain, SparseBuffer
from ..ir.function import SparseFunction
from ..ir.iteration import SparseIteration, SpIterVar
from ..ir.utils import is_handle, var_dtype
from .declarations import (
    AxisDecl,
    BufferDecl,
    DomainDecl,
    FuncAttrDecl,
    InitDecl,
    IterAttrDecl,
    SpIterDecl,
)
from ..errors import SparseScriptError

TOKEN = "sparsetir"
"""The dispatch token of sparse kernels: ``T.prim_func`` carries it, the handlers below are
registered under it."""


def parse_function(func) -> SparseFunction:
    """Parse the Python function ``func``, written in sparse TVMScript (``T.prim_func``)."""
    extra_vars = utils.inspect_function_capture(func)
    return parse(Source(func), {func.__name__: func.__annotations__}, extra_vars)


def parse_text(text: str, namespace) -> SparseFunction:
    """Parse TVMScript ``text`` in which ``T`` and ``tir`` name ``namespace``."""
    return parse(Source(text), {}, {"T": namespace, "tir": namespace})


def parse(source: Source, annotations: dict, extra_vars: dict) -> SparseFunction:
    """Run TVM's parser core with the ``sparsetir`` handlers over ``source``."""
    parser = Parser(source, annotations)
    parser.sparse_result = None
    try:
        parser.parse(extra_vars=extra_vars)
    except SparseScriptError:
        raise
    except Exception as err:  # TVM's DiagnosticError: already formatted with the source line
        raise SparseScriptError(str(err)) from None
    if parser.sparse_result is None:
        raise SparseScriptError("no function decorated with @T.prim_func was found")
    return parser.sparse_result


class _FunctionState:
    """What the parser has collected so far for the function being parsed."""

    def __init__(self, name: str):
        self.name = name
        self.params: list = []
        self.axes: list = []
        self.buffers: list = []
        self.attrs: dict = {}
        self.bodies: list = [[]]          # statement lists, innermost last
        self.iterations: list = []        # enclosing SparseIteration builders, innermost last

    def emit(self, stmt) -> None:
        self.bodies[-1].append(stmt)


class _IterationState:
    """A sparse iteration whose body is being parsed."""

    def __init__(self, name: str, sp_iter_vars: list):
        self.name = name
        self.sp_iter_vars = sp_iter_vars
        self.init = None
        self.annotations: dict = {}


def _state(self: Parser) -> _FunctionState:
    return self.sparse_state


def _count(number: int, noun: str) -> str:
    """``"1 variable"``, ``"2 variables"``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _handler(type_name: str):
    """Register a statement handler of the ``sparsetir`` token.

    TVM's evaluator raises ``ParserError("Undefined variable: Q")`` for an unknown name, which
    its dispatcher would report at the whole statement; report it at the name instead, saying
    what a name in a sparse kernel can be.
    """
    def register(visit):
        def wrapped(self: Parser, node) -> None:
            try:
                visit(self, node)
            except ParserError as err:
                name = getattr(err.node, "id", None)
                message = str(err) if name is None else (
                    f"name {name} is not defined: it is not a parameter, axis, sparse buffer or "
                    "iteration variable in scope")
                self.report_error(err.node, message)
        dispatch.register(token=TOKEN, type_name=type_name)(wrapped)
        return visit
    return register


def _describe(value) -> str:
    """A short description of ``value`` for messages (the reprs of IR nodes are long)."""
    if isinstance(value, Axis):
        return f"axis {value.name}"
    if isinstance(value, SparseBuffer):
        return f"sparse buffer {value.name}"
    if isinstance(value, FusedAxis):
        return f"T.fuse({', '.join(a.name for a in value.group)})"
    if isinstance(value, AttachedAxis):
        return f"T.attach({value.axis.name}, {value.new_parent.name})"
    if isinstance(value, tirx.Var):
        return f"variable {value.name}"
    if isinstance(value, tvm.ir.Expr):
        return f"expression {value}"
    if isinstance(value, (bool, int, float, str)):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, AxisDecl):
        return f"an unnamed T.{value.kind}(...) (assign it to a name)"
    if isinstance(value, BufferDecl):
        return "an unnamed sparse buffer declaration (assign it to a name)"
    return f"a value of type {type(value).__name__}"


@_handler("FunctionDef")
def _visit_function_def(self: Parser, node: doc.FunctionDef) -> None:
    self.sparse_state = _FunctionState(node.name)
    with self.var_table.with_frame(), self.with_dispatch_token(TOKEN):
        for arg in node.args.args:
            param = _make_param(self, node, arg)
            self.var_table.add(arg.arg, param)
            self.sparse_state.params.append(param)
        self.visit_body(node.body)
    state = self.sparse_state
    if state.iterations or len(state.bodies) != 1:
        self.report_error(node, "internal error: unbalanced sparse iterations")
    self.sparse_result = SparseFunction(name=state.name, params=state.params, axes=state.axes,
                                        buffers=state.buffers, body=state.bodies[0],
                                        attrs=state.attrs)


def _make_param(self: Parser, func: doc.FunctionDef, arg: doc.arg) -> tirx.Var:
    if arg.annotation is None:
        self.report_error(_arg_node(self, func, arg),
                          f"parameter {arg.arg} needs a type annotation "
                          "(T.handle or an integer type such as T.int32)")
    ann = self.eval_expr(arg.annotation)
    if callable(ann):
        value = ann()
        if isinstance(value, tirx.Var):
            dtype = var_dtype(value)
            if dtype == "handle" or dtype.startswith(("int", "uint")):
                return tirx.Var(arg.arg, dtype)
    self.report_error(arg.annotation, f"parameter {arg.arg}: unsupported annotation; use T.handle "
                                      "for arrays and an integer type such as T.int32 for sizes")
    return None


def _arg_node(self: Parser, func: doc.FunctionDef, arg: doc.arg):
    """A node spanning parameter ``arg``: TVM's ``doc.arg`` has no position, Python's has."""
    for node in ast.walk(ast.parse(self.diag.source.source)):
        if isinstance(node, ast.FunctionDef) and node.lineno == func.lineno:
            for py_arg in node.args.args:
                if py_arg.arg == arg.arg:
                    return doc.Name(arg.arg, doc.Load(), py_arg.lineno, py_arg.col_offset,
                                    py_arg.end_lineno, py_arg.end_col_offset)
    return doc.Name(arg.arg, doc.Load(), func.lineno, func.col_offset, func.lineno,
                    func.col_offset)


@_handler("Assign")
def _visit_assign(self: Parser, node: doc.Assign) -> None:
    if len(node.targets) != 1:
        self.report_error(node, "chained assignment is not supported")
    target = node.targets[0]
    if isinstance(target, doc.Subscript):
        _emit_store(self, target, self.eval_expr(node.value))
        return
    value = self.eval_expr(node.value)
    if not isinstance(target, doc.Name):
        self.report_error(target, "only a single name can be assigned here")
    if isinstance(value, AxisDecl):
        value = _declare_axis(self, target, value)
    elif isinstance(value, BufferDecl):
        value = _declare_buffer(self, target, value)
    elif _state(self).iterations:
        self.report_error(node, "local variables are not supported inside a sparse iteration; "
                                "write the expression inline")
    self.var_table.add(target.id, value, allow_shadowing=False)


@_handler("AugAssign")
def _visit_aug_assign(self: Parser, node: doc.AugAssign) -> None:
    if not isinstance(node.target, doc.Subscript):
        self.report_error(node, "only buffer elements can be updated with an augmented assignment")
    load = doc.Subscript(value=node.target.value, slice=node.target.slice, ctx=doc.Load(),
                         lineno=node.lineno, col_offset=node.col_offset,
                         end_lineno=node.end_lineno, end_col_offset=node.end_col_offset)
    expr = doc.BinOp(left=load, op=node.op, right=node.value, lineno=node.lineno,
                     col_offset=node.col_offset, end_lineno=node.end_lineno,
                     end_col_offset=node.end_col_offset)
    _emit_store(self, node.target, self.eval_expr(expr))


def _declare_axis(self: Parser, target: doc.Name, decl: AxisDecl) -> Axis:
    state = _state(self)
    name = target.id
    if any(a.name == name for a in state.axes):
        self.report_error(target, f"axis {name} is declared twice")
    if decl.kind != "dense_fixed" and not isinstance(decl.parent, Axis):
        self.report_error(target, f"the parent of axis {name} must be a declared axis, "
                                  f"got {_describe(decl.parent)}")
    for role in ("indptr", "indices"):
        handle = getattr(decl, role)
        if handle is not None:
            _check_handle_param(self, target, handle, f"{role} of axis {name}")
    axis = Axis(name=name, kind=decl.kind, parent=decl.parent,
                length=_size(self, target, decl.length), nnz=_size(self, target, decl.nnz),
                nnz_cols=_size(self, target, decl.nnz_cols), indptr=decl.indptr,
                indices=decl.indices, idtype=decl.idtype, sorted=bool(decl.sorted),
                indptr_dtype=narrower(decl.indptr_dtype, decl.idtype),
                indices_dtype=narrower(decl.indices_dtype, decl.idtype))
    state.axes.append(axis)
    return axis


def _declare_buffer(self: Parser, target: doc.Name, decl: BufferDecl) -> SparseBuffer:
    state = _state(self)
    name = target.id
    if any(b.name == name for b in state.buffers):
        self.report_error(target, f"sparse buffer {name} is declared twice")
    axes = list(decl.axes) if isinstance(decl.axes, (list, tuple)) else [decl.axes]
    for axis in axes:
        if not isinstance(axis, Axis):
            self.report_error(target, f"sparse buffer {name}: {_describe(axis)} is not a "
                                      "declared axis")
    if decl.handle is not None:
        _check_handle_param(self, target, decl.handle, f"sparse buffer {name}")
        if any(b.handle is not None and b.handle.same_as(decl.handle) for b in state.buffers):
            self.report_error(target, f"parameter {decl.handle.name} is matched twice")
    buf = SparseBuffer.create(name, axes, decl.dtype, handle=decl.handle, scope=decl.scope,
                              extra_storage=_size(self, target, decl.extra_storage),
                              default_value=decl.default_value)
    state.buffers.append(buf)
    return buf


def _check_handle_param(self: Parser, node, value, what: str) -> None:
    params = _state(self).params
    if not isinstance(value, tirx.Var) or not any(value.same_as(p) for p in params):
        self.report_error(node, f"{what}: expected a T.handle parameter of the function, "
                                f"got {_describe(value)}")
    if not is_handle(value):
        self.report_error(node, f"{what}: parameter {value.name} must be a T.handle")


def _size(self: Parser, node, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, tvm.ir.Expr)):
        self.report_error(node, f"expected an integer size, got {_describe(value)}")
    return tirx.const(value, "int32") if isinstance(value, int) else value


def _emit_store(self: Parser, target: doc.Subscript, value) -> None:
    state = _state(self)
    if not state.iterations:
        self.report_error(target, "buffer stores must be inside a T.sp_iter")
    buf = self.eval_expr(target.value)
    if not isinstance(buf, SparseBuffer):
        self.report_error(target.value, f"cannot store into {_describe(buf)}: it is not a "
                                        "sparse buffer")
    indices = self.eval_expr(target.slice)
    indices = list(indices) if isinstance(indices, (tuple, list)) else [indices]
    try:
        buf.check_index_count(indices)
    except IndexError as err:
        self.report_error(target, str(err))
    indices = [tirx.const(x, "int32") if isinstance(x, int) else x for x in indices]
    state.emit(tirx.BufferStore(buf.view, _convert_value(self, target, value, buf), indices))


def _convert_value(self: Parser, node, value, buf: SparseBuffer):
    if isinstance(value, (bool, int, float)):
        return tirx.const(value, buf.dtype)
    if not isinstance(value, tvm.ir.Expr):
        self.report_error(node, f"cannot store {_describe(value)} into sparse buffer "
                                f"{buf.name}")
    dtype = str(value.ty.dtype)
    if dtype != buf.dtype:
        if isinstance(value, (tirx.IntImm, tirx.FloatImm)):
            return tirx.const(value.value, buf.dtype)
        self.report_error(node, f"cannot store a value of type {dtype} into {buf.dtype} "
                                f"sparse buffer {buf.name}; convert it with "
                                f"T.Cast(\"{buf.dtype}\", ...)")
    return value


@_handler("With")
def _visit_with(self: Parser, node: doc.With) -> None:
    if len(node.items) != 1:
        self.report_error(node, "use one context manager per with statement")
    item = node.items[0]
    decl = self.eval_expr(item.context_expr)
    if isinstance(decl, SpIterDecl):
        _visit_sp_iter(self, node, item, decl)
    elif isinstance(decl, InitDecl):
        _visit_init(self, node)
    else:
        self.report_error(item.context_expr, "expected T.sp_iter(...) or T.init()")


def _visit_sp_iter(self: Parser, node: doc.With, item, decl: SpIterDecl) -> None:
    state = _state(self)
    names = _target_names(self, item)
    entries = _iteration_entries(self, item.context_expr, decl)
    axis_names = ", ".join(axis.name if isinstance(axis, Axis) else axis.axis.name
                           for axis, _ in entries)
    if not entries:
        self.report_error(item.context_expr,
                          f"sparse iteration {decl.name} iterates no axis; give T.sp_iter the "
                          "axes it loops over")
    if not isinstance(decl.kinds, str) or len(decl.kinds) != len(entries):
        self.report_error(item.context_expr,
                          f"sparse iteration {decl.name}: the kinds string {decl.kinds!r} needs "
                          f"one 'S' or 'R' for each of the {len(entries)} axes ({axis_names})")
    bad = [c for c in decl.kinds if c not in "SR"]
    if bad:
        self.report_error(item.context_expr,
                          f"sparse iteration {decl.name}: the kinds string {decl.kinds!r} has "
                          f"{bad[0]!r}; use 'S' (spatial) or 'R' (reduction)")
    if len(names) != len(entries):
        self.report_error(item.optional_vars or node,
                          f"sparse iteration {decl.name}: `as [{', '.join(names)}]` names "
                          f"{_count(len(names), 'variable')} for the {len(entries)} axes "
                          f"({axis_names})")
    sp_iter_vars = []
    with self.var_table.with_frame():
        for name, (axis, fused), kind in zip(names, entries, decl.kinds):
            var = tirx.Var(name, "int32")
            self.var_table.add(name, var, allow_shadowing=True)
            sp_iter_vars.append(SpIterVar(var=var, axis=axis, is_reduction=kind == "R",
                                          fused=fused))
        iteration = _IterationState(decl.name, sp_iter_vars)
        state.iterations.append(iteration)
        state.bodies.append([])
        self.visit_body(node.body)
        body = state.bodies.pop()
        state.iterations.pop()
    state.emit(SparseIteration(name=decl.name, sp_iter_vars=sp_iter_vars, body=body,
                               init=iteration.init, annotations=iteration.annotations))


def _target_names(self: Parser, item) -> list:
    target = item.optional_vars
    if target is None:
        self.report_error(item.context_expr, "write `as [i, j, ...]` to name the iteration variables")
    elts = target.elts if isinstance(target, (doc.List, doc.Tuple)) else [target]
    for elt in elts:
        if not isinstance(elt, doc.Name):
            self.report_error(elt, "iteration variables must be plain names")
    return [elt.id for elt in elts]


def _iteration_entries(self: Parser, node, decl: SpIterDecl) -> list:
    """(axis, fused group or None) for every variable the iteration binds."""
    axes = decl.axes if isinstance(decl.axes, (list, tuple)) else [decl.axes]
    entries = []
    for axis in axes:
        if isinstance(axis, FusedAxis):
            entries.extend((member, axis) for member in axis.group)
        elif isinstance(axis, (Axis, AttachedAxis, CoiteratedAxis)):
            entries.append((axis, None))
        else:
            self.report_error(node, f"sparse iteration {decl.name}: {_describe(axis)} is not an "
                                    "axis")
    return entries


def _visit_init(self: Parser, node: doc.With) -> None:
    state = _state(self)
    if not state.iterations or len(state.bodies) != len(state.iterations) + 1:
        self.report_error(node, "T.init() must be directly inside a T.sp_iter")
    iteration = state.iterations[-1]
    if iteration.init is not None:
        self.report_error(node, f"sparse iteration {iteration.name} has two T.init() blocks")
    state.bodies.append([])
    self.visit_body(node.body)
    iteration.init = state.bodies.pop()


@_handler("Expr")
def _visit_expr(self: Parser, node: doc.Expr) -> None:
    state = _state(self)
    value = self.eval_expr(node.value)
    if isinstance(value, FuncAttrDecl):
        state.attrs.update(value.attrs)
    elif isinstance(value, IterAttrDecl):
        if not state.iterations:
            self.report_error(node, "T.sp_iter_attr must be inside a T.sp_iter")
        state.iterations[-1].annotations.update(value.attrs)
    elif isinstance(value, DomainDecl):
        _visit_domain(self, node, value)
    elif isinstance(value, tirx.Evaluate) and isinstance(value.value, tirx.IntImm) \
            and not state.iterations:
        pass   # T.evaluate(0): SparseTIR's empty body of a format description
    elif isinstance(value, tirx.Stmt):
        _emit_plain(self, node, value)
    elif isinstance(value, tvm.ir.Expr):
        _emit_plain(self, node, tirx.Evaluate(value))
    elif value is not None:
        self.report_error(node, f"this expression has no effect: {_describe(value)}")


def _visit_domain(self: Parser, node, decl: DomainDecl) -> None:
    if not isinstance(decl.buffer, SparseBuffer):
        self.report_error(node, f"T.assume_buffer_domain: {_describe(decl.buffer)} is not a "
                                "sparse buffer")
    lo, hi = (decl.domain if isinstance(decl.domain, (list, tuple)) and len(decl.domain) == 2
              else (None, None))
    if lo is None:
        self.report_error(node, "T.assume_buffer_domain takes a buffer and (min, max)")
    _state(self).emit(BufferDomain(buffer=decl.buffer, min=_size(self, node, lo),
                                   max=_size(self, node, hi)))


def _emit_plain(self: Parser, node, stmt) -> None:
    if not _state(self).iterations:
        self.report_error(node, "statements must be inside a T.sp_iter")
    _state(self).emit(stmt)


@_handler("If")
def _visit_if(self: Parser, node: doc.If) -> None:
    state = _state(self)
    if not state.iterations:
        self.report_error(node, "if statements must be inside a T.sp_iter")
    cond = self.eval_expr(node.test)
    branches = []
    for body in (node.body, node.orelse):
        state.bodies.append([])
        with self.var_table.with_frame():
            self.visit_body(body)
        stmts = state.bodies.pop()
        if any(isinstance(s, SparseIteration) for s in stmts):
            self.report_error(node, "a T.sp_iter cannot be nested in an if statement")
        branches.append(_seq(stmts))
    state.emit(tirx.IfThenElse(cond, branches[0], branches[1]))


def _seq(stmts: list):
    if not stmts:
        return None
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _unsupported(what: str):
    def visit(self: Parser, node) -> None:
        self.report_error(node, f"{what} is not supported in a sparse kernel")
    return visit


for _name, _what in (("For", "a for loop (use T.sp_iter)"), ("While", "a while loop"),
                     ("Return", "return"), ("AnnAssign", "an annotated assignment")):
    _handler(_name)(_unsupported(_what))
