"""``sparsetir.Schedule``: schedule primitives on Stage I sparse iterations.

Named after TVM's ``tvm.s_tir.Schedule`` and SparseTIR's Stage I schedule. It holds a
``SparseFunction`` and replaces it with a rebuilt one at every primitive; ``sch.func`` is the
result, which ``lower_sparse_iter``, ``build`` and ``format_decompose`` take. Every primitive
checks its arguments first and raises ``SparseScheduleError`` naming what is wrong; a refused
primitive leaves the function as it was.

- ``get_sparse_iteration(name)``: a handle to the iteration of that name (nested ones
  included; a ``SparseFunction`` refuses two iterations of one name), SparseTIR's random
  variable: it stays valid across primitives, ``sch.get(rv)`` is
  the iteration as it is now, and the handle reads the current iteration's attributes itself
  (``rv.name``, ``rv.annotations``, ``rv.kinds``...).
- ``get(rv)``: the current ``SparseIteration`` behind a handle.
- ``get_sp_iters(it)``: its iteration variables, outermost first.
- ``sparse_reorder(it, new_order)``: iterate the variables in another order (an axis's parent,
  when iterated here, must stay before it).
- ``sparse_fuse(it, iters)``: iterate a contiguous parent chain as one loop over the positions
  of its innermost axis (what ``T.fuse`` writes).
- ``annotate(it, key, value)``: an annotation of the iteration (its first block after lowering);
  a value a TVM annotation cannot hold raises ``TypeError`` naming the key and the type.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def sddmm(x: T.handle, y: T.handle, out: T.handle, indptr: T.handle, indices: T.handle,
...           m: T.int32, n: T.int32, nnz: T.int32):
...     I = T.dense_fixed(m)
...     J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
...     J_detach = T.dense_fixed(n)
...     K = T.dense_fixed(16)
...     X = T.match_sparse_buffer(x, (I, K), "float32")
...     Y = T.match_sparse_buffer(y, (J_detach, K), "float32")
...     OUT = T.match_sparse_buffer(out, (I, J), "float32")
...     with T.sp_iter([I, J, K], "SSR", "sddmm") as [i, j, k]:
...         with T.init():
...             OUT[i, j] = T.float32(0.0)
...         OUT[i, j] = OUT[i, j] + X[i, k] * Y[j, k]
>>> sch = sparsetir.Schedule(sddmm, debug_mask="all")   # debug_mask: SparseTIR's, accepted
>>> it = sch.get_sparse_iteration("sddmm")
>>> i, j, k = sch.get_sp_iters(it)
>>> sch.sparse_fuse(it, [i, j])
>>> sch.get(it).sp_iter_vars[0].fused is not None       # the handle follows the change
True
>>> "T.sp_iter([T.fuse(I, J), K]" in sch.func.script()
True
>>> kernel = sparsetir.build(sch.func, "llvm", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> rng = np.random.default_rng(0)
>>> X, Y = rng.random((6, 16), np.float32), rng.random((5, 16), np.float32)
>>> out = np.zeros(A.nnz, np.float32)
>>> kernel(X, Y, out, A.indptr, A.indices, 6, 5, A.nnz)
>>> rows = np.repeat(np.arange(6), np.diff(A.indptr))
>>> np.allclose(out, (X[rows] * Y[A.indices]).sum(axis=1))
True
"""

from __future__ import annotations

import numpy as np
import tvm

from ..ir.axis import AttachedAxis, FusedAxis, check_fused_group
from ..ir.function import SparseFunction
from ..ir.iteration import SparseIteration, SpIterVar
from ..ir.node import replace
from ..ir.visit import iterations, map_iterations
from ..errors import SparseScheduleError, SparseTIRTypeError, SparseTIRValueError


class SparseIterationRV:
    """A handle to the sparse iteration ``name`` of a ``Schedule`` (SparseTIR's
    ``SparseIterationRV``): ``sch.get(rv)`` is the iteration as the primitives have left it,
    and any other attribute is read from that iteration (``rv.annotations``, ``rv.kinds``).

    >>> from sparsetir.ops.kernels import spmm
    >>> sch = Schedule(spmm)
    >>> rv = sch.get_sparse_iteration("spmm"); sch.annotate(rv, "guard", True)
    >>> bool(sch.get(rv).annotations["guard"]), rv.kinds
    (True, 'SRS')
    """

    def __init__(self, sch: "Schedule", name: str):
        self._sch = sch
        self.name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._sch.get(self), attr)

    def __repr__(self) -> str:
        return f"SparseIterationRV({self.name!r})"


