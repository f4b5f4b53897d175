"""prefetch_gathers: a nonzero loop annotated with a prefetch distance asks for the gathered
rows that many nonzeros ahead, reads its index array no further than its end, and computes
what it computed before."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops import SparseMatrix
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.cpu_target import host_target
from sparsetir.schedule.operators import schedule_for
from sparsetir.backend.pipeline import lower_blocks
from sparsetir.backend.prefetch import PREFETCH, prefetch_gathers
from sparsetir.backend.vector_reductions import vectorize_reductions
from sparse_inputs import skewed_csr
from cpu_targets import AVX2, AVX512


def annotated(name, feat, distance):
    """The ops kernel ``name`` scheduled with its loop over a row's nonzeros annotated."""
    return schedule_for(name, sparsetir.lower_sparse_iter(
        KERNELS[name].specialize({"feat_size": feat})), feat, "llvm", prefetch=distance)


def lowered(mod):
    flat = lower_to_stage3(mod, "llvm", "none")
    with tvm.target.Target("llvm"):
        return tvm.transform.Sequential([vectorize_reductions, prefetch_gathers])(
            lower_blocks(flat))


def prefetches(mod):
    """(guard condition, number of prefetch calls) for each guarded group."""
    groups = []

    def on_if(node):
        calls = []
        tvm_ffi.structural_walk(node.then_case, (tvm.ir.Call, lambda c: calls.append(c)
                                                 if c.op.name == "tirx.prefetch" else None),
                                order="pre")
        if calls:
            groups.append((node.condition, len(calls)))

    tvm_ffi.structural_walk(mod["main"].body, (tirx.IfThenElse, on_if), order="pre")
    return groups


@pytest.mark.parametrize("name, feat, cpu, lines", [
    ("spmm", 128, AVX512, 8), ("spmm", 128, AVX2, 4), ("spmm", 32, AVX512, 2),
    ("sddmm", 64, AVX2, 4), ("sddmm", 128, AVX512, 8)])
def test_one_prefetch_per_cache_line_of_the_gathered_row(name, feat, cpu, lines):
    """spmm: the lines of one register tile per pass (128 lanes with AVX-512's registers, 64
    with AVX2's); sddmm: the whole row."""
    with host_target(cpu):
        mod = annotated(name, feat, 8)
    (group,) = prefetches(lowered(mod))
    condition, count = group
    assert count == lines
    assert "+ 8 <" in str(condition) and "nnz" in str(condition)


def test_a_long_row_gets_at_most_max_lines_prefetches():
    from sparsetir.backend.prefetch import MAX_LINES
    (group,) = prefetches(lowered(annotated("sddmm", 4096, 8)))
    assert group[1] == MAX_LINES          # not the 256 lines of the row: compile time


def test_the_annotation_is_consumed_and_nothing_else_is_prefetched():
    assert not prefetches(lowered(annotated("spmm", 128, 0)))
    loops = []
    tvm_ffi.structural_walk(lowered(annotated("spmm", 128, 8))["main"].body,
                            (tirx.For, loops.append), order="pre")
    assert not any(PREFETCH in loop.annotations for loop in loops)


@pytest.mark.parametrize("name, feat", [("spmm", 64), ("spmm", 24), ("sddmm", 32)])
def test_results_are_unchanged(name, feat):
    A = skewed_csr(90, 70, seed=feat)
    M = SparseMatrix(A)
    kernel = sparsetir.build(annotated(name, feat, 3), "llvm", schedule="none")
    rng = np.random.default_rng(feat)
    tiles = 4
    tile_ptr, rows = M.row_tiles(tiles)
    csr = (tile_ptr, rows, M.indptr, M.indices, tiles, *M.shape, M.nnz)
    if name == "spmm":
        X = rng.standard_normal((70, feat)).astype(np.float32)
        Y = np.full((90, feat), np.nan, np.float32)
        kernel(M.data, X, Y, *csr)
        np.testing.assert_allclose(Y, M.to_scipy() @ X, rtol=1e-5, atol=1e-5)
    else:
        X = rng.standard_normal((90, feat)).astype(np.float32)
        Y = rng.standard_normal((70, feat)).astype(np.float32)
        out = np.full(M.nnz, np.nan, np.float32)
        kernel(X, Y, out, *csr)
        coo = M.to_scipy().tocoo()
        np.testing.assert_allclose(out, np.einsum("ij,ij->i", X[coo.row], Y[coo.col]),
                                   rtol=1e-5, atol=1e-5)


def test_index_array_is_not_read_past_its_end():
    """``indices`` ends where an inaccessible page starts: a prefetch address computed from
    ``indices[p + D]`` past the end would crash the process."""
    script = textwrap.dedent("""
        import ctypes, mmap, sys
        import numpy as np, scipy.sparse
        sys.path.insert(0, "tests"); sys.path.insert(0, "tests/backend")
        import sparsetir
        from test_prefetch import annotated
        page = mmap.PAGESIZE
        region = mmap.mmap(-1, 2 * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(region))
        libc = ctypes.CDLL(None)
        assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0   # PROT_NONE
        A = scipy.sparse.random(40, 30, density=0.2, format="csr", dtype=np.float32,
                                random_state=1)
        A.sort_indices()
        memory = np.frombuffer(region, np.int32, count=page // 4)
        indices = memory[page // 4 - A.nnz:]           # its last element ends the page
        indices[:] = A.indices
        kernel = sparsetir.build(annotated("spmm", 32, 16), "llvm", schedule="none")
        X = np.ones((30, 32), np.float32); Y = np.empty((40, 32), np.float32)
        tile_ptr = np.array([0, 40], np.int32); rows = np.arange(40, dtype=np.int32)
        kernel(A.data, X, Y, tile_ptr, rows, A.indptr.astype(np.int32), indices, 1, 40, 30,
               A.nnz)
        assert np.allclose(Y, A @ X, atol=1e-5)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_cost_model_prefetches_operands_larger_than_the_l2_caches(monkeypatch):
    from sparsetir.schedule import operators as schedules
    assert schedules.l2_cache_bytes() >= 64 << 10
    monkeypatch.setattr(schedules, "l2_cache_bytes", lambda: 1 << 20)
    assert schedules.prefetch_distance(2708, 32) == 0          # cora's X: 346 KB
    assert schedules.prefetch_distance(169_343, 128) == 8      # arxiv-size X: 87 MB


def test_ops_calls_use_the_cost_models_distance():
    from sparsetir.ops import operators
    from sparsetir.schedule import operators as schedules
    M = SparseMatrix(skewed_csr(40, 30))
    default = operators.bind_kernel(M, "spmm", 32)
    assert schedules.prefetch_distance(30, 32) == 0
    assert operators.bind_kernel(M, "spmm", 32, prefetch=0) is default
    assert operators.bind_kernel(M, "spmm", 32, prefetch=8) is not default
