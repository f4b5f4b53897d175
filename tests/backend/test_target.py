import os

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T
from tvm.target.codegen import llvm_get_system_cpu

from sparsetir.backend.target import compile_module, cuda_source, export, make_target

N = 1024
FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")
EM_CUDA = 190


@T.prim_func(s_tir=True)
def vadd(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.sblock("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]


def scheduled_vadd(device):
    """``vadd`` split by 128 and bound to GPU blocks and threads, or parallel and vectorised on CPU."""
    sch = tvm.s_tir.Schedule(vadd)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    outer, inner = sch.split(i, [None, 128])
    if device == "gpu":
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    else:
        sch.parallel(outer)
        sch.vectorize(inner)
    return sch.mod


def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal(N, dtype="float32"), rng.standard_normal(N, dtype="float32")


def cubin_archs(blob):
    """SM numbers of the CUDA ELF objects (cubins) embedded in ``blob`` after offset 0."""
    archs = set()
    start = blob.find(b"\x7fELF", 1)
    while start > 0:
        if int.from_bytes(blob[start + 18:start + 20], "little") == EM_CUDA:
            flags = int.from_bytes(blob[start + 48:start + 52], "little")
            abi_version = blob[start + 8]  # ABI 8 (e.g. CUDA 13) keeps the SM number in byte 1
            archs.add((flags >> 8) & 0xFF if abi_version >= 8 else flags & 0xFF)
        start = blob.find(b"\x7fELF", start + 1)
    return archs


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def cuda_vadd(request):
    return request.param, compile_module(scheduled_vadd("gpu"), make_target("cuda", arch=request.param))


def test_make_target_llvm():
    tgt = make_target("llvm")
    assert tgt.kind.name == "llvm"
    assert tgt.attrs["mcpu"] == llvm_get_system_cpu()
    assert tgt.attrs["mcpu"] not in ("generic", "native")
    assert tgt.attrs["num-cores"] >= 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_make_target_cuda(arch):
    tgt = make_target("cuda", arch=arch)
    assert tgt.kind.name == "cuda"
    assert tgt.attrs["arch"] == arch
    assert tgt.host.kind.name == "llvm"


def test_make_target_defaults_and_passthrough():
    assert make_target("cuda").attrs["arch"] == "sm_80"
    tgt = make_target({"kind": "cuda", "arch": "sm_90"})
    assert make_target(tgt) is tgt


def test_make_target_bad_string():
    with pytest.raises(ValueError, match="rocm-ish"):
        make_target("rocm-ish")


def test_compile_llvm_runs():
    ex = compile_module(scheduled_vadd("cpu"), "llvm")
    a, b = inputs()
    c = tvm.runtime.empty((N,), "float32", tvm.cpu())
    ex["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)


def test_llvm_with_thread_binding_raises():
    with pytest.raises(ValueError, match="bound to GPU threads"):
        compile_module(scheduled_vadd("gpu"), "llvm")


@pytest.mark.cuda
def test_cuda_source(cuda_vadd):
    _, ex = cuda_vadd
    src = cuda_source(ex)
    assert "__global__" in src
    assert "blockIdx.x" in src and "threadIdx.x" in src


@pytest.mark.cuda
def test_cuda_export_embeds_device_binary(cuda_vadd, tmp_path):
    arch, ex = cuda_vadd
    path = export(ex, tmp_path / f"vadd_{arch}.so")
    blob = path.read_bytes()
    if os.environ.get("TVM_CUDA_COMPILE_MODE") == "nvcc":
        assert FATBIN_MAGIC in blob
    assert int(arch.removeprefix("sm_")) in cubin_archs(blob)
    loaded = tvm.runtime.load_module(str(path))
    assert [m.kind for m in loaded.imports] == ["cuda"]


@pytest.mark.cuda
def test_cuda_without_thread_binding_raises():
    with pytest.raises(ValueError, match="no loop is bound to blockIdx/threadIdx"):
        compile_module(tvm.IRModule({"main": vadd}), "cuda")


@pytest.mark.cuda
@pytest.mark.gpu
def test_cuda_runs_on_gpu():
    ex = compile_module(scheduled_vadd("gpu"), "cuda")
    dev = tvm.cuda(0)
    a, b = inputs()
    c = tvm.runtime.empty((N,), "float32", dev)
    ex["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)