DEBUG_MASKS = ("none", "all")
"""The named ``debug_mask`` values SparseTIR's ``Schedule`` takes (an int is its bit set)."""


class Schedule:
    """Stage I schedule of one ``SparseFunction`` (see the module docstring).

    Parameters
    ----------
    func : SparseFunction
        The function to schedule; it is not modified (``sch.func`` is the new one).
    debug_mask : str or int
        SparseTIR's verification switch: ``"none"``, ``"all"`` or a non-negative int of mask
        bits. Accepted for compatibility; every primitive here checks its arguments and
        validates the nodes it builds whatever the mask says.
    """

    def __init__(self, func: SparseFunction, *, debug_mask="none"):
        if not isinstance(func, SparseFunction):
            raise SparseTIRTypeError(f"sparsetir.Schedule takes a SparseFunction, got "
                            f"{type(func).__name__}")
        if isinstance(debug_mask, bool) or not (
                debug_mask in DEBUG_MASKS if isinstance(debug_mask, str)
                else isinstance(debug_mask, (int, np.integer)) and debug_mask >= 0):
            raise SparseTIRValueError(f"sparsetir.Schedule: debug_mask must be one of "
                                      f"{', '.join(map(repr, DEBUG_MASKS))} or a non-negative "
                                      f"int, got {debug_mask!r}")
        self._func = func

    @property
    def func(self) -> SparseFunction:
        """The function with every primitive applied so far."""
        return self._func

    def get_sparse_iteration(self, name: str) -> SparseIterationRV:
        """A handle to the sparse iteration called ``name``."""
        return SparseIterationRV(self, self._lookup(name).name)

    def get(self, rv) -> SparseIteration:
        """The sparse iteration behind ``rv`` (a handle, an iteration or a name), as it is now."""
        return self._current(rv)

    def get_sp_iters(self, it) -> list:
        """The iteration variables of ``it`` (a handle, an iteration or its name), outermost
        first."""
        return list(self._current(it).sp_iter_vars)

    def sparse_reorder(self, it, new_order: list) -> None:
        """Iterate the variables of ``it`` in ``new_order`` (a permutation of them)."""
        it = self._current(it)
        positions = [self._position(it, v, "sparse_reorder") for v in new_order]
        own = list(it.sp_iter_vars)
        order = [own[p] for p in positions]
        if len(order) != len(own) or len(set(positions)) != len(positions):
            raise SparseScheduleError(
                f"sparse_reorder({it.name}): the new order must name each of its "
                f"{len(it.sp_iter_vars)} variables ({_var_names(it.sp_iter_vars)}) once, got "
                f"{_var_names(order)}")
        for position, var in enumerate(order):
            parent = _parent_name(var)
            earlier = {_axis_name(v) for v in order[:position]}
            iterated = {_axis_name(v) for v in order}
            if parent is not None and parent in iterated and parent not in earlier:
                raise SparseScheduleError(
                    f"sparse_reorder({it.name}): {var.var.name} iterates {var.base_axis.name}, "
                    f"whose parent {parent} is iterated after it; keep the parent first")
        try:
            reordered = replace(it, sp_iter_vars=order)
        except ValueError as err:     # a fused group split or reordered
            raise SparseScheduleError(f"sparse_reorder({it.name}): {err}") from None
        self._replace(it, reordered)

    def sparse_fuse(self, it, iters: list) -> None:
        """Iterate ``iters`` (a contiguous parent chain of ``it``) as one loop."""
        it = self._current(it)
        positions = [self._position(it, v, "sparse_fuse") for v in iters]
        own = list(it.sp_iter_vars)
        group = [own[p] for p in positions]
        where = f"sparse_fuse({it.name}, [{_var_names(group)}])"
        if positions and positions != list(range(positions[0], positions[0] + len(group))):
            raise SparseScheduleError(f"{where}: the variables must be contiguous, in order")
        if any(v.fused is not None or isinstance(v.axis, AttachedAxis) for v in group):
            raise SparseScheduleError(f"{where}: a variable is already fused or attached")
        try:
            check_fused_group([v.base_axis for v in group], [v.is_reduction for v in group])
        except ValueError as err:
            raise SparseScheduleError(f"{where}: {err}") from None
        fused = FusedAxis(group=[v.base_axis for v in group])
        new_vars = [replace(v, fused=fused) if n in positions else v for n, v in enumerate(own)]
        self._replace(it, replace(it, sp_iter_vars=new_vars))

    def annotate(self, it, key: str, value) -> None:
        """Set annotation ``key`` of ``it`` to ``value``: what a TVM block annotation holds,
        a bool, an int (64-bit), a float, a str, a ``tvm.tirx`` expression, or a list, tuple or
        dict (str or int keys) of those; anything else raises ``TypeError`` naming the key."""
        it = self._current(it)
        if not isinstance(key, str) or not key:
            raise SparseScheduleError(f"annotate({it.name}): the key must be a non-empty string")
        problem = _unstorable(value)
        if problem is not None:
            raise SparseTIRTypeError(f"annotate({it.name}, {key!r}): a block annotation cannot hold "
                            f"{problem}; give a bool, int, float, str, tirx expression, or a "
                            "list or dict of those")
        annotations = dict(it.annotations)
        annotations[key] = _plain(value)
        self._replace(it, replace(it, annotations=annotations))

    # -- helpers -------------------------------------------------------------------------------
    def _current(self, it) -> SparseIteration:
        if isinstance(it, (SparseIterationRV, SparseIteration)):
            return self._lookup(it.name)
        if isinstance(it, str):
            return self._lookup(it)
        raise SparseScheduleError(f"expected a sparse iteration, its handle or its name, got "
                                  f"{it!r}")

    def _lookup(self, name: str) -> SparseIteration:
        found = next((it for it in iterations(self._func.body) if it.name == name), None)
        if found is None:
            names = ", ".join(it.name for it in iterations(self._func.body)) or "none"
            raise SparseScheduleError(f"no sparse iteration {name!r} (iterations: {names})")
        return found

    @staticmethod
    def _position(it, var, primitive: str) -> int:
        """Where ``var`` (a variable of ``it``, or its name) stands in ``it``."""
        for n, own in enumerate(it.sp_iter_vars):
            if own.same_as(var) or (isinstance(var, str) and own.var.name == var):
                return n
        shown = var.var.name if isinstance(var, SpIterVar) else var
        raise SparseScheduleError(f"{primitive}({it.name}): {shown} is not a variable of the "
                                  f"iteration ({_var_names(it.sp_iter_vars)})")

    def _replace(self, old: SparseIteration, new: SparseIteration) -> None:
        body = map_iterations(self._func.body, lambda it: new if it.name == old.name else it)
        self._func = replace(self._func, body=body)


