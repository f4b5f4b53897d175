"""``sparsetir.build``, the driver: from a kernel at any stage to a callable over numpy/torch/TVM arrays.

A Stage I ``SparseFunction`` is lowered (``lower_sparse_iter``), given the default schedule
for the target, flattened (``lower_sparse_buffer``) and compiled. A Stage II module (what
``lower_sparse_iter`` returned, scheduled by the user or not) is flattened and compiled; the
default schedule then goes only to the top-level loop nests the user left as lowering made them
(same blocks, same loops, all serial), so a user's schedule is never overridden.

Example
-------
>>> import numpy as np, sparsetir
>>> # kernel = sparsetir.build(csrmm.specialize({"feat_size": 64}), "llvm")
>>> # kernel(a_data, b, c, indptr, indices, m, n, nnz)     # c now holds A @ B
"""

from __future__ import annotations

import dataclasses

import tvm
import tvm_ffi
from tvm import tirx

from ..runtime.compiled_checks import compile_checks
from ..ir.function import SparseFunction
from ..runtime import (
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    Kernel,
    ScalarParam,
    Signature,
    ValueDomainCheck,
)
from ..backend.pipeline import lower_blocks
from ..schedule import default_schedule
from ..ir.attrs import SizeReader
from ..backend.target import compile_module, make_target
from ..transform.atomic import check_atomic_inits, lower_atomic_blocks
from ..lower.coordinate_checks import lower_device_checks
from ..transform.horizontal_fusion import horizontal_fuse as fuse_nests
from ..transform.lower_sparse_buffer import lower_sparse_buffer
from ..lower.lower_sparse_iter import (
    INDEX_CHECKS_ATTR,
    PARAM_NAMES_ATTR,
    VALUE_DOMAINS_ATTR,
    lower_sparse_iter,
)


def build(kernel, target="llvm", schedule: str = "auto", horizontal_fuse: bool = False) -> Kernel:
    """Compile ``kernel`` for ``target`` and return a callable ``Kernel``.

    Parameters
    ----------
    kernel : SparseFunction or tvm.IRModule
        A Stage I function, or a Stage II module from ``lower_sparse_iter`` (scheduled or not).
    target : str, dict or tvm.target.Target
        ``"llvm"`` (the host CPU), ``"cuda"`` (sm_80), or a dict such as
        ``{"kind": "cuda", "arch": "sm_90"}``.
    schedule : {"auto", "none"}
        ``"auto"`` applies the default schedule to every loop nest no schedule primitive has
        changed and leaves the others as the user scheduled them; ``"none"`` compiles the
        module as it is.
    horizontal_fuse : bool
        Merge consecutive sub-kernels into one launch after scheduling
        (``transform.horizontal_fusion``): parallel loops of one extent on the CPU,
        ``blockIdx.x`` loops by ranges on CUDA.
    """
    tgt = make_target(target)
    flat, shapes = lower_to_stage3(kernel, tgt, schedule, horizontal_fuse)
    return kernel_of(flat, shapes, compile_module(flat, tgt), tgt)


def lower_to_stage3(kernel, target, schedule: str = "auto",
                    horizontal_fuse: bool = False) -> tuple:
    """``(module, shapes)``: what ``build`` compiles, the flattened (Stage III) module, and
    the Stage II dimensions of its parameters (see ``signature_of``)."""
    if schedule not in ("auto", "none"):
        raise ValueError(f"schedule must be 'auto' or 'none', got {schedule!r}")
    mod = lower_sparse_iter(kernel) if isinstance(kernel, SparseFunction) else kernel
    if not isinstance(mod, tvm.IRModule):
        raise TypeError("build expects a SparseFunction or an IRModule from lower_sparse_iter, "
                        f"got {type(kernel).__name__}")
    kind = str(make_target(target).kind.name)
    if schedule == "auto":
        mod = default_schedule(mod, kind).mod
    check_atomic_inits(mod)
    shapes = [tuple(p.shape) if tirx.is_buffer_var(p) else () for p in mod["main"].params]
    flat = lower_sparse_buffer(mod)
    if horizontal_fuse:
        flat = fuse_nests(flat, kind)
    return lower_device_checks(lower_atomic_blocks(flat, kind), kind), shapes


def kernel_of(flat: tvm.IRModule, shapes: list, executable, target,
              checks_executable=None) -> Kernel:
    """The callable ``Kernel`` of a compiled Stage III module; the index checks are compiled
    for the host unless ``checks_executable`` (from ``compile_checks``) is given."""
    kind = str(make_target(target).kind.name)
    signature = signature_of(flat["main"], shapes)
    if kind == "cuda":
        signature = with_vector_alignment(signature, lower_blocks(flat)["main"])
    checks = None
    if kind == "llvm":
        checks = compile_checks(signature, checks_executable)
    return Kernel(executable, signature, device="cuda" if kind == "cuda" else "cpu",
                  compiled_checks=checks)


