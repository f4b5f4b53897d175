"""Smoke test of an installed sparsetir (run from outside the source tree by ``make package-test``).

First runs GCN's aggregation (``gspmm copy_lhs sum`` over 16 features) with an empty kernel
cache: on an x86-64-v3 machine the installed package's prebuilt kernel runs, the caller compiles
nothing, and the kernel for this CPU compiled in the background takes its place
(``driver.prebuilt``). Builds CSR SpMM for the CPU and checks it against scipy, then compiles it
for CUDA (the libcuda stand-in must come from the installed package), calls
``sparsetir.ops.spmm`` twice on one matrix (the second call through the native fast path,
compiled from the C source the package ships), and prints where the package was imported from.
"""

import json
import os
import tempfile
import threading
from pathlib import Path

import numpy as np
import scipy.sparse

os.environ["SPARSETIR_CACHE"] = tempfile.mkdtemp()     # native code built from this package

import sparsetir  # noqa: E402
import sparsetir.backend.native  # noqa: E402
import sparsetir.ops  # noqa: E402
from sparsetir.driver import build_module, prebuilt, upgrade  # noqa: E402
from sparsetir.script import tir as T  # noqa: E402


@T.prim_func
def csrmm(a: T.handle, b: T.handle, c: T.handle, indptr: T.handle, indices: T.handle,
          m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, K), "float32")
    with T.sp_iter([I, J, K], "SRS", "csrmm") as [i, j, k]:
        with T.init():
            C[i, k] = 0.0
        C[i, k] = C[i, k] + A[i, j] * B[j, k]


def check_prebuilt():
    """GCN's aggregation from the package's prebuilt kernels, compiled by no one but the
    background worker."""
    manifest = json.loads((prebuilt.folder() / prebuilt.MANIFEST).read_text())
    assert prebuilt.folder().is_relative_to(Path(sparsetir.__file__).parent)
    if "skipped" in manifest:
        print("no prebuilt kernels in this package:", manifest["skipped"])
        return
    threads = []
    compile_stage2 = build_module.compile_stage2
    build_module.compile_stage2 = lambda *a, **k: (
        threads.append(threading.current_thread().name), compile_stage2(*a, **k))[1]
    a = scipy.sparse.random(60, 50, density=0.1, format="csr", dtype=np.float32, random_state=2)
    ones = scipy.sparse.csr_matrix((np.ones(a.nnz, np.float32), a.indices, a.indptr), a.shape)
    x = np.random.default_rng(3).standard_normal((50, 16)).astype(np.float32)
    out = sparsetir.ops.gspmm(sparsetir.ops.SparseMatrix(a), "copy_lhs", "sum", x, None)
    np.testing.assert_allclose(out, ones @ x, rtol=1e-5, atol=1e-5)
    assert threading.main_thread().name not in threads, threads
    upgrade.wait()
    assert threads == ["sparsetir-upgrade"], threads
    build_module.compile_stage2 = compile_stage2
    print(f"prebuilt: {len(manifest['kernels'])} kernels for {manifest['target']['mcpu']}; "
          "gspmm copy_lhs sum (16) ran prebuilt, the host kernel compiled in the background")


def main():
    print("sparsetir from", sparsetir.__file__)
    check_prebuilt()
    a = scipy.sparse.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=1)
    x = np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)
    y = np.full((50, 16), np.nan, np.float32)
    kernel = sparsetir.build(csrmm.specialize({"feat_size": 16}), "llvm")
    kernel(a.data, x, y, a.indptr.astype(np.int32), a.indices.astype(np.int32), 50, 40, a.nnz)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-6)
    cuda = sparsetir.build(csrmm.specialize({"feat_size": 16}), {"kind": "cuda", "arch": "sm_90"})
    assert "threadIdx.x" in cuda.inspect_source("cuda")
    matrix = sparsetir.ops.SparseMatrix(a)
    for _ in range(2):
        np.testing.assert_allclose(sparsetir.ops.spmm(matrix, x), a @ x, rtol=1e-5, atol=1e-6)
    source = sparsetir.backend.native.source_path("fastcall.c")
    assert source.is_relative_to(Path(sparsetir.__file__).parent), source
    ((bound, _, _),) = matrix.calls.values()
    assert bound.native_call
    print("llvm and cuda builds OK; ops.spmm through the native call")


if __name__ == "__main__":
    main()
