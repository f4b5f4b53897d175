"""Targets and compilation for ``llvm`` (CPU) and ``cuda``.

CUDA kernels compile to real device binaries (fatbins) even on a machine without
a GPU: see :func:`compile_module`.

Examples
--------
>>> from sparsetir.backend.target import compile_module, cuda_source, export
>>> from sparsetir.driver.build_module import lower_to_stage3
>>> from sparsetir.ops.kernels import spmm
>>> mod = lower_to_stage3(spmm.specialize({"feat_size": 16}), "cuda")   # scheduled for a GPU
>>> ex = compile_module(mod, "cuda")           # nvcc (or NVRTC): no GPU needed
>>> "__global__" in cuda_source(ex)
True
>>> export(ex, "kernels.so")
PosixPath('kernels.so')
"""
from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

import tvm
import tvm_ffi
from tvm import tirx
from tvm.base import _LOADED_LIBS
from tvm_ffi.libinfo import load_lib_ctypes

from .cpu_atomics import load_cpu_atomics, uses_cpu_atomics
from .native import build_shared
from .parallel_scratch import binds_threads as _binds_threads_in
from .pipeline import PIPELINE_NAME
from ..errors import SparseTIRValueError
from ..schedule.cpu_target import host_target, llvm_host

__all__ = ["make_target", "compile_module", "cuda_available", "cuda_source", "export",
           "host_target"]

DEFAULT_CUDA_ARCH = "sm_80"


def make_target(target, arch=None) -> tvm.target.Target:
    """Turn a target name, dict or Target into a :class:`tvm.target.Target`.

    Parameters
    ----------
    target : str, dict or tvm.target.Target
        ``"llvm"`` (this machine's CPU, never ``-mcpu=native``, which LLVM turns
        into ``generic``; inside ``host_target`` the target it names), ``"cuda"`` (with an ``llvm`` host), a target dict, or a
        Target (returned as is).
    arch : str, optional
        CUDA architecture for ``"cuda"``: by default that of this machine's GPU when there is
        one (an sm_80 build does not load on an sm_90 GPU), else ``"sm_80"``.

    Returns
    -------
    tvm.target.Target

    Raises
    ------
    ValueError
        If ``target`` is a string other than ``"llvm"`` or ``"cuda"``.

    Examples
    --------
    >>> make_target("cuda", arch="sm_90").attrs["arch"]
    'sm_90'
    """
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, dict):
        return tvm.target.Target(target)
    if target == "llvm":
        return llvm_host()
    if target == "cuda":
        return tvm.target.Target({"kind": "cuda", "arch": arch or default_cuda_arch(),
                                  "host": {"kind": "llvm"}})
    raise SparseTIRValueError(f"unknown target {target!r}: expected 'llvm', 'cuda', a dict or a tvm.target.Target")


