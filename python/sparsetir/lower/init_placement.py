"""Where a ``T.init`` runs: natively in the first reduction block, or in a nest of its own.

TVM runs a block's native init once per value of the spatial variables around it, at the
first value of the block's reduction variables. That is once per output element only when
every spatial variable of the iteration indexes the output directly (``C[i, k]`` in csrmm) and
no spatial loop sits below a reduction loop. Otherwise the native init would run again for an
element already accumulated into (rgcn_hetero_forward's ``Y[i, fo]`` under a spatial relation
``r``: a node that is a destination under two relations), or could not be placed at all
(SparseTIR's reordered BSR SpMM, ``[BI, BJ, I, J, F]``: ``f`` under the reduction ``j``).

For those, :func:`split_init` makes the init a nest of its own, ``<iteration>_init``, run
before the iteration, whose update then adds into what the output holds (its native init
becomes ``Y[i, fo] = Y[i, fo]``, so TVM still sees a reduction block; it is removed before
compiling). The nest iterates the output buffer's axes when the init stores to it with one
iteration variable per axis (``Y[i, fo]``): every element gets the init value, including
elements that the iteration does not reach (a node that is a destination of no relation).
Otherwise (``C[i // 2]``) it iterates the spatial variables, reaching the elements the
iteration reaches.

A kernel whose spatial points never share an output element by contract (the row tiles of
``sparsetir.ops``, validated when called) keeps the native init per point with the iteration
annotation ``INIT_PER_POINT_ANNOTATION`` (``T.sp_iter_attr({"sparsetir.init_per_point": True})``).

One form stays refused: a spatial variable whose axis lies under a reduction variable (a CSC
SpMV written ``"RS"`` with the columns outer). Its outputs are scattered by the reduction, so
the error says what to write instead: zero the output in an iteration of its own, drop
``T.init``, and annotate the iteration ``"atomic"`` to run the column loop in parallel.

Example
-------
rgcn_hetero_forward's init gets a nest ``rgcn_hetero_forward_init`` over Y's axes
``(I_detach, F_out)``, and its update the init ``Y[i, fo] = Y[i, fo]``. Rows summed in pairs,
``C[i // 2]``, get a nest over the spatial variable ``i``:

>>> import numpy as np, sparsetir
>>> from sparsetir.script import tir as T
>>> from sparsetir.ir.utils import is_identity_store
>>> @T.prim_func
... def pairs(x: T.handle, c: T.handle, m: T.int32, m_out: T.int32):
...     I = T.dense_fixed(m)
...     I_out = T.dense_fixed(m_out)
...     K = T.dense_fixed(4)
...     X = T.match_sparse_buffer(x, (I, K), "float32")
...     C = T.match_sparse_buffer(c, (I_out,), "float32")
...     with T.sp_iter([I, K], "SR", "pairs") as [i, k]:
...         with T.init():
...             C[i // 2] = T.float32(0.0)
...         C[i // 2] = C[i // 2] + X[i, k]
>>> views = {buf.view: buf for buf in pairs.buffers}
>>> zero, it = split_init(pairs.body[0], views, nested=False, late=[])
>>> zero.name, zero.kinds, [v.axis.name for v in zero.sp_iter_vars]
('pairs_init', 'S', ['I'])
>>> is_identity_store(it.init[0])                 # C[i // 2] = C[i // 2]
True
>>> kernel = sparsetir.build(pairs, "llvm", cache=True)      # lowering splits it so
>>> X, C = np.arange(24, dtype=np.float32).reshape(6, 4), np.full(3, np.nan, np.float32)
>>> kernel(X, C, 6, 3)
>>> C.tolist()                                    # each pair of rows' sum, counted once
[28.0, 92.0, 156.0]
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..ir.attrs import INIT_PER_POINT_ANNOTATION
from ..ir.axis import AttachedAxis
from ..ir.iteration import SparseIteration, SpIterVar
from ..ir.node import replace
from ..ir.utils import is_identity_store, substitute


def split_init(it: SparseIteration, views: dict, nested: bool, late: list):
    """``(zero, it)``: ``zero`` is None and ``it`` unchanged when the native init runs once per
    output element; else ``zero`` is the init's own iteration, to run first, and ``it`` adds
    into the output.

    ``views`` maps each coordinate-space view (``tirx.Buffer``) to its ``SparseBuffer``;
    ``nested`` says ``it`` sits inside another iteration (its init then must be native);
    ``late`` names the spatial variables whose loops lie in a block below the first reduction
    block. The iteration keeps the native identity init ``X[idx] = X[idx]`` (a reduction block
    for TVM) unless a spatial loop lies below its reduction block (no init then). Raises
    ``LoweringError`` saying what to write when neither placement is right.
    """
    if it.init is None or all(is_identity_store(s) for s in it.init):
        return None, it
    _refuse_scattered_outputs(it, views)
    stray = _spatial_vars_outside_output(it)
    if (not stray or it.annotations.get(INIT_PER_POINT_ANNOTATION)) and not late:
        return None, it
    why = (f"the spatial variable {stray[0]} does not index the output, so a native init "
           "would reset elements already accumulated into" if stray else
           f"the spatial variable {late[0]} is iterated under a reduction")
    if nested:
        raise LoweringError(f"sparse iteration {it.name}: {why}, and its T.init cannot run "
                            "in a nest of its own inside another iteration; move the "
                            "iteration to the top level or zero the output before it")
    keep = None if late else [_identity(s) for s in _stores(it.init)]
    return _zero_nest(it, views, why), replace(it, init=keep)


def _identity(store: tirx.BufferStore) -> tirx.BufferStore:
    """``X[idx] = X[idx]``: the native init that keeps the update a reduction block for TVM's
    checked primitives without changing the output (removed before compiling)."""
    return tirx.BufferStore(store.buffer, tirx.BufferLoad(store.buffer, list(store.indices)),
                            list(store.indices))


def _refuse_scattered_outputs(it: SparseIteration, views: dict) -> None:
    """Refuse a spatial variable whose axis is a child of a reduction variable's axis."""
    reductions = {v.base_axis.name: v.var.name for v in it.sp_iter_vars if v.is_reduction}
    for v in it.sp_iter_vars:
        parent = next((a for a in _ancestors(v) if a in reductions), None)
        if v.is_reduction or parent is None:
            continue
        raise LoweringError(
            f"sparse iteration {it.name}: the spatial variable {v.var.name} iterates "
            f"{v.base_axis.name}, which lies under the reduction variable {reductions[parent]}, "
            f"so an output element is reached from several values of {reductions[parent]} and "
            "a T.init cannot run once per element. Drop the T.init and zero the output first, "
            f"in an iteration of its own ({_zero_example(it, views)}) or before the call; the "
            "update then adds into it, and T.sp_iter_attr({\"atomic\": True}) in the iteration "
            f"runs the {reductions[parent]} loop in parallel with atomic adds. Or iterate the "
            "rows outside (a CSR kernel)")


