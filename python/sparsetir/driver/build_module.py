"""``sparsetir.build``, the driver: from a kernel at any stage to a callable over numpy/torch/TVM arrays.

One path to a kernel: a Stage I ``SparseFunction`` is lowered (``lower_sparse_iter``); a Stage
II module (what ``lower_sparse_iter`` returned, scheduled by the user or not) is taken as it
is. The default schedule for the target then goes only to the top-level loop nests the user
left as lowering made them (same blocks, same loops, all serial), so a user's schedule is
never overridden. The Stage II -> Stage III passes (``transform.stage3_passes``) flatten it,
``backend.target.compile_module`` compiles it, and the call signature is read from the
metadata lowering left on it (``ir.attrs``). With ``cache=True`` the compiled kernel is kept in
memory and on disk (``driver.cache``), keyed by the scheduled module and the target.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> kernel = sparsetir.build(csrmm.specialize({"feat_size": 16}), "llvm", cache=True)
>>> [p.name for p in kernel.signature.params]
['a', 'x', 'y', 'indptr', 'indices', 'm', 'n', 'nnz']
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> B, C = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> kernel(A.data, B, C, A.indptr, A.indices, 6, 5, A.nnz)     # C now holds A @ B
>>> np.allclose(C, A @ B)
True
"""

from __future__ import annotations

import dataclasses

import tvm
import tvm_ffi
from tvm import tirx

from ..backend.pipeline import lower_blocks
from ..backend.target import compile_module, make_target
from ..ir import attrs
from ..ir.function import SparseFunction
from ..ir.utils import uses_var
from ..lower.lower_sparse_iter import lower_sparse_iter
from ..runtime import (
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    Kernel,
    ScalarParam,
    Signature,
    ValueDomainCheck,
)
from ..runtime.compiled_checks import checks_module, compile_checks
from ..schedule import default_schedule
from ..transform.pipeline import stage3_passes
from . import cache as kernel_cache
from . import compile_log
from .portable import KernelOrigin
from ..errors import SparseTIRTypeError, SparseTIRValueError


