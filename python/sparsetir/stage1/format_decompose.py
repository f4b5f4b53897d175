"""``format_decompose``: one kernel written over CSR, computed as a sum over other formats.

A ``FormatRewriteRule`` says how a buffer's axes (``axes_before_rewrite``, e.g. ``I, J``) map
to the axes of a new format (``axes_after_rewrite``, e.g. BSR's ``IO, JO, II, JI``), declared in
a small Stage I function ``new_format_desc``; ``inv_idx_map`` gives the old coordinates of a new
position and ``idx_map`` the new coordinates of an old one (checked to be inverses).

``format_decompose(func, rules)`` rewrites every iteration that reads a rewritten buffer:

* a ``<iteration>_init`` iteration runs the ``T.init`` once over the output;
* per rule, ``<iteration>_<rule>`` iterates the new axes (names suffixed ``_<rule>``) and adds
  its part into the output: its init is the identity (``C[..] = C[..]``), so TVM still sees a
  reduction, and positions whose old coordinates fall outside the old axes (padding of the
  last block) are masked;
* with ``include_format_rewrite_blks``, ``rewrite_<buffer>_<rule>`` iterations, annotated
  ``preprocess``, fill the new buffers from the old ones (a lookup per new position).
  ``remove_preprocess`` and ``extract_preprocess`` split them from the compute.

A rewritten buffer must be an input: a rule over a buffer the function writes is refused
(only its loads would move to the new format, ``C = C_new + A @ B``).

Padding never contributes. A padding slot gets 0, whoever fills the values: the conversion
routines of ``sparsetir.format`` write 0 there, and the preprocess writes each old element
once, so it stores 0 at a slot outside the old axes, at a slot the rule's ``mask`` marks 0,
and, for a rule without a mask (SparseTIR's ELL and padding rules), at every slot of an
innermost new sparse axis whose coordinate an earlier slot of its row already holds
(``first_slots``). Our routines pad a row with its last real column, so every padding slot
repeats one; SparseTIR's pad with column 0, which repeats the row's column 0 or names no
element at all (its lookup then reads 0). The compute then adds ``0 * B[col]``; with a mask it
skips the slot (``0 * inf`` included).

The new format's parameters are appended to the function's, suffixed ``_<rule>``.

Example
-------
The CSR matrix ``A`` of SpMM stored as BSR with 4 x 4 blocks (``stage1.bsr.bsr_rule`` makes
this rule for any block size):

>>> from sparsetir.script import tir as T
>>> from sparsetir.ir.visit import iterations
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> @T.prim_func
... def bsr_desc(a: T.handle, indptr: T.handle, indices: T.handle, mb: T.int32, nb: T.int32,
...              nnzb: T.int32):
...     IO = T.dense_fixed(mb)
...     JO = T.sparse_variable(IO, (nb, nnzb), (indptr, indices), "int32")
...     II = T.dense_fixed(4)
...     JI = T.dense_fixed(4)
...     A = T.match_sparse_buffer(a, (IO, JO, II, JI), "float32")
>>> rule = FormatRewriteRule("bsr", bsr_desc, ["A"], ["I", "J"], ["IO", "JO", "II", "JI"],
...     {"I": ["IO", "II"], "J": ["JO", "JI"]},
...     lambda i, j: (i // 4, j // 4, i % 4, j % 4),
...     lambda io, jo, ii, ji: (io * 4 + ii, jo * 4 + ji))
>>> decomposed = format_decompose(csrmm, [rule])
>>> [it.name for it in iterations(decomposed.body)]    # preprocess, zeroing, compute
['rewrite_A_bsr', 'spmm_init', 'spmm_bsr']
>>> [p.name for p in decomposed.params][-6:]
['a_bsr', 'indptr_bsr', 'indices_bsr', 'mb_bsr', 'nb_bsr', 'nnzb_bsr']
>>> [it.name for it in iterations(remove_preprocess(decomposed).body)]
['spmm_init', 'spmm_bsr']
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.axis import Axis
from ..ir.buffer import SparseBuffer
from ..ir.attrs import FIRST_SLOTS_ANNOTATION, PREPROCESS_ANNOTATION
from ..ir.function import SparseFunction
from ..ir.iteration import SparseIteration, SpIterVar
from ..ir.node import replace
from ..ir.substitute import Substituter
from ..ir.utils import added_value, structural_map, substitute, uses_var
from ..ir.visit import iterations, tir_stmts
from ..errors import FormatRewriteError, SparseTIRTypeError




@dataclass
class FormatRewriteRule:
    """How to store a buffer in another format (see the module docstring).

    Attributes
    ----------
    name : str
        Suffix of everything the rule adds (``A_bsr``, ``IO_bsr``, ``csrmm_bsr``).
    new_format_desc : SparseFunction
        Declares the new axes and buffers (bodyless); its parameters become new parameters.
    buffers_to_rewrite : list of str
        Buffers of the function stored in the new format (same names in the description).
    axes_before_rewrite, axes_after_rewrite : list of str
        The rewritten buffer's axes, and the new format's axes in iteration order.
    axis_map : dict
        Each old axis name -> the new axes that take its place.
    idx_map, inv_idx_map : callable
        Old coordinates -> new ones, and new coordinates -> old ones.
    shared_params : dict
        Scalar parameters of the description that are the function's own (description name ->
        function parameter name), e.g. ``{"m": "m"}`` when the new format has the same rows:
        no new parameter is added, and coordinates proven inside the old axes are neither
        clamped nor masked.
    mask : str or None
        A buffer of the description over the new axes (int8) whose 0 entries are padding
        (ELL rows shorter than their width): the decomposed kernel skips them.
    """

    name: str
    new_format_desc: SparseFunction
    buffers_to_rewrite: list
    axes_before_rewrite: list
    axes_after_rewrite: list
    axis_map: dict
    idx_map: Callable
    inv_idx_map: Callable
    shared_params: dict = field(default_factory=dict)
    mask: str | None = None


def format_decompose(func: SparseFunction, rules: list,
                     include_format_rewrite_blks: bool = True) -> SparseFunction:
    """``func`` computed as the sum of one kernel per rule (see the module docstring)."""
    if not isinstance(func, SparseFunction):
        raise SparseTIRTypeError(f"format_decompose takes a SparseFunction, got {type(func).__name__}")
    if not isinstance(rules, (list, tuple)) or \
            not all(isinstance(rule, FormatRewriteRule) for rule in rules):
        raise SparseTIRTypeError("format_decompose takes rules as a list of FormatRewriteRule, "
                                 f"got {type(rules).__name__}" + (
                                     "" if not isinstance(rules, (list, tuple)) else " holding "
                                     + ", ".join(sorted({type(r).__name__ for r in rules}))))
    if not rules:
        raise FormatRewriteError("format_decompose needs at least one FormatRewriteRule")
    formats = [_NewFormat(func, rule) for rule in rules]
    body, rewrites = [], []
    for stmt in func.body:
        if isinstance(stmt, SparseIteration) and _reads_rewritten(stmt, formats):
            body += _decomposed(stmt, formats)
        else:
            body.append(stmt)
    if include_format_rewrite_blks:
        for fmt in formats:
            rewrites += fmt.rewrite_iterations()
    params = list(func.params) + [p for fmt in formats for p in fmt.params]
    axes = list(func.axes) + [a for fmt in formats for a in fmt.axes.values()]
    buffers = list(func.buffers) + [b for fmt in formats for b in fmt.buffers.values()]
    return replace(func, params=params, axes=axes, buffers=buffers, body=rewrites + body)


def remove_preprocess(func: SparseFunction) -> SparseFunction:
    """``func`` without its ``preprocess`` iterations (the compute alone)."""
    return _filtered(func, keep_preprocess=False)


def extract_preprocess(func: SparseFunction) -> SparseFunction:
    """Only the ``preprocess`` iterations of ``func`` (the format conversion alone)."""
    return _filtered(func, keep_preprocess=True)


def _filtered(func, keep_preprocess: bool) -> SparseFunction:
    body = [s for s in func.body if not isinstance(s, SparseIteration)
            or (PREPROCESS_ANNOTATION in s.annotations) == keep_preprocess]
    return replace(func, body=body)


class _NewFormat:
    """A rule's description, renamed for the function and checked against it."""

    def __init__(self, func: SparseFunction, rule: FormatRewriteRule):
        self.func, self.rule = func, rule
        desc = rule.new_format_desc
        suffix = f"_{rule.name}"
        renamed = {p: self._shared_param(p) if p.name in rule.shared_params
                   else tirx.Var(p.name + suffix, p.ty) for p in desc.params}
        self.params = [renamed[p] for p in desc.params if p.name not in rule.shared_params]
        renamer = Substituter(renamed)
        self.axes = {}
        for axis in desc.axes:
            self.axes[axis.name] = _renamed_axis(renamer.axis(axis), suffix, self.axes, renamed)
        self.buffers = {}
        for buf in desc.buffers:
            if buf.name not in rule.buffers_to_rewrite and buf.name != rule.mask:
                continue
            self.buffers[buf.name] = SparseBuffer.create(
                buf.name + suffix, [self.axes[a.name] for a in buf.axes], buf.dtype,
                handle=renamer.expr(buf.handle) if buf.handle is not None else None)
        self._check()

    def _shared_param(self, param) -> tirx.Var:
        name = self.rule.shared_params[param.name]
        try:
            own = self.func.get_param(name)
        except KeyError:
            raise FormatRewriteError(f"FormatRewriteRule {self.rule.name!r}: shared_params maps "
                                     f"{param.name} to {name}, which the function does not "
                                     "have") from None
        if str(own.ty) != str(param.ty) or isinstance(own.ty, tvm.ir.PointerType):
            raise FormatRewriteError(f"FormatRewriteRule {self.rule.name!r}: shared_params may "
                                     f"only share scalars of one type ({param.name}: "
                                     f"{param.ty}, {name}: {own.ty})")
        return own

    def _check(self) -> None:
        rule, func = self.rule, self.func
        where = f"FormatRewriteRule {rule.name!r}"
        for name in rule.buffers_to_rewrite:
            old = next((b for b in func.buffers if b.name == name), None)
            if old is None or name not in self.buffers:
                raise FormatRewriteError(f"{where}: buffer {name} must exist in the function "
                                         "and in new_format_desc")
            writer = _writer(func.body, old.view)
            if writer is not None:
                raise FormatRewriteError(f"{where}: buffer {name} is written by iteration "
                                         f"{writer}; format_decompose rewrites only buffers "
                                         "the kernel reads (their new format is an input)")
            if [a.name for a in old.axes] != list(rule.axes_before_rewrite):
                raise FormatRewriteError(f"{where}: {name}'s axes are "
                                         f"{[a.name for a in old.axes]}, not "
                                         f"axes_before_rewrite {rule.axes_before_rewrite}")
        if rule.mask is not None and (rule.mask not in self.buffers or [
                a.name for a in self.buffers[rule.mask].axes] != [
                self.axes[a].name for a in rule.axes_after_rewrite]):
            raise FormatRewriteError(f"{where}: mask {rule.mask} must be a buffer of "
                                     f"new_format_desc over {rule.axes_after_rewrite}")
        missing = [a for a in rule.axes_after_rewrite if a not in self.axes]
        if missing:
            raise FormatRewriteError(f"{where}: new_format_desc has no axis {missing[0]}")
        mapped = [a for old in rule.axes_before_rewrite for a in rule.axis_map.get(old, [])]
        if sorted(rule.axis_map) != sorted(rule.axes_before_rewrite) \
                or sorted(mapped) != sorted(rule.axes_after_rewrite):
            raise FormatRewriteError(f"{where}: axis_map must send each of "
                                     f"{rule.axes_before_rewrite} to new axes, covering "
                                     f"{rule.axes_after_rewrite} once")
        for fn, count in ((rule.idx_map, len(rule.axes_before_rewrite)),
                          (rule.inv_idx_map, len(rule.axes_after_rewrite))):
            if len(inspect.signature(fn).parameters) != count:
                raise FormatRewriteError(f"{where}: {fn} must take {count} coordinates")
        self._check_inverse()

    def _check_inverse(self) -> None:
        """idx_map(inv_idx_map(new)) == new for every new coordinate in range.

        The coordinate of an axis above a sparse axis (a row tile above the rows it holds)
        may be fixed by the sparse axis's data instead: idx_map then gives a placeholder that
        does not read it, and the check leaves that coordinate to the conversion routine.
        """
        analyzer = tvm.sym.Analyzer()
        names = self.rule.axes_after_rewrite
        new = [tirx.Var(a.lower(), "int32") for a in names]
        for var, name in zip(new, names):
            analyzer.bind(var, tvm.ir.Range.from_min_extent(0, self.axes[name].length))
        back = self.rule.idx_map(*self.rule.inv_idx_map(*new))
        data_fixed = {key for key, axis in self.axes.items()
                      if any(c.is_sparse and c.parent.name == axis.name
                             for c in self.axes.values())}
        for var, value, name in zip(new, back, names):
            if name in data_fixed and not uses_var(value, var):
                continue
            if not analyzer.can_prove(value == var):
                raise FormatRewriteError(f"FormatRewriteRule {self.rule.name!r}: idx_map is not "
                                         f"the inverse of inv_idx_map ({var} -> {value})")

    def old_coordinates(self, new_coords: list) -> list:
        """The old coordinates of a new position, clamped into the old axes, and whether they
        lie inside them (False on the padding of a last block); a coordinate proven inside
        from the new axes' ranges is left as it is."""
        analyzer = tvm.sym.Analyzer()
        for var, name in zip(new_coords, self.rule.axes_after_rewrite):
            analyzer.bind(var, tvm.ir.Range.from_min_extent(0, self.axes[name].length))
        old_axes = [self.func.get_axis(a) for a in self.rule.axes_before_rewrite]
        coords = list(self.rule.inv_idx_map(*new_coords))
        clamped, conditions = [], []
        for coord, axis in zip(coords, old_axes):
            if analyzer.can_prove(coord < axis.length):
                clamped.append(coord)
            else:
                clamped.append(tirx.min(coord, axis.length - 1))
                conditions.append(coord < axis.length)
        return clamped, conditions

    def padding_mask(self, new_vars: dict) -> list:
        """The rule's mask test at a new position (empty without a mask)."""
        if self.rule.mask is None:
            return []
        mask = self.buffers[self.rule.mask]
        coords = [new_vars[a.name[:-len(self.rule.name) - 1]] for a in mask.axes]
        return [mask[coords] != tirx.const(0, mask.dtype)]

    def rewrite_iterations(self) -> list:
        """``rewrite_<buffer>_<rule>``: fill each new buffer from the old one.

        Each old element is written once, so that padding never adds anything: a slot outside
        the old axes, masked off, or (without a mask) repeating a coordinate an earlier slot
        of its row holds on an innermost sparse axis (``first_slots``) gets 0.
        """
        out = []
        for name in self.rule.buffers_to_rewrite:
            new_buf = self.buffers[name]
            old = self.func.get_buffer(name)
            sp_vars = [SpIterVar(var=tirx.Var(a.lower(), "int32"), axis=self.axes[a],
                                 is_reduction=False, fused=None)
                       for a in self.rule.axes_after_rewrite]
            by_axis = {a: v.var for a, v in zip(self.rule.axes_after_rewrite, sp_vars)}
            clamped, inside = self.old_coordinates([by_axis[a] for a in
                                                    self.rule.axes_after_rewrite])
            inside += self.padding_mask(by_axis)
            value = old[clamped]
            if inside:
                value = tirx.Select(tirx.all(*inside), value, tirx.const(0, old.dtype))
            store = tirx.BufferStore(new_buf.view, value,
                                     [by_axis[a.name[:-len(self.rule.name) - 1]]
                                      for a in new_buf.axes])
            annotations = {PREPROCESS_ANNOTATION: 1}
            if self.rule.mask is None:
                annotations[FIRST_SLOTS_ANNOTATION] = [by_axis[a].name
                                                       for a in self._innermost_sparse()]
            out.append(SparseIteration(name=f"rewrite_{name}_{self.rule.name}",
                                       sp_iter_vars=sp_vars, body=[store], init=None,
                                       annotations=annotations))
        return out

    def _innermost_sparse(self) -> list:
        """The new sparse axes (rule names) no other new sparse axis has as its parent: the
        axes whose rows a padded format pads (ELL columns, not the rows of an ELL bucket,
        which may repeat a row cut into pieces)."""
        axes = self.rule.axes_after_rewrite
        parents = {self.axes[a].parent.name for a in axes
                   if self.axes[a].is_sparse and self.axes[a].parent is not None}
        return [a for a in axes if self.axes[a].is_sparse and self.axes[a].name not in parents]