def _zero_example(it: SparseIteration, views: dict) -> str:
    """``with T.sp_iter([I_out], "S", "zero") as [i]: Y[i] = <init value>`` for ``it``'s
    first init store."""
    store = _stores(it.init)[0]
    buf = views.get(store.buffer)
    if buf is None:
        return 'with T.sp_iter([<output axes>], "S...", "zero")'
    names = [f"v{n}" for n in range(len(buf.axes))]
    return (f"with T.sp_iter([{', '.join(a.name for a in buf.axes)}], "
            f"\"{'S' * len(buf.axes)}\", \"zero\") as [{', '.join(names)}]: "
            f"{buf.name}[{', '.join(names)}] = {store.value}")


def _ancestors(v: SpIterVar) -> list:
    axis = v.axis.new_parent if isinstance(v.axis, AttachedAxis) else v.base_axis.parent
    names = []
    while axis is not None:
        names.append(axis.name)
        axis = axis.parent
    return names


def _spatial_vars_outside_output(it: SparseIteration) -> list:
    """Spatial variables missing from the indices of some store of the init."""
    stores = _stores(it.init)
    return [v.var.name for v in it.sp_iter_vars if not v.is_reduction and not all(
        any(isinstance(i, tirx.Var) and i.same_as(v.var) for i in s.indices) for s in stores)]


def _stores(stmts) -> list:
    found = []
    for stmt in stmts:
        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, found.append), order="pre")
    return found


def _zero_nest(it: SparseIteration, views: dict, why: str) -> SparseIteration:
    """The init as an iteration of its own: over the axes of the buffer it stores to when it
    indexes that buffer with one iteration variable per axis (every element gets the init
    value), else over the iteration's spatial variables (every element they reach)."""
    stores = _stores(it.init)
    own = {v.var for v in it.sp_iter_vars}
    indices = list(stores[0].indices)
    buf = views.get(stores[0].buffer)
    if buf is not None and len(indices) == len(buf.axes) and all(
            isinstance(i, tirx.Var) and i in own for i in indices) \
            and len({i.name for i in indices}) == len(indices) and all(
            s.buffer.same_as(stores[0].buffer)
            and tvm_ffi.structural_equal(list(s.indices), indices) for s in stores):
        pairs = list(zip(indices, buf.axes))
    else:
        pairs = [(v.var, v.axis) for v in it.sp_iter_vars if not v.is_reduction]
    new_vars = [SpIterVar(var=tirx.Var(var.name, "int32"), axis=axis, is_reduction=False,
                          fused=None) for var, axis in pairs]
    body = [substitute(s, {var: v.var for (var, _), v in zip(pairs, new_vars)})
            for s in it.init]
    left = {v.name for s in body for v in _vars(s) if v in own}
    if left:
        raise LoweringError(f"sparse iteration {it.name}: {why}, so its T.init runs in a nest "
                            f"of its own, where {sorted(left)[0]} is not iterated; the init may "
                            "read only the spatial variables")
    return SparseIteration(name=f"{it.name}_init", sp_iter_vars=new_vars, body=body, init=None,
                           annotations={})


def _vars(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, (tirx.Var, found.append), order="pre")
    return found
