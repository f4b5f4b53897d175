"""realign_gathers: a loop annotated for it chooses, from the gathered operand's address, a copy
whose lane loops read each row from the whole cache lines it spans, shifted in registers; the
results are the same wherever the operand starts, and no read leaves the operand's lines.

The schedules annotate the loop only for CPUs whose vector registers are whole cache lines
(``schedule.operators.realigns_gathers``): the kernels here are scheduled as for an AVX-512 CPU
and compiled for this machine, so the realigned loops run on any CPU."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

import sparsetir
import sparsetir.ops as ops
from sparsetir.backend.pipeline import lower_blocks
from sparsetir.backend.prefetch import prefetch_gathers
from sparsetir.backend.realign_gathers import SHIFTS, VECTOR, realign_gathers
from sparsetir.backend.vector_reductions import vectorize_reductions
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ir.attrs import REALIGN_ANNOTATION
from sparsetir.ops.bsr import bsr_spmm_function, schedule_bsr_cpu
from sparsetir.ops.generic_kernels import gspmm_kernel
from sparsetir.ops.hyb import HybLayout, hyb_function, schedule_hyb_cpu
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.cpu_target import host_target
from sparsetir.schedule.generic import schedule_gspmm_cpu
from sparsetir.schedule.operators import schedule_for
from ir_nodes import nodes
from sparse_inputs import skewed_csr
from cpu_targets import AVX2, AVX512

LINE = 64


def scheduled(name, feat, prefetch=0, lanes=None, cpu=AVX512):
    """Kernel ``name`` scheduled as for ``cpu`` (still compiled for this machine)."""
    with host_target(cpu):
        return schedule_for(name, sparsetir.lower_sparse_iter(
            KERNELS[name].specialize({"feat_size": feat})), feat, "llvm", prefetch, lanes)


def lowered(mod):
    flat = lower_to_stage3(mod, "llvm", "none")
    with tvm.target.Target("llvm"):
        return tvm.transform.Sequential([vectorize_reductions, prefetch_gathers,
                                         realign_gathers])(lower_blocks(flat))


def placed(array, offset):
    """A copy of ``array`` starting ``offset`` bytes past a cache line."""
    memory = np.empty(array.nbytes + LINE, np.uint8)
    start = (offset - memory.ctypes.data) % LINE
    copy = memory[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def realign_annotated(mod) -> bool:
    return any(REALIGN_ANNOTATION in loop.annotations for loop in nodes(mod, tirx.For))


@pytest.mark.parametrize("feat, lanes", [(32, 32), (256, 128), (64, 16)])
def test_each_shift_gets_a_loop_whose_rows_come_from_whole_lines(feat, lanes):
    """One realigned copy of the nonzero loop per shift, each lane loop's row filled by one
    shuffle of ``lanes / 16 + 1`` line loads at ``base - shift``, taking lanes ``shift`` to
    ``shift + lanes - 1``; the loop as it was stays for every other start."""
    mod = lowered(scheduled("spmm", feat, lanes=lanes))
    shuffles = nodes(mod, tirx.Shuffle)
    assert len(shuffles) == len(SHIFTS)
    seen = set()
    for shuffle in shuffles:
        assert len(shuffle.vectors) == lanes // VECTOR + 1
        first = int(shuffle.indices[0])
        assert [int(i) for i in shuffle.indices] == list(range(first, first + lanes))
        seen.add(first)
        for vector in shuffle.vectors:
            assert vector.source.name == "X" and int(vector.indices[0].lanes) == VECTOR
    assert seen == set(SHIFTS)
    conditions = [str(node.condition) for node in nodes(mod, tirx.IfThenElse)
                  if "ptrmask" in str(node.condition)]
    assert len(conditions) == len(SHIFTS)
    assert not realign_annotated(mod)


def test_a_tile_narrower_than_a_vector_sddmm_and_avx2_are_left_alone():
    """AVX2's 32-byte vectors: only every other one of a row off a line straddles two lines,
    and the shuffles cost more than the split loads."""
    for mod in (scheduled("spmm", 24), scheduled("spmm", 32, lanes=8), scheduled("sddmm", 64),
                scheduled("spmm", 64, cpu=AVX2)):
        assert not nodes(lowered(mod), tirx.Shuffle)


def test_a_prefetched_loop_is_realigned_too():
    """A prefetch takes the gathered row's address but writes nothing: X stays read-only."""
    assert len(nodes(lowered(scheduled("spmm", 64, prefetch=8)), tirx.Shuffle)) == len(SHIFTS)


