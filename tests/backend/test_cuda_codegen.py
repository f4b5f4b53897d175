"""The zoo kernels on CUDA: code generation (nvcc, no GPU), CPU emulation, and real GPU runs.

* ``cuda``: every kernel builds through ``sparsetir.build`` for sm_80 and sm_90, with one
  ``__global__`` function per top-level loop nest, rows on ``blockIdx.x`` and, where the
  default schedule binds features, ``threadIdx.x``; the CUDA source, the same for both
  architectures, is the golden file ``golden/test_cuda_codegen/test_cuda_codegen-<kernel>.txt``
  (``pytest --update-golden`` rewrites it after a deliberate change).
* Emulation: the CUDA-scheduled module with its thread bindings made serial (forwards and
  backwards, see ``cuda_emulation``) computes the references, and no thread-bound loop feeds a
  reduction variable (which would be a cross-thread race without TVM's reduction lowering).
* ``gpu``: the real CUDA kernels on a GPU against the references (skipped without one).

Outputs are filled with NaN before every call (``zoo_check``). Builds are cached per
(kernel, arch).
"""

from __future__ import annotations

import functools

import pytest
import tvm_ffi
from tvm import s_tir, tirx

import sparse_inputs as si
import sparsetir
from cuda_device import device_kernels
from cuda_emulation import emulate
from kernel_zoo import CASES
from zoo_check import check_kernel, zoo_inputs
from sparsetir.schedule import default_schedule
from sparsetir.backend.target import cuda_source

NAMES = sorted(CASES)
ARCHS = ("sm_80", "sm_90")
# Kernels whose feature loop the default CUDA schedule gives to threadIdx.x.
THREADED = {"bsrmm", "csr2bsr", "csrmm", "csrmm_dense_iter", "ellmm", "hyper_gnn",
            "rgcn_homo_forward"}


@functools.lru_cache(maxsize=None)
def _cuda_kernel(name: str, arch: str):
    return sparsetir.build(CASES[name].func, {"kind": "cuda", "arch": arch})


@functools.lru_cache(maxsize=None)
def _scheduled(name: str):
    """The Stage II module of ``name`` with the default CUDA schedule."""
    return default_schedule(sparsetir.lower_sparse_iter(CASES[name].func), "cuda").mod


@functools.lru_cache(maxsize=None)
def _emulated(name: str, reverse: bool):
    return emulate(_scheduled(name), reverse)


def _top_level_nests(name: str) -> int:
    body = sparsetir.lower_sparse_iter(CASES[name].func)["main"].body.block.body
    return len(body.seq) if isinstance(body, tirx.SeqStmt) else 1


def _check(kernel, name: str, size: str) -> None:
    check_kernel(kernel, CASES[name].func, name, zoo_inputs(name, size))


@pytest.mark.cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_cuda_codegen(name, arch, golden):
    """One __global__ per top-level nest; rows on blockIdx.x; features on threadIdx.x; the
    source as in the golden file."""
    kernel = _cuda_kernel(name, arch)
    assert len(device_kernels(kernel.executable)) == _top_level_nests(name)
    src = cuda_source(kernel.executable)
    assert "blockIdx.x" in src
    assert ("threadIdx.x" in src) == (name in THREADED)
    golden(src, variant=name)


def _thread_bound_reductions(mod) -> list:
    """Blocks in ``mod`` with a reduction variable bound to an expression of a thread loop."""
    bad = []

    def on_loop(loop):
        if loop.kind != tirx.ForKind.THREAD_BINDING or "threadIdx" not in str(
                loop.thread_binding.thread_tag):
            return

        def on_realize(realize):
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                uses = tirx.analysis.undefined_vars(value, [])
                if iv.iter_type != tirx.IterVar.DataPar and any(
                        v.same_as(loop.loop_var) for v in uses):
                    bad.append(realize.block.name_hint)

        tvm_ffi.structural_walk(loop.body, (s_tir.SBlockRealize, on_realize), order="pre")

    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, on_loop), order="pre")
    return bad


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("name", NAMES)
def test_cuda_schedule_emulated_on_cpu(name, reverse):
    """The CUDA schedule, threads run one after another on the CPU, matches the reference."""
    assert not _thread_bound_reductions(_scheduled(name))
    _check(_emulated(name, reverse), name, "small")


@pytest.mark.gpu
@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_cuda_kernel_on_gpu(name, size):
    """The real CUDA kernels, built for this GPU's architecture, match the reference."""
    import tvm  # pylint: disable=import-outside-toplevel
    arch = "sm_" + tvm.cuda(0).compute_version.replace(".", "")
    _check(_cuda_kernel(name, arch), name, size)