def build(kernel, target="llvm", schedule: str = "auto", horizontal_fuse: bool = False,
          cache: bool = False) -> Kernel:
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
    cache : bool
        Keep the compiled kernel in memory and on disk (``driver.cache``): a later build of
        the same scheduled module for the same target, in this process or another, compiles
        nothing.
    """
    tgt = make_target(target)
    mod = scheduled_stage2(kernel, tgt, schedule)
    if cache:
        return kernel_cache.cached(mod, tgt, horizontal_fuse, compile_stage2, kernel_of)
    compiled = compile_log.timed_compile(lambda: compile_stage2(mod, tgt, horizontal_fuse),
                                         mod, tgt, "build(cache=False) compiles every time")
    return kernel_of(compiled, tgt)


def scheduled_stage2(kernel, target, schedule: str = "auto") -> tvm.IRModule:
    """The Stage II module ``build`` compiles: ``kernel`` lowered if it is a Stage I function,
    with the default schedule where ``schedule`` is ``"auto"``."""
    if schedule not in ("auto", "none"):
        raise SparseTIRValueError(f"schedule must be 'auto' or 'none', got {schedule!r}")
    mod = lower_sparse_iter(kernel) if isinstance(kernel, SparseFunction) else kernel
    if not isinstance(mod, tvm.IRModule):
        raise SparseTIRTypeError("build expects a SparseFunction or an IRModule from lower_sparse_iter, "
                        f"got {type(kernel).__name__}")
    _refuse_stepped_loops(mod)
    if schedule == "auto":
        mod = default_schedule(mod, str(make_target(target).kind.name)).mod
    return mod


def _refuse_stepped_loops(mod: tvm.IRModule) -> None:
    """Refuse a loop with a step other than 1 (``T.parallel(0, 64, step=2)``): sparsetir's
    passes rebuild loops from their bounds and would run it at every index."""
    stepped = []
    for func in mod.functions.values():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, (tirx.For, lambda loop: stepped.append(loop)
                                                if loop.step is not None and not (
                                                    isinstance(loop.step, tirx.IntImm)
                                                    and loop.step.value == 1) else None),
                                    order="pre")
    if stepped:
        loop = stepped[0]
        raise SparseTIRValueError(f"loop {loop.loop_var} has step {loop.step}: sparsetir "
                                  "builds loops of step 1 only (loop over the count and "
                                  "multiply the index)")


def lower_to_stage3(kernel, target, schedule: str = "auto",
                    horizontal_fuse: bool = False) -> tvm.IRModule:
    """The flattened (Stage III) module ``build`` compiles."""
    kind = str(make_target(target).kind.name)
    return stage3_passes(kind, horizontal_fuse)(scheduled_stage2(kernel, target, schedule))


def compile_stage2(mod: tvm.IRModule, target,
                   horizontal_fuse: bool = False) -> kernel_cache.Compiled:
    """``mod`` (scheduled Stage II) flattened and compiled for ``target``, with its index
    checks compiled for the host (CPU targets)."""
    tgt = make_target(target)
    flat = lower_to_stage3(mod, tgt, "none", horizontal_fuse)
    executable = compile_module(flat, tgt)
    signature = signature_of(flat["main"])
    checks = None
    if tgt.kind.name == "llvm" and signature.checks:
        checks = kernel_cache.checks_executable(checks_module(signature))   # often shared
    return kernel_cache.Compiled(flat, executable, checks)


def kernel_of(compiled: kernel_cache.Compiled, target) -> Kernel:
    """The callable ``Kernel`` of a compiled Stage III module."""
    kind = str(make_target(target).kind.name)
    signature = signature_of(compiled.flat["main"])
    if kind == "cuda":
        signature = with_vector_alignment(signature, lower_blocks(compiled.flat)["main"])
    checks = compile_checks(signature, compiled.checks) if kind == "llvm" else None
    return Kernel(compiled.executable, signature, device="cuda" if kind == "cuda" else "cpu",
                  compiled_checks=checks, origin=KernelOrigin(compiled, kind, kernel_of))


def signature_of(func: tirx.PrimFunc) -> Signature:
    """The call signature of a flattened (Stage III) function made by sparsetir.

    Parameter names, the checks and the Stage II shape of each flattened buffer (which a
    multi-dimensional argument must match) come from the metadata ``lower_sparse_iter`` and
    ``lower_sparse_buffer`` left (``ir.attrs``); its sizes are expressions over ``func``'s
    parameters, substituted by ``PrimFunc.specialize`` like the rest of the function.
    """
    names = attrs.param_names(func)
    shapes = attrs.stage2_shapes(func)
    layouts = attrs.tiled_layouts(func)
    written = _stored_buffers(func)
    params = []
    for param in func.params:
        name = names.get(param.name, str(param.name))
        if tirx.is_buffer_var(param):
            length = param.shape[0]
            for dim in list(param.shape)[1:]:
                length = length * dim
            keeps_shape = len(param.shape) > 1
            declared = tuple(param.shape) if keeps_shape else shapes.get(param.name, ())
            params.append(BufferParam(name, str(param.dtype), length,
                                      any(param.same_as(w) for w in written),
                                      declared if len(declared) > 1 else (), keeps_shape,
                                      int(param.data_alignment), layouts.get(param.name, "")))
        else:
            params.append(ScalarParam(name, param))
    present = {p.name for p in params}
    checks = []
    for entry in attrs.index_checks(func):
        if entry.indptr in present:
            checks.append(IndptrCheck(entry.indptr, entry.nnz))
        if entry.indices in present:
            width = None if entry.indptr else entry.width
            checks.append(IndicesCheck(entry.indices, entry.bound, entry.indptr or None,
                                       width, entry.sorted))
    for entry in attrs.value_domains(func):
        checks.append(ValueDomainCheck(entry.param, entry.min, entry.max))
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
            if not uses_var(access.indices, loop.loop_var):   # one element for all lanes
                return
            size = min(16, int(loop.extent) * buffer.dtype.itemsize)
            if size & (size - 1) == 0:
                widths[buffer.name] = max(widths.get(buffer.name, 1), size)

        tvm_ffi.structural_walk(loop.body, ((tirx.BufferStore, tvm.ir.TensorLoad), on_access),
                                order="pre")

    tvm_ffi.structural_walk(func.body, (tirx.For, on_for), order="pre")
    names = {str(p.name): p for p in func.params}
    by_user_name = attrs.param_names(func)
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


def _stored_buffers(func) -> list:
    stores = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda s: stores.append(s.buffer)),
                            order="pre")
    return stores