@T.prim_func(s_tir=True)
def masked_gather(X: T.Buffer((4096,), "float32"), Y: T.Buffer((64,), "float32"),
                  idx: T.Buffer((8,), "int32"), mask: T.Buffer((8,), "int32")):
    for i in T.parallel(2):
        for j in T.serial(8, annotations={REALIGN_ANNOTATION: 1}):
            for k in T.vectorized(32):
                if mask[j] != 0:
                    Y[i * 32 + k] = Y[i * 32 + k] + X[idx[j] * 32 + k]


def test_a_gather_under_a_test_is_not_moved_ahead_of_it():
    """hyb pads rows with masked entries: loading their lines before the mask is read could
    touch what the mask guards, so such a lane loop keeps its loads; the same loop without
    the test is realigned."""
    unmasked = masked_gather.with_body(tvm_ffi.structural_map(
        masked_gather.body, (tirx.IfThenElse, lambda node: node.then_case), order="post"))
    assert not nodes(tvm.IRModule({"main": unmasked}), tirx.IfThenElse)
    for func, realigned in ((masked_gather, False), (unmasked, True)):
        out = realign_gathers(tvm.IRModule({"main": func}))
        assert bool(nodes(out, tirx.Shuffle)) == realigned
        assert not realign_annotated(out)