def compile_module(mod: tvm.IRModule, target) -> tvm.runtime.Executable:
    """Compile scheduled TIR for a CPU or a CUDA GPU.

    For ``cuda`` this produces a device binary even without a GPU. Unless
    ``TVM_CUDA_COMPILE_MODE`` is set, it sets it to ``nvcc`` for the process
    when the ``cuda-bindings`` package (NVRTC) is missing. On a machine without
    an NVIDIA driver it loads TVM's CUDA runtime against a stand-in
    ``libcuda.so.1``, built once from ``src/cuda_stub/libcuda_stub.c`` (shipped in the
    package as ``sparsetir/native/``) into
    the disk cache, ``$SPARSETIR_CACHE/libcuda_stub/`` (default ``~/.cache/sparsetir``).

    Parameters
    ----------
    mod : tvm.IRModule
        Functions to compile. For ``cuda`` every function must bind a loop to
        ``blockIdx``/``threadIdx``; for ``llvm`` none may.
    target : str, dict or tvm.target.Target
        Anything :func:`make_target` accepts.

    Returns
    -------
    tvm.runtime.Executable
        Call ``executable["name"](...)``; for ``cuda`` the device code is in
        ``executable.mod.imports``.

    Raises
    ------
    ValueError
        If a function has no thread binding (``cuda``) or has one (``llvm``), or
        the target kind is neither ``llvm`` nor ``cuda``.
    RuntimeError
        If TVM's CUDA runtime library cannot be loaded.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> from sparsetir.driver.build_module import lower_to_stage3
    >>> from sparsetir.ops.kernels import spmm          # Y = A @ X over CSR
    >>> mod = lower_to_stage3(spmm.specialize({"feat_size": 16}), "llvm")   # scheduled, flat
    >>> ex = compile_module(mod, "llvm")
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
    >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
    >>> a, x, y, indptr, indices = (tvm.runtime.tensor(v.ravel())
    ...                             for v in (A.data, X, Y, A.indptr, A.indices))
    >>> ex["main"](a, x, y, indptr, indices, 6, 5, A.nnz)      # no checks: see runtime.Kernel
    >>> np.allclose(y.numpy().reshape(6, 16), A @ X)
    True
    >>> compile_module(mod, "cuda")
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: cannot compile ['main'] for cuda: no loop is bound to blockIdx/threadIdx (bind loops with Schedule.bind)
    """
    tgt = make_target(target)
    kind = tgt.kind.name
    if kind not in ("llvm", "cuda"):
        raise SparseTIRValueError(f"unsupported target kind {kind!r}: expected 'llvm' or 'cuda'")
    funcs = {gv.name_hint: func for gv, func in mod.functions.items() if isinstance(func, tirx.PrimFunc)}
    if kind == "llvm":
        bound = [name for name, func in funcs.items() if _binds_threads(func)]
        if bound:
            raise SparseTIRValueError(f"cannot compile {bound} for llvm: loops are bound to GPU threads")
        if uses_cpu_atomics(mod):
            load_cpu_atomics()             # the kernel calls them: their symbols must be loaded
        return tvm.compile(mod, target=tgt, tir_pipeline=PIPELINE_NAME)
    unbound = [name for name, func in funcs.items() if not _binds_threads(func)]
    if unbound:
        raise SparseTIRValueError(f"cannot compile {unbound} for cuda: no loop is bound to blockIdx/threadIdx "
                         "(bind loops with Schedule.bind)")
    for name, func in funcs.items():
        for index, nest in enumerate(_top_level_loop_nests(func)):
            if not _binds_threads_in(nest):
                raise SparseTIRValueError(
                    f"cannot compile {name} for cuda: its top-level loop nest {index} binds no "
                    "loop to blockIdx/threadIdx and would run on the host over device memory "
                    "(bind it, or build with schedule='auto' to give it the default schedule)")
    _load_cuda_runtime()
    _choose_cuda_compiler()
    with tgt:  # the nvcc callback reads the architecture from the current target
        ex = tvm.compile(mod, target=tgt, tir_pipeline=PIPELINE_NAME)
    if not ex.mod.imports:
        raise RuntimeError("cuda compilation produced host code only: no loop is bound to blockIdx/threadIdx")
    return ex


def default_cuda_arch() -> str:
    """The architecture ``"cuda"`` builds for: this machine's GPU's (``"sm_90"`` on an H100),
    or ``DEFAULT_CUDA_ARCH`` without a GPU.

    Examples
    --------
    >>> default_cuda_arch().startswith("sm_")
    True
    """
    if cuda_available():
        return "sm_" + tvm.cuda(0).compute_version.replace(".", "")
    return DEFAULT_CUDA_ARCH


def cuda_available() -> bool:
    """Whether a real NVIDIA GPU can run kernels here (driver loads and device 0 exists).

    Examples
    --------
    >>> cuda_available() in (True, False)      # False on a machine without an NVIDIA GPU and driver
    True
    """
    if not _driver_present():
        return False
    try:
        _load_cuda_runtime()
    except RuntimeError:
        return False
    return tvm.cuda(0).exist