def _writer(body, view):
    """The name of the first iteration in ``body`` (nested ones included) whose own
    statements store into ``view``, or None."""
    for it in iterations(body):
        stores = []
        for part in [s for s in list(it.body) + list(it.init or [])
                     if not isinstance(s, SparseIteration)]:
            tvm_ffi.structural_walk(part, (tirx.BufferStore, lambda st: stores.append(st)
                                           if st.buffer.same_as(view) else None), order="pre")
        if stores:
            return it.name
    return None


def _renamed_axis(axis: Axis, suffix: str, done: dict, handles: dict) -> Axis:
    parent = done[axis.parent.name] if axis.parent is not None else None
    return replace(axis, name=axis.name + suffix, parent=parent,
                   indptr=handles.get(axis.indptr, axis.indptr),
                   indices=handles.get(axis.indices, axis.indices))


def _reads_rewritten(it: SparseIteration, formats: list) -> bool:
    views = {f.func.get_buffer(n).view for f in formats for n in f.rule.buffers_to_rewrite}
    found = []
    for stmt in tir_stmts(it):
        tvm_ffi.structural_walk(stmt, (tvm.ir.TensorLoad, lambda load: found.append(load)
                                       if load.source in views else None), order="pre")
    return bool(found)


def _decomposed(it: SparseIteration, formats: list) -> list:
    out = []
    if it.init is not None:
        out.append(_init_iteration(it))
    for fmt in formats:
        out.append(_rule_iteration(it, fmt))
    _check_sum_of_parts(it, formats)   # after the rule's own checks, whose errors say more
    return out


