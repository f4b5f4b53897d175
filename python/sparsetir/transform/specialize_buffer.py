"""``specialize_buffer``: SparseTIR's ``tvm.sparse.specialize_buffer`` on a Stage II module.

``specialize_buffer(mod, "J_indices", lambda i, j: (i + j,))`` replaces every read of the
buffer ``J_indices`` of ``mod["main"]`` by the formula, when the caller knows the array's
contents follow it (a banded ELL matrix whose row ``i`` holds columns ``i .. i + col - 1``):
the kernel then computes the coordinate instead of loading it. The formula takes the buffer's
coordinates as SparseTIR wrote them: the flat position, or, for the indices of a sparse axis,
``(row, position in the row)`` (a ``sparse_fixed`` axis of width ``w`` stores ``(i, j)`` at
``i * w + j``; a ``sparse_variable`` one at ``indptr[i] + j``). It returns one value.

The buffer's parameter stays, so calls keep their arguments and their checks. A computed
coordinate is no longer one of the validated indices: every access it indexes is checked
when the kernel runs (``ArgumentError``), unless TVM's analyzer proves it in range. A buffer
the kernel writes is refused, as in SparseTIR.

Example
-------
A matrix whose row ``i`` holds columns ``0 .. len_i - 1``: ``J_indices`` is ``lambda i, j:
(j,)`` (an ELL kernel's banded columns would be ``lambda i, j: (i + j,)``):

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> func = csrmm.specialize({"feat_size": 16})
>>> mod = specialize_buffer(sparsetir.lower_sparse_iter(func), "J_indices", lambda i, j: (j,))
>>> "J_indices[" in mod["main"].script()
False
>>> lengths = np.array([0, 3, 1, 5, 0, 2])
>>> indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
>>> indices = np.concatenate([np.arange(k) for k in lengths]).astype(np.int32)
>>> A = scipy.sparse.csr_matrix((np.ones(indices.size, np.float32), indices, indptr),
...                             shape=(6, 5))
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> sparsetir.build(mod, "llvm", cache=True)(A.data, X, Y, indptr, indices, 6, 5, A.nnz)
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import inspect

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ir import attrs
from ..ir.function import SparseFunction
from ..ir.utils import structural_map
from .index_guards import guard_blocks, without_proven


def specialize_buffer(mod: tvm.IRModule, buf_name: str, idx_map) -> tvm.IRModule:
    """``mod`` with the reads of buffer ``buf_name`` of its ``main`` replaced by
    ``idx_map(*coordinates)[0]`` (see the module docstring)."""
    if isinstance(mod, SparseFunction):
        raise SparseTIRTypeError("specialize_buffer rewrites the Stage II module: write "
                                 "specialize_buffer(sparsetir.lower_sparse_iter(func), "
                                 f"{buf_name!r}, idx_map)")
    if not isinstance(mod, tvm.IRModule):
        raise SparseTIRTypeError("specialize_buffer takes the IRModule lower_sparse_iter gives, "
                                 f"got {type(mod).__name__}")
    if not callable(idx_map):
        raise SparseTIRTypeError(f"idx_map must be a function of the coordinates of {buf_name}, "
                                 f"got {idx_map!r}")
    if not any(gv.name_hint == "main" for gv in mod.functions):
        raise SparseTIRValueError("specialize_buffer: the module has no function 'main' (give "
                                  "it the module lower_sparse_iter returns)")
    func = mod["main"]
    buffers = {str(p.name): p for p in func.params if tirx.is_buffer_var(p)}
    if buf_name not in buffers:
        raise SparseTIRValueError(f"specialize_buffer: main has no buffer {buf_name!r}; its "
                                  f"buffers are {sorted(buffers)}")
    buf = buffers[buf_name]
    stored = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda st: stored.append(
        st.buffer.same_as(buf))), order="pre")
    if any(stored):
        raise SparseTIRValueError(f"specialize_buffer: main writes {buf_name}; only a buffer "
                                  "the kernel reads can be replaced by a formula")
    coordinates = _coordinates(func, buf, _arity(idx_map))

    def formula(load):
        if not load.source.same_as(buf):
            return load
        values = idx_map(*coordinates(list(load.indices)))
        if not isinstance(values, (tuple, list)) or len(values) != 1:
            raise SparseTIRValueError(f"specialize_buffer: idx_map must return one value "
                                      f"(a 1-tuple such as (i + j,)), got {values!r}")
        return tvm.sym.Analyzer().simplify(_value(values[0], buf))

    def on_block(block):
        analyzer = tvm.sym.Analyzer()
        for iv in block.iter_vars:
            analyzer.bind(iv.var, iv.dom)

        def on_load(load):
            new = formula(load)
            return new if new is load else analyzer.simplify(new)

        def regions(items):
            return [tirx.BufferRegion(r.source, [tvm.ir.Range.from_min_extent(
                structural_map(x.min, (tvm.ir.TensorLoad, on_load), order="post"),
                structural_map(x.extent, (tvm.ir.TensorLoad, on_load), order="post"))
                for x in r.region]) for r in items if not r.source.same_as(buf)]

        body = structural_map(block.body, (tvm.ir.TensorLoad, on_load), order="post")
        init = None if block.init is None else structural_map(
            block.init, (tvm.ir.TensorLoad, on_load), order="post")
        return without_proven(s_tir.SBlock(
            block.iter_vars, regions(block.reads), regions(block.writes), block.name_hint, body,
            init, block.alloc_buffers, block.match_buffers, block.annotations))

    guarded = guard_blocks(func.body, [buf], lambda _read, target: (
        f"specialize_buffer({buf_name!r}): the formula gives an index of {target} out of "
        "range"))
    body = structural_map(guarded, (s_tir.SBlock, on_block), order="post")
    out = dict(mod.functions)
    out[mod.get_global_var("main")] = func.with_body(body)
    return tvm.IRModule(out, attrs=mod.attrs)


def _arity(idx_map) -> int:
    """The number of coordinates ``idx_map`` takes."""
    try:
        return len(inspect.signature(idx_map).parameters)
    except (TypeError, ValueError):
        raise SparseTIRTypeError(f"idx_map must be a function whose parameters can be counted "
                                 f"(a lambda or a def), got {idx_map!r}") from None


def _value(value, buf):
    """``value`` (a Python number or a TIR expression) as an expression of ``buf``'s dtype;
    anything else, or another dtype, is refused (nothing is cast)."""
    want = str(buf.dtype)
    integral = want.startswith(("int", "uint"))
    if isinstance(value, bool) or not isinstance(value, (int, float, tvm.ir.expr.Expr)):
        raise SparseTIRTypeError(f"specialize_buffer: idx_map must give a {want} value for "
                                 f"{buf.name}, got {value!r} ({type(value).__name__})")
    if isinstance(value, (int, float)):
        if integral and isinstance(value, float):
            raise SparseTIRTypeError(f"specialize_buffer: idx_map gives the float {value!r} for "
                                     f"{buf.name}, which holds {want}")
        return tirx.const(value, want)
    got = str(value.ty.dtype) if hasattr(value, "ty") else None
    if got != want:
        raise SparseTIRTypeError(f"specialize_buffer: idx_map gives {value} of dtype {got} for "
                                 f"{buf.name}, which holds {want}; nothing is cast (write "
                                 f"tvm.tirx.Cast(\"{want}\", ...) if the values fit)")
    return value


def _coordinates(func, buf, arity: int):
    """``flat indices -> the coordinates idx_map takes`` for ``buf`` and an ``arity``."""
    if arity == len(buf.shape):
        return lambda indices: indices
    user_name = attrs.param_names(func).get(str(buf.name), str(buf.name))
    entry = next((e for e in attrs.index_checks(func) if e.indices == user_name), None)
    if arity == 2 and len(buf.shape) == 1 and entry is not None:
        if not entry.indptr:
            return lambda indices: _row_and_column(indices[0], entry.width)
        indptr = next(p for p in func.params if tirx.is_buffer_var(p) and attrs.param_names(
            func).get(str(p.name), str(p.name)) == entry.indptr)
        return lambda indices: _row_and_position(indices[0], indptr, buf)
    raise SparseTIRValueError(
        f"specialize_buffer: idx_map takes {arity} coordinates; {buf.name} is read with "
        f"{len(buf.shape)} index" + ("" if len(buf.shape) == 1 else "es") +
        (", or (row, position) as the indices of a sparse axis" if entry is not None else ""))


def _row_and_column(flat, width) -> list:
    """``(i, j)`` of a flat position ``i * width + j`` (the form lowering gives, read back
    as it is; any other form is divided by ``width``)."""
    if isinstance(flat, tirx.Add) and isinstance(flat.a, tirx.Mul) \
            and tvm_ffi.structural_equal(flat.a.b, width):
        return [flat.a.a, flat.b]
    return [tirx.floordiv(flat, width), tirx.floormod(flat, width)]


def _row_and_position(flat, indptr, buf) -> list:
    """``(i, j)`` of a flat position written ``indptr[i] + j`` (the form lowering gives)."""
    if isinstance(flat, tirx.Add):
        for row_start, position in ((flat.a, flat.b), (flat.b, flat.a)):
            if isinstance(row_start, tvm.ir.TensorLoad) and row_start.source.same_as(indptr):
                return [row_start.indices[0], position]
    raise SparseTIRValueError(f"specialize_buffer: {buf.name} is read at {flat}, not at "
                              f"{indptr.name}[row] + position; give idx_map one coordinate, "
                              "the flat position")
