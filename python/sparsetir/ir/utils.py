"""Small helpers about TIR variables shared by the front end, passes and printer."""

import tvm
import tvm_ffi
from tvm import tirx


def var_dtype(var: tirx.Var) -> str:
    """``"handle"`` for a pointer variable, else its scalar dtype (``"int32"``...).

    Example
    -------
    >>> var_dtype(tirx.Var("a", "handle")), var_dtype(tirx.Var("m", "int32"))
    ('handle', 'int32')
    """
    if isinstance(var.ty, tvm.ir.PointerType):
        return "handle"
    return str(var.ty.dtype)


def is_handle(var) -> bool:
    """Whether ``var`` is a ``T.handle`` variable."""
    return isinstance(var, tirx.Var) and isinstance(var.ty, tvm.ir.PointerType)


def substitute(node, var_map: dict):
    """``node`` (an expression, statement or None) with Vars replaced through ``var_map``.

    Example
    -------
    >>> m = tirx.Var("m", "int32")
    >>> substitute(m * 2, {m: tirx.const(4, "int32")}).b.value
    2
    """
    if node is None:
        return None
    return tvm_ffi.structural_map(node, (tirx.Var, lambda v: var_map.get(v, v)), order="post")


def uses_var(node, var) -> bool:
    """Whether the expression or statement ``node`` (or one of a list of them; a Python number
    refers to nothing) refers to ``var``.

    Example
    -------
    >>> m, n = tirx.Var("m", "int32"), tirx.Var("n", "int32")
    >>> uses_var(m * 2 + 1, m), uses_var([m * 2, 3], n), uses_var(m, m)
    (True, False, True)
    """
    if isinstance(node, (list, tuple, tvm_ffi.Array)):
        return any(uses_var(item, var) for item in node)
    if isinstance(node, (int, float)):
        return False
    found = tvm_ffi.structural_walk(node, (tirx.Var, lambda v: tvm_ffi.VisitInterrupt(True)
                                           if v.same_as(var) else None), order="pre")
    return bool(getattr(found, "value", False))


def structural_map(node, entries, order: str = "post"):
    """``tvm_ffi.structural_map`` whose callbacks may raise.

    An exception must not cross TVM's FFI callback boundary (seen here: a corrupted heap, not
    a traceback). Each callback's first exception is kept, the remaining nodes are left as
    they are, and the exception is raised once the walk has returned.

    Example
    -------
    >>> m = tirx.Var("m", "int32")
    >>> structural_map(m + 1, (tirx.Var, lambda v: v * 2)).a.b.value
    2
    """
    failures = []

    def guarded(callback):
        def call(item):
            if failures:
                return item
            try:
                return callback(item)
            except Exception as err:  # noqa: BLE001  (re-raised below, outside TVM)
                failures.append(err)
                return item
        return call

    pairs = [entries] if isinstance(entries, tuple) else list(entries)
    mapped = tvm_ffi.structural_map(node, [(kind, guarded(fn)) for kind, fn in pairs],
                                    order=order)
    if failures:
        raise failures[0]
    return mapped


def is_identity_store(stmt) -> bool:
    """Whether ``stmt`` is ``X[idx] = X[idx]`` (the init of a reduction that adds into what its
    output holds; ``schedule.accumulator`` recognises the same)."""
    return isinstance(stmt, tirx.BufferStore) and isinstance(stmt.value, tvm.ir.TensorLoad) \
        and stmt.value.source.same_as(stmt.buffer) \
        and tvm_ffi.structural_equal(list(stmt.value.indices), list(stmt.indices))


def added_value(store):
    """``v`` when ``store`` adds ``v`` to what it overwrites: ``X[idx] = X[idx] + v`` in any
    order of a sum of terms, some subtracted (``X[idx] = X[idx] + a + b``, ``X[idx] = X[idx] -
    a``: ``v`` is ``a + b``, ``0 - a``), ``X[idx]`` read once, added, and nowhere in ``v``;
    else None."""
    terms = _terms(store.value, 1)
    own = [n for n, (sign, term) in enumerate(terms)
           if isinstance(term, tvm.ir.TensorLoad) and term.source.same_as(store.buffer)
           and tvm_ffi.structural_equal(list(term.indices), list(store.indices))]
    if len(terms) < 2 or len(own) != 1 or terms[own[0]][0] < 0:
        return None
    rest = terms[:own[0]] + terms[own[0] + 1:]
    reads = []
    for _, term in rest:                   # the added value must not read X itself (a race)
        tvm_ffi.structural_walk(term, (
            tvm.ir.TensorLoad, lambda ld: reads.append(ld) if ld.source.same_as(store.buffer)
            else None), order="pre")
    if reads:
        return None
    value = None
    for sign, term in rest:
        if value is None:
            value = term if sign > 0 else tirx.Sub(tirx.const(0, str(store.buffer.dtype)), term)
        else:
            value = tirx.Add(value, term) if sign > 0 else tirx.Sub(value, term)
    return value


def _terms(expr, sign: int) -> list:
    """``expr`` as ``[(sign, term)]`` over its top-level additions and subtractions."""
    if isinstance(expr, tirx.Add):
        return _terms(expr.a, sign) + _terms(expr.b, sign)
    if isinstance(expr, tirx.Sub):
        return _terms(expr.a, sign) + _terms(expr.b, -sign)
    return [(sign, expr)]


def retarget_buffers(node, mapping: dict, extra=()):
    """``node`` with every load and store of a buffer in ``mapping`` (old -> new buffer) moved
    to its new buffer; ``extra``: more ``(kind, callback)`` entries for the same walk.

    Example
    -------
    >>> import sparsetir
    >>> from sparsetir.ops.kernels import spmm
    >>> func = sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 16}))["main"]
    >>> A_stray = next(p for p in func.params if tirx.is_buffer_var(p) and p.name == "A")
    >>> A_allocated = tirx.decl_buffer(A_stray.shape, A_stray.dtype, "A_allocated")
    >>> body = retarget_buffers(func.body, {A_stray: A_allocated})
    >>> "+ A_allocated[J_indptr[vi] + vj] * X" in str(body)   # loads and stores; not regions
    True
    """
    def on_load(load):
        return tirx.BufferLoad(mapping[load.source], list(load.indices)) \
            if load.source in mapping else load

    def on_store(store):
        return tirx.BufferStore(mapping[store.buffer], store.value, list(store.indices)) \
            if store.buffer in mapping else store

    return tvm_ffi.structural_map(node, [*extra, (tvm.ir.TensorLoad, on_load),
                                         (tirx.BufferStore, on_store)], order="post")