def _check_sum_of_parts(it: SparseIteration, formats: list) -> None:
    """Refuse an iteration that is not a sum over the rewritten buffers' elements.

    The decomposed kernel runs each statement once per part and at padding slots, which hold
    0: that is right only where each statement adds into its target a term that is 0 when the
    rewritten element is (``C[..] = C[..] + A[..] * ...``). A max, a store of its own
    (``B[i, j] = A[i, j] * 2``), a term such as ``exp(A[..])`` or one that does not read a
    rewritten buffer would take padding into account.

    Example
    -------
    ``C[i, k] = C[i, k] + A[i, j] * B[j, k]`` is decomposed (SpMM); a row maximum is not:

    >>> from sparsetir.script import tir as T
    >>> from sparsetir.stage1.bsr import bsr_rule
    >>> @T.prim_func
    ... def rowmax(a: T.handle, c: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
    ...            n: T.int32, nnz: T.int32):
    ...     I = T.dense_fixed(m)
    ...     J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    ...     A = T.match_sparse_buffer(a, (I, J), "float32")
    ...     C = T.match_sparse_buffer(c, (I,), "float32")
    ...     with T.sp_iter([I, J], "SR", "rowmax") as [i, j]:
    ...         with T.init():
    ...             C[i] = T.float32(0.0)
    ...         C[i] = T.max(C[i], A[i, j])
    >>> format_decompose(rowmax, [bsr_rule("bsr", 4)])
    Traceback (most recent call last):
    ...
    sparsetir.errors.FormatRewriteError: iteration rowmax cannot be decomposed: ... C[i] = T.max(C[i], A[i, j]) is not
    """
    rewritten = list(dict.fromkeys(n for f in formats for n in f.rule.buffers_to_rewrite))
    views = [f.func.get_buffer(n).view for f in formats for n in f.rule.buffers_to_rewrite]
    stores = []
    for stmt in it.body:
        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, stores.append), order="pre")
    for store in stores:
        term = added_value(store)
        if term is None or not _vanishes(term, views) \
                or any(_reads(index, views) for index in store.indices):
            raise FormatRewriteError(
                f"iteration {it.name} cannot be decomposed: format_decompose computes it as a "
                f"sum of one part per format, whose padding slots hold 0, so each statement must "
                f"add to its target a term that is 0 where {', '.join(rewritten)} is 0 "
                f"(C[..] = C[..] + {rewritten[0]}[..] * ...); "
                f"{store.buffer.name}[{', '.join(map(str, store.indices))}] = {store.value} "
                "is not")