_INT64 = (-2 ** 63, 2 ** 63)


_MAX_DEPTH = 32
"""How deeply lists and dicts may nest in an annotation (a cyclic one never ends)."""


def _unstorable(value, where: str = "the value", depth: int = 0):
    """None when TVM can hold ``value`` as an annotation, else what is wrong, naming the
    offending part and its type."""
    if depth > _MAX_DEPTH:
        return f"{where} (lists or dicts nested more than {_MAX_DEPTH} deep, or cyclic)"
    if isinstance(value, (bool, np.bool_, str, float, np.floating, tvm.ir.Expr)):
        return None
    if isinstance(value, (int, np.integer)):
        if _INT64[0] <= int(value) < _INT64[1]:
            return None
        return f"{where} {value} (int past 64 bits)"
    if isinstance(value, (list, tuple)):
        return next((p for n, item in enumerate(value)
                     if (p := _unstorable(item, f"{where}[{n}]", depth + 1)) is not None),
                    None)
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, (str, int, np.integer)) or isinstance(k, bool):
                return f"the key {k!r} of {where} (type {type(k).__name__})"
            problem = _unstorable(item, f"{where}[{k!r}]", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where} of type {type(value).__name__}"


def _plain(value):
    """``value`` with numpy scalars as Python ones (TVM holds those)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def _axis_name(var: SpIterVar) -> str:
    return var.base_axis.name


def _parent_name(var: SpIterVar):
    if isinstance(var.axis, AttachedAxis):
        return var.axis.new_parent.name
    parent = var.base_axis.parent
    return None if parent is None else parent.name


def _var_names(sp_iter_vars) -> str:
    return ", ".join(v.var.name for v in sp_iter_vars)