@pytest.mark.parametrize("offset", [0, 4, 8, 16, 32, 48])
@pytest.mark.parametrize("feat", [16, 32, 64, 96, 256])
@pytest.mark.parametrize("weighted", [True, False])
def test_spmm_is_right_wherever_x_starts(offset, feat, weighted):
    """Every start of X (on a line, on the realigned shifts, between them) gives scipy's
    product, on rows with no nonzero and into an output full of NaN."""
    A = skewed_csr(300, 200, seed=feat + offset)
    X = placed(np.random.default_rng(offset).standard_normal((200, feat)).astype(np.float32),
               offset)
    assert X.ctypes.data % LINE == offset
    reference = (A if weighted else (A != 0).astype(np.float32)) @ X.astype(np.float64)
    M = ops.SparseMatrix(A)
    for call in range(3):                      # general path, then the prepared short path
        out = np.full((300, feat), np.nan, np.float32)
        assert ops.spmm(M, X, out=out, weighted=weighted) is out
        np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-4)
    plain = np.full((300, feat), np.nan, np.float32)
    for call in range(3):                      # the scipy matrix passed at every call
        ops.spmm(A, X, out=plain, weighted=weighted)
    np.testing.assert_allclose(plain, reference, rtol=1e-5, atol=1e-4)
    Xt = torch.from_numpy(X)                   # a tensor viewing numpy's memory
    np.testing.assert_allclose(ops.spmm(M, Xt, weighted=weighted).numpy(), reference,
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("offset", [0, 16, 32, 48])
@pytest.mark.parametrize("feat, prefetch", [(32, 0), (64, 4), (256, 0)])
@pytest.mark.parametrize("weighted", [True, False])
def test_realigned_spmm_is_right_wherever_x_starts(offset, feat, prefetch, weighted):
    """The realigned SpMM kernels, prefetching or not, give scipy's numbers at every start of
    X, on rows with no nonzero and into an output full of NaN."""
    A = skewed_csr(120, 90, seed=offset + feat)
    X = placed(np.random.default_rng(1).standard_normal((90, feat)).astype(np.float32), offset)
    mod = scheduled("spmm" if weighted else "spmm_unweighted", feat, prefetch=prefetch)
    assert nodes(lowered(mod), tirx.Shuffle)
    kernel = sparsetir.build(mod, "llvm", schedule="none")
    M = ops.SparseMatrix(A)
    tile_ptr, rows = M.row_tiles(4)
    Y = np.full((120, feat), np.nan, np.float32)
    values = (M.data,) if weighted else ()
    kernel(*values, X, Y, tile_ptr, rows, M.indptr, M.indices, 4, 120, 90, M.nnz)
    reference = (A if weighted else (A != 0).astype(np.float64)) @ X.astype(np.float64)
    np.testing.assert_allclose(Y, reference, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("offset", [16, 48])
def test_gspmm_is_right_off_a_line(offset):
    """The generic aggregation (``copy_u_sum``) gives scipy's numbers off a line."""
    A = skewed_csr(120, 90, seed=offset)
    X = placed(np.random.default_rng(1).standard_normal((90, 64)).astype(np.float32), offset)
    np.testing.assert_allclose(ops.copy_u_sum(ops.SparseMatrix(A), X),
                               (A != 0).astype(np.float64) @ X, rtol=1e-5, atol=1e-4)


def gspmm_scheduled(reduce_op):
    """``copy_lhs`` aggregated with ``reduce_op`` at 64 features, scheduled as for AVX-512."""
    func = gspmm_kernel("copy_lhs", reduce_op, "float32", (64,), (True,), (True,))
    with host_target(AVX512):
        return schedule_gspmm_cpu(sparsetir.lower_sparse_iter(func))


@pytest.mark.parametrize("offset", [16, 48])
@pytest.mark.parametrize("reduce_op", ["sum", "max"])
def test_avx512_gspmm_is_right_off_a_line(offset, reduce_op):
    """The generic aggregation scheduled as for AVX-512 (annotated for realignment, which the
    pass applies to the sum and leaves a max as it is) and run on this CPU gives scipy's
    numbers off a line, on rows with no in-edge, into an output full of NaN."""
    mod = gspmm_scheduled(reduce_op)
    assert realign_annotated(mod)
    assert bool(nodes(lowered(mod), tirx.Shuffle)) == (reduce_op == "sum")
    kernel = sparsetir.build(mod, "llvm", schedule="none")
    A = skewed_csr(120, 90, seed=offset)
    X = placed(np.random.default_rng(2).standard_normal((90, 64)).astype(np.float32), offset)
    M = ops.SparseMatrix(A)
    tile_ptr, rows = M.row_tiles(4)
    Y = np.full((120, 64), np.nan, np.float32)
    kernel(X, Y, tile_ptr, rows, M.indptr, M.indices, 4, 120, 90, M.nnz)
    lengths = np.diff(A.indptr)
    if reduce_op == "sum":
        reference = (A != 0).astype(np.float64) @ X
    else:
        reference = np.full((120, 64), -np.inf)     # the kernel's start (ops writes 0 there)
        for row in np.flatnonzero(lengths):
            reference[row] = X[A.indices[A.indptr[row]:A.indptr[row + 1]]].max(axis=0)
    assert (lengths == 0).any()
    np.testing.assert_allclose(Y, reference, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("offset", [16, 48])
def test_avx512_hyb_and_bsr_are_right_off_a_line(offset):
    """Hyb (column partitions x ELL buckets) and BSR SpMM scheduled as for AVX-512 (annotated
    for realignment, which the pass does not apply to BSR's loop) and run on this CPU give
    scipy's numbers off a line, on rows with no nonzero, into NaN."""
    A = skewed_csr(120, 90, seed=offset)
    X = placed(np.random.default_rng(3).standard_normal((90, 64)).astype(np.float32), offset)
    M = ops.SparseMatrix(A)
    reference = A @ X.astype(np.float64)
    layout = HybLayout.of(M, parts=2, widths=(1, 2, 4), tiles=4)
    hyb = hyb_function(layout.config, 64)
    bsr = bsr_spmm_function(2, feat_size=64)
    with host_target(AVX512):
        hyb_mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(hyb), layout.config)
        bsr_mod = schedule_bsr_cpu(sparsetir.lower_sparse_iter(bsr))
    assert realign_annotated(hyb_mod) and realign_annotated(bsr_mod)
    assert not nodes(lowered(bsr_mod), tirx.Shuffle)
    Y = np.full((120, 64), np.nan, np.float32)
    sparsetir.build(hyb_mod, "llvm", schedule="none", horizontal_fuse=True)(
        *layout.arguments(hyb.params, M, X, Y))
    np.testing.assert_allclose(Y, reference, rtol=1e-5, atol=1e-4)
    indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(A.indptr, A.indices, A.data,
                                                              A.shape, 2)
    Y = np.full((120, 64), np.nan, np.float32)
    values = dict(a=A.data, x=X, y=Y, indptr=A.indptr, indices=A.indices, m=120, n=90,
                  nnz=A.nnz, a_bsr=data_b, indptr_bsr=indptr_b, indices_bsr=indices_b,
                  mb_bsr=60, nb_bsr=45, nnzb_bsr=indices_b.size)
    sparsetir.build(bsr_mod, "llvm", schedule="none")(*[values[p.name] for p in bsr.params])
    np.testing.assert_allclose(Y, reference, rtol=1e-5, atol=1e-4)


def test_reads_stay_on_the_operands_lines():
    """X's first line starts a page and its last line ends the next one, each beside a page
    that cannot be read: the line loads before X's first row and after its last stay on
    X's own lines (a read past them would kill the process)."""
    script = textwrap.dedent("""
        import ctypes, mmap, sys
        import numpy as np
        sys.path.insert(0, "tests")
        import sparsetir, sparsetir.ops as ops
        from sparsetir.ops.kernels import KERNELS
        from sparsetir.schedule.cpu_target import host_target
        from sparsetir.schedule.operators import schedule_for
        from sparse_inputs import skewed_csr
        from cpu_targets import AVX512
        kernels = {}
        for feat in (32, 64):           # realigned as for AVX-512, compiled for this CPU
            with host_target(AVX512):
                mod = schedule_for("spmm", sparsetir.lower_sparse_iter(
                    KERNELS["spmm"].specialize({"feat_size": feat})), feat, "llvm")
            kernels[feat] = sparsetir.build(mod, "llvm", schedule="none")
        page = mmap.PAGESIZE
        region = mmap.mmap(-1, 4 * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(region))
        libc = ctypes.CDLL(None)
        for guard in (0, 3):
            assert libc.mprotect(ctypes.c_void_p(base + guard * page), page, 0) == 0
        A = skewed_csr(50, 40, seed=5)
        for offset in (16, 32, 48):
            for rows, feat in ((40, 32), (20, 64)):
                nbytes = rows * feat * 4
                # first line at the start of page 1; last line at the end of page 2
                for start in (page + offset, 3 * page - 64 + offset - nbytes):
                    X = np.frombuffer(region, np.float32, count=rows * feat,
                                      offset=start).reshape(rows, feat)
                    X[...] = np.random.default_rng(offset).standard_normal((rows, feat))
                    assert X.ctypes.data % 64 == offset
                    B = A[:, :rows].tolil()
                    B[0, 0] = B[1, rows - 1] = 1.0     # X's first and last rows are gathered
                    B = B.tocsr()
                    M = ops.SparseMatrix(B)
                    tile_ptr, tile_rows = M.row_tiles(4)
                    out = np.full((50, feat), np.nan, np.float32)
                    kernels[feat](M.data, X, out, tile_ptr, tile_rows, M.indptr, M.indices,
                                  4, 50, rows, M.nnz)
                    assert np.allclose(out, B @ X, atol=1e-4)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