ZERO_AT_ZERO = ("tirx.fabs", "tirx.sqrt", "tirx.tanh", "tirx.sin", "tirx.tan", "tirx.asin",
                "tirx.atan", "tirx.sinh", "tirx.erf", "tirx.trunc", "tirx.round",
                "tirx.nearbyint", "tirx.log1p")
"""Calls whose value at 0 is 0: a term ``f(A[..])`` of one of them vanishes with ``A[..]``."""


def _vanishes(expr, views) -> bool:
    """Whether ``expr`` is 0 wherever the loads of ``views`` in it are 0 (padding slots):
    such a load, the constant 0, a product of one with a factor that stays finite there
    (``_finite``: not ``A * log(A)`` or ``A * (1 / A)``, NaN at 0), a sum, difference, min,
    max (a ReLU ``max(A, 0)``), cast, or choice (``Select``, ``if_then_else``) of such terms,
    one of ``ZERO_AT_ZERO`` of one, a power of one to a positive constant, or one divided by a
    nonzero constant (a division by data could meet 0 at a padding slot: 0 / 0). A factor
    read from another buffer counts as finite: ``0 * X[col]`` with an infinite ``X[col]`` is
    the padding's known NaN (see the module docstring)."""
    def vanishes(e):
        return _vanishes(e, views)

    def nonzero_constant(e):
        return isinstance(e, (tirx.IntImm, tirx.FloatImm)) and e.value != 0

    if isinstance(expr, tvm.ir.TensorLoad):
        return any(expr.source.same_as(v) for v in views)
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return expr.value == 0
    if isinstance(expr, tirx.Mul):
        return (vanishes(expr.a) and _finite(expr.b)) or (vanishes(expr.b) and _finite(expr.a))
    if isinstance(expr, (tirx.Div, tirx.FloorDiv)):
        return vanishes(expr.a) and nonzero_constant(expr.b)
    if isinstance(expr, tirx.Cast):
        return vanishes(expr.value)
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Min, tirx.Max)):
        return vanishes(expr.a) and vanishes(expr.b)
    if isinstance(expr, tirx.Select):
        return vanishes(expr.true_value) and vanishes(expr.false_value)
    if isinstance(expr, tvm.ir.Call):
        name, args = str(expr.op.name) if hasattr(expr.op, "name") else "", list(expr.args)
        if name.endswith(".if_then_else"):
            return vanishes(args[1]) and vanishes(args[2])
        if name == "tirx.pow":
            return vanishes(args[0]) and isinstance(args[1], (tirx.IntImm, tirx.FloatImm)) \
                and args[1].value > 0
        return name in ZERO_AT_ZERO and len(args) == 1 and vanishes(args[0])
    return False


