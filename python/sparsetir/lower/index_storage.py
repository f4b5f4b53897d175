"""Index arrays stored narrower than the indices are computed with (``Axis.indptr_dtype``,
``Axis.indices_dtype``).

Lowering emits every index array in its axis's ``idtype`` (``int32`` or ``int64``); this last
step re-declares each array stored in a narrower type (an MLIR encoding's ``posWidth`` /
``crdWidth`` of 8 or 16 bits) with that type and widens every read back to ``idtype``
(``X[T.Cast("int32", J_indices[J_indptr[vi] + vj]), k]``): loops, searches and checks compute
as they would over an ``int32`` array, reading narrower memory. The kernel then asserts, at the
call, that each such array can hold the values the axis needs (coordinates below its length,
positions up to its ``nnz``), so ``int8`` coordinates of a matrix with 200 columns are an
``ArgumentError`` rather than coordinates that wrap. An array the kernel writes (a
co-iteration's output) is refused narrower: storing would truncate.

Example
-------
SpMM with ``J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32",
indices_dtype="int8")``:

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> from sparsetir.script import from_source
>>> text = csrmm.script().replace('(indptr, indices), "int32")',
...                               '(indptr, indices), "int32", indices_dtype="int8")')
>>> mod = sparsetir.lower_sparse_iter(from_source(text).specialize({"feat_size": 16}))
>>> lines = [line.strip() for line in mod.script().splitlines()]
>>> [line for line in lines if line.startswith("assert")]
['assert n <= 128, ("sparsetir.ArgumentError", ["axis J: its length (n) is more than the 128 coordinates that int8 indices indices can hold"])']
>>> [line for line in lines if line.startswith("Y[vi, vk] = Y")]
['Y[vi, vk] = Y[vi, vk] + A[J_indptr[vi] + vj] * X[T.Cast("int32", J_indices[J_indptr[vi] + vj]), vk]']
>>> kernel = sparsetir.build(mod, "llvm", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> kernel(A.data, X, Y, A.indptr, A.indices.astype(np.int8), 6, 5, A.nnz)
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import s_tir, tirx
from tvm.script.ir_builder import tirx as Tb

from ..errors import LoweringError
from ..format.param_rewrite import replace_params
from ..ir.attrs import param_names
from ..ir.function import SparseFunction
from .coordinate_checks import assertion


def store_narrow_indices(lowered: tirx.PrimFunc, func: SparseFunction) -> tirx.PrimFunc:
    """``lowered`` (the Stage II form of ``func``) with each index array that an axis of
    ``func`` stores narrower than its ``idtype`` declared in that type (see the module
    docstring)."""
    narrow = _narrow_arrays(func)
    stage1 = param_names(lowered)
    new, owners, checks = {}, {}, []
    for old in lowered.params:
        name = stage1.get(old.name) if tirx.is_buffer_var(old) else None
        if name not in narrow:         # (a counting pass does not take an output's arrays)
            continue
        stored, axis, role = narrow[name]
        new[old] = Tb.buffer(list(old.shape), stored, layout=None, buffer_name=old.name,
                             align=np.dtype(stored).itemsize)
        owners[old] = (axis, role)
        checks.append(_capacity_check(axis, role, name, stored))
    if not new:
        return lowered

    def on_load(load, buffer):
        return tirx.Cast(str(load.source.dtype), tirx.BufferLoad(buffer, list(load.indices)))

    def on_store(store, _buffer):
        axis, role = owners[store.buffer]
        raise LoweringError(f"axis {axis.name}: the kernel writes its {role}, which is stored "
                            f"in {axis.stored_dtype(role)}, narrower than its idtype "
                            f"{axis.idtype}; store the {role} of an output in its idtype")

    widened = replace_params(lowered, new, on_load, on_store)
    return _with_checks_first(widened, [c for c in checks if c is not None])


def _narrow_arrays(func: SparseFunction) -> dict:
    """Stage I handle name -> (storage dtype, axis, role) of every index array stored
    narrower than its axis's ``idtype``; one array must have one storage type."""
    narrow, seen = {}, {}
    for axis in func.axes:
        for role in ("indptr", "indices"):
            handle = getattr(axis, role)
            if handle is None:
                continue
            stored = axis.stored_dtype(role)
            key = (stored, axis.idtype)
            if seen.setdefault(handle.name, (key, axis))[0] != key:
                other = seen[handle.name][1]
                raise LoweringError(f"{handle.name} is the {role} of axes {other.name} and "
                                    f"{axis.name}, stored and computed as {seen[handle.name][0]}"
                                    f" and {key}: declare them alike")
            if stored != axis.idtype:
                narrow.setdefault(handle.name, (stored, axis, role))
    return narrow


def _capacity_check(axis, role: str, param: str, stored: str):
    """The assertion that ``param`` (``axis``'s ``role`` array, stored in ``stored``) can hold
    every value the axis needs; None when proven, ``LoweringError`` when it never can."""
    top = int(np.iinfo(stored).max)
    if role == "indices":
        need, cap = axis.length, top + 1
        text = (f"axis {axis.name}: its length ({axis.length}) is more than the {cap} "
                f"coordinates that {stored} indices {param} can hold")
    else:
        need, cap = axis.nnz, top
        text = (f"axis {axis.name}: its nnz ({axis.nnz}) is more than {cap}, the largest "
                f"position that {stored} indptr {param} can hold")
    condition = need <= tirx.const(cap, str(need.ty.dtype))
    analyzer = tvm.sym.Analyzer()
    if analyzer.can_prove(condition):
        return None
    if analyzer.can_prove(tirx.Not(condition)):
        raise LoweringError(text)
    return assertion(condition, text)


def _with_checks_first(lowered: tirx.PrimFunc, checks: list) -> tirx.PrimFunc:
    """``lowered`` running ``checks`` before anything else in its root block."""
    if not checks:
        return lowered
    realize = lowered.body
    root = realize.block
    body = tirx.SeqStmt([*checks, root.body])
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                            root.init, root.alloc_buffers, root.match_buffers,
                            root.annotations)
    return lowered.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate,
                                                 new_root))