def cuda_source(executable: tvm.runtime.Executable) -> str:
    """Return the CUDA C that ``executable`` was compiled from.

    Examples
    --------
    >>> from sparsetir.driver.build_module import lower_to_stage3
    >>> from sparsetir.ops.kernels import spmm
    >>> mod = lower_to_stage3(spmm.specialize({"feat_size": 16}), "cuda")
    >>> print(cuda_source(compile_module(mod, "cuda")))
    #ifdef __CUDACC_RTC__
    ...
    extern "C" __global__ void ...
    """
    for module in executable.mod.imports:
        if module.kind == "cuda":
            return module.inspect_source("cuda")
    raise SparseTIRValueError("the executable has no CUDA device module")


def export(executable: tvm.runtime.Executable, path) -> Path:
    """Write ``executable`` as a shared library loadable by ``tvm.runtime.load_module``.

    A CUDA executable's library embeds the device binary (fatbin).

    Examples
    --------
    >>> from sparsetir.driver.build_module import lower_to_stage3
    >>> from sparsetir.ops.kernels import spmm
    >>> mod = lower_to_stage3(spmm.specialize({"feat_size": 16}), "cuda")
    >>> export(compile_module(mod, "cuda"), "kernels.so")      # in the current folder
    PosixPath('kernels.so')
    >>> tvm.runtime.load_module("kernels.so").imports[0].kind
    'cuda'
    """
    path = Path(path)
    executable.export_library(str(path))
    return path


def _binds_threads(func: tirx.PrimFunc) -> bool:
    """Whether ``func`` has a loop bound to a GPU thread axis (scheduled or lowered form)."""
    return _binds_threads_in(func.body)


def _top_level_loop_nests(func: tirx.PrimFunc) -> list:
    """The loop statements directly in the root block's body (schedulable TIR only)."""
    from tvm import s_tir  # pylint: disable=import-outside-toplevel
    if not isinstance(func.body, s_tir.SBlockRealize):
        return []
    body = func.body.block.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    return [stmt for stmt in stmts if isinstance(stmt, tirx.For)]


def _choose_cuda_compiler() -> None:
    """Use nvcc unless the user chose a compiler or NVRTC (``cuda-bindings``) is installed."""
    if "TVM_CUDA_COMPILE_MODE" in os.environ:
        return
    try:
        import cuda.bindings.nvrtc  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError:
        if shutil.which("nvcc") is None:
            raise RuntimeError("compiling CUDA needs nvcc on PATH or the cuda-bindings package") from None
        os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"


def _driver_present() -> bool:
    """Whether a real NVIDIA driver loads (the stub, which lacks ``cuInit``, does not count)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "cuInit")
    except OSError:
        return False


def _load_cuda_runtime() -> None:
    """Register TVM's CUDA runtime, loading the driver stub first when there is no driver.

    ``import tvm`` tries to load ``libtvm_runtime_cuda.so`` and silently gives
    up when its dependency ``libcuda.so.1`` is missing. Once a library with that
    soname is loaded, the dynamic loader uses it to satisfy the dependency.
    """
    if tvm.runtime.enabled("cuda"):
        return
    if not _driver_present():
        ctypes.CDLL(str(_build_stub()), mode=ctypes.RTLD_GLOBAL)
    runtime_dir = Path(_LOADED_LIBS["tvm_runtime"]._name).resolve().parent
    try:
        _LOADED_LIBS["tvm_runtime_cuda"] = load_lib_ctypes(
            "tvm", "tvm_runtime_cuda", "RTLD_LOCAL", extra_lib_paths=[runtime_dir])
    except OSError as err:
        raise RuntimeError(f"cannot load TVM's CUDA runtime (it also needs the CUDA toolkit's "
                           f"libcudart): {err}") from err


def _build_stub() -> Path:
    """Compile the driver stub into the cache once per source version; return its path."""
    return build_shared("libcuda_stub.c", ["-Wl,-soname,libcuda.so.1"])