FINITE_CALLS = ZERO_AT_ZERO + ("tirx.exp", "tirx.cos", "tirx.cosh", "tirx.sigmoid",
                              "tirx.floor", "tirx.ceil", "tirx.atan2")
"""Calls that give a finite value for every finite argument (exp: short of overflow)."""


def _finite(expr) -> bool:
    """Whether ``expr`` stays finite where its operands are finite, whatever they are (0 at a
    padding slot included): no division by data, logarithm, inverse root or negative power."""
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return math.isfinite(expr.value)
    if isinstance(expr, (tvm.ir.TensorLoad, tirx.Var)):
        return True
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max)):
        return _finite(expr.a) and _finite(expr.b)
    if isinstance(expr, (tirx.Div, tirx.FloorDiv)):
        return _finite(expr.a) and isinstance(expr.b, (tirx.IntImm, tirx.FloatImm)) \
            and expr.b.value != 0
    if isinstance(expr, tirx.Cast):
        return _finite(expr.value)
    if isinstance(expr, tirx.Select):
        return _finite(expr.true_value) and _finite(expr.false_value)
    if isinstance(expr, tvm.ir.Call):
        name, args = str(getattr(expr.op, "name", "")), list(expr.args)
        if name.endswith(".if_then_else"):
            return _finite(args[1]) and _finite(args[2])
        if name == "tirx.pow":
            return _finite(args[0]) and isinstance(args[1], (tirx.IntImm, tirx.FloatImm)) \
                and args[1].value >= 0
        return name in FINITE_CALLS and all(_finite(a) for a in args)
    return False