def signature_of(func: tirx.PrimFunc, shapes=None) -> Signature:
    """The call signature of a flattened (Stage III) function made by sparsetir.

    ``shapes`` gives each parameter's Stage II dimensions (before flattening), which
    multi-dimensional arguments must match; without it only lengths are checked. Parameter
    names and the sizes in the checks come from the attributes ``lower_sparse_iter`` left,
    read by name (``stage_metadata``), so a function specialised with TVM's
    ``PrimFunc.specialize`` still gets every check.
    """
    shapes = shapes or [()] * len(func.params)
    names = dict(func.attrs.get(PARAM_NAMES_ATTR, {})) if func.attrs is not None else {}
    sizes = SizeReader(func, shapes)
    written = _stored_buffers(func)
    params = []
    for param, shape in zip(func.params, shapes):
        name = str(names.get(param.name, param.name))
        if tirx.is_buffer_var(param):
            length = param.shape[0]
            for dim in list(param.shape)[1:]:
                length = length * dim
            keeps_shape = len(param.shape) > 1
            declared = tuple(param.shape) if keeps_shape else tuple(shape)
            params.append(BufferParam(name, str(param.dtype), length,
                                      any(param.same_as(w) for w in written),
                                      declared if len(declared) > 1 else (), keeps_shape,
                                      int(param.data_alignment)))
        else:
            params.append(ScalarParam(name, param))
    present = {p.name for p in params}
    checks = []
    for entry in func.attrs.get(INDEX_CHECKS_ATTR, []) if func.attrs is not None else []:
        indptr, indices = str(entry["indptr"]), str(entry["indices"])
        if indptr in present:
            checks.append(IndptrCheck(indptr, sizes.expr(entry["nnz"])))
        if indices in present:
            width = None if indptr else sizes.expr(entry["width"])
            checks.append(IndicesCheck(indices, sizes.expr(entry["bound"]), indptr or None,
                                       width, bool(entry["sorted"])))
    for entry in func.attrs.get(VALUE_DOMAINS_ATTR, []) if func.attrs is not None else []:
        checks.append(ValueDomainCheck(str(entry["param"]), sizes.expr(entry["min"]),
                                       sizes.expr(entry["max"])))
    return Signature(tuple(params), tuple(checks))


def with_vector_alignment(signature: Signature, func: tirx.PrimFunc) -> Signature:
    """``signature`` with each buffer's alignment raised to what the vectorised loops of the
    CUDA function ``func`` (blocks lowered to loops) access it with: a loop of ``e`` lanes over ``b``-byte elements
    becomes one access of ``e * b`` bytes (at most 16, a ``float4``), which CUDA requires to be
    aligned to its size; the call then stages a tensor that is not."""
    widths = {}

    def on_for(loop):
        if loop.kind != tirx.ForKind.VECTORIZED or not isinstance(loop.extent, tirx.IntImm):
            return

        def on_access(access):
            buffer = access.buffer if isinstance(access, tirx.BufferStore) else access.source
            if not _uses_var(access.indices, loop.loop_var):   # one element for all lanes
                return
            size = min(16, int(loop.extent) * buffer.dtype.itemsize)
            if size & (size - 1) == 0:
                widths[buffer.name] = max(widths.get(buffer.name, 1), size)

        tvm_ffi.structural_walk(loop.body, ((tirx.BufferStore, tvm.ir.TensorLoad), on_access),
                                order="pre")

    tvm_ffi.structural_walk(func.body, (tirx.For, on_for), order="pre")
    names = {str(p.name): p for p in func.params}
    by_user_name = dict(func.attrs.get(PARAM_NAMES_ATTR, {})) if func.attrs is not None else {}
    params = []
    for param in signature.params:
        internal = next((k for k, v in by_user_name.items() if str(v) == param.name),
                        param.name)
        width = widths.get(str(internal), 0) if str(internal) in names else 0
        if isinstance(param, BufferParam) and width > max(param.alignment,
                                                          param_itemsize(param)):
            param = dataclasses.replace(param, alignment=width)
        params.append(param)
    return Signature(tuple(params), signature.checks)


def param_itemsize(param: BufferParam) -> int:
    return tvm_ffi.dtype(param.dtype).itemsize


def _uses_var(exprs, var) -> bool:
    hits = []
    for expr in exprs:
        tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: hits.append(v.same_as(var))),
                                order="pre")
    return any(hits)


def _stored_buffers(func) -> list:
    stores = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda s: stores.append(s.buffer)),
                            order="pre")
    return stores