def _reads(expr, views) -> bool:
    """Whether ``expr`` loads from any of the buffer ``views``."""
    found = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(load)
                                   if any(load.source.same_as(v) for v in views) else None),
                            order="pre")
    return bool(found)


def _init_iteration(it: SparseIteration) -> SparseIteration:
    spatial = [v for v in it.sp_iter_vars if not v.is_reduction]
    fresh = {v.var: tirx.Var(v.var.name, "int32") for v in spatial}
    sp_vars = [replace(v, var=fresh[v.var]) for v in spatial]
    body = [substitute(s, fresh) for s in it.init]
    return SparseIteration(name=f"{it.name}_init", sp_iter_vars=sp_vars, body=body, init=None,
                           annotations={})


def _rule_iteration(it: SparseIteration, fmt: _NewFormat) -> SparseIteration:
    rule = fmt.rule
    old_vars = [v for v in it.sp_iter_vars if v.base_axis.name in rule.axes_before_rewrite]
    if sorted(v.base_axis.name for v in old_vars) != sorted(rule.axes_before_rewrite) \
            or any(v.fused is not None for v in old_vars):
        raise FormatRewriteError(f"iteration {it.name} reads a buffer of rule {rule.name!r} but "
                                 f"does not iterate its axes {rule.axes_before_rewrite} one by one")
    kind_of = {new: v.is_reduction for v in old_vars
               for new in rule.axis_map[v.base_axis.name]}
    new_vars = {a: SpIterVar(var=tirx.Var(a.lower(), "int32"), axis=fmt.axes[a],
                             is_reduction=kind_of[a], fused=None)
                for a in rule.axes_after_rewrite}
    first = next(n for n, v in enumerate(it.sp_iter_vars) if v in old_vars)
    # the other variables are bound afresh: each sub-iteration defines its own
    fresh = {v.var: tirx.Var(v.var.name, v.var.ty) for v in it.sp_iter_vars
             if v not in old_vars}
    kept = [replace(v, var=fresh[v.var]) for v in it.sp_iter_vars if v not in old_vars]
    sp_vars = kept[:first] + list(new_vars.values()) + kept[first:]
    clamped, inside = fmt.old_coordinates([new_vars[a].var for a in rule.axes_after_rewrite])
    inside += fmt.padding_mask({a: v.var for a, v in new_vars.items()})
    coord_of = {v.base_axis.name: c for v, c in zip(
        [next(v for v in old_vars if v.base_axis.name == a) for a in rule.axes_before_rewrite],
        clamped)}
    var_map = {v.var: coord_of[v.base_axis.name] for v in old_vars}
    var_map.update(fresh)
    rewritten = {fmt.func.get_buffer(n).view: fmt.buffers[n] for n in rule.buffers_to_rewrite}
    order = {a: new_vars[a].var for a in rule.axes_after_rewrite}
    body = [_rebound(s, var_map, rewritten, order, rule.name) for s in it.body]
    if inside:
        body = [tirx.IfThenElse(tirx.all(*inside), s, None) for s in body]
    init = None
    if it.init is not None:   # identity: the part adds into what the output holds
        init = [_identity(_rebound(s, var_map, rewritten, order, rule.name)) for s in it.init]
    return replace(it, name=f"{it.name}_{rule.name}", sp_iter_vars=sp_vars, body=body,
                   init=init)


def _rebound(stmt, var_map, rewritten, order, rule_name):
    """``stmt`` with old iteration variables replaced by old coordinates and the rewritten
    buffers read at the new positions."""

    def on_load(load):
        new = rewritten.get(load.source)
        if new is None:
            return load
        return tirx.BufferLoad(new.view, [order[a.name[:-len(rule_name) - 1]]
                                          for a in new.axes])

    swapped = structural_map(stmt, (tvm.ir.TensorLoad, on_load), order="post")
    return substitute(swapped, var_map)


def _identity(store):
    if not isinstance(store, tirx.BufferStore):
        raise FormatRewriteError("a decomposed T.init must be a single store")
    return tirx.BufferStore(store.buffer, tirx.BufferLoad(store.buffer, list(store.indices)),
                            list(store.indices))
