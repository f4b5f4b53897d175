"""The CUDA schedules of ``sparsetir.ops`` (``schedule/operators_cuda.py``), without and with a GPU.

* Stage II (no nvcc): the thread bindings and block size follow the cost model; a kernel in the
  wrong form is refused.
* ``cuda``: nvcc compiles every kernel for sm_80 and sm_90 into one ``__global__`` function;
  the CUDA source has the bindings, the vector loads and, for SDDMM, the warp shuffles, and is
  the golden file ``golden/test_operator_schedules_cuda/...-<kernel>-<feat>.txt`` (the same for
  both architectures; ``pytest --update-golden`` rewrites it after a deliberate change). The
  write-back of SDDMM is guarded by the nonzero bound in Stage II.
* Emulation: the scheduled module with its thread loops made serial (forwards and backwards,
  ``tests/cuda_emulation.py``) equals scipy on a matrix with empty rows and one full row, the
  outputs filled with NaN first.
* ``gpu``: the real kernels on torch CUDA tensors equal torch.sparse (cuSPARSE; skipped
  without a GPU).

The ``*_segments`` kernels run on the same matrix cut into row segments of at most
``SEGMENT_NNZ`` nonzeros (its full row of 200 nonzeros into 29 segments). SpMM's zeroing nest
comes first, and only the write-back of a segment's sum is atomic (one add per feature), a
store where the segment is its row's only one; ``seg_rows`` out of order is refused. SDDMM's
segments write every nonzero's result once, in any order of rows.

Feature sizes: 1, 32, 64, 128, 256 (SpMM: two warps a row, ``threadIdx.z``) and 20 (not a
multiple of 32: SpMM 4 lanes of 5 scalar features, SDDMM one lane of 5 float4 loads); the
bindings also at 384 and 2048 (groups of warps with chunks); the scheduled modules are cached
per case.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
import tvm_ffi
from tvm import s_tir, tirx

import sparsetir
from cuda_device import device_kernels
from cuda_emulation import emulate
from sparse_inputs import skewed_csr
from sparsetir.schedule.operators_cuda import (CUDA_SCHEDULES, ROW_UNROLL, THREADS_PER_BLOCK,
                                               schedule_spmm_cuda,
                                               schedule_spmm_segments_cuda, sddmm_layout,
                                               spmm_layout)
from sparsetir.ops.kernels import CUDA_KERNELS, KERNELS
from sparsetir.schedule.operators import schedule_for
from sparsetir.backend.target import cuda_source
from sparsetir.format import row_segments

NAMES = sorted(CUDA_KERNELS)
FEATS = (1, 20, 32, 64, 128, 256)
ARCHS = ("sm_80", "sm_90")
ROWS, COLS = 300, 200
SEGMENT_NNZ = 7
VECTOR_TYPES = {1: "float", 2: "float2", 4: "float4"}


def _layout(name: str, feat: int):
    return sddmm_layout(feat) if name.startswith("sddmm") else spmm_layout(feat)


def _zeroes_and_adds(name: str) -> bool:
    """The SpMM segment kernels zero the output first and add into it; SDDMM's segments
    write each nonzero's result once."""
    return name.startswith("spmm") and name.endswith("_segments")


@functools.lru_cache(maxsize=None)
def _scheduled(name: str, feat: int):
    func = CUDA_KERNELS[name].specialize({"feat_size": feat})
    return schedule_for(name, sparsetir.lower_sparse_iter(func), feat, "cuda")


@functools.lru_cache(maxsize=None)
def _matrix():
    A = skewed_csr(ROWS, COLS, seed=3)
    A.sort_indices()
    return A


def _inputs(name: str, feat: int, rng) -> tuple:
    """(every kernel argument by parameter name, the scipy result of the output)."""
    A = _matrix()
    args = dict(indptr=A.indptr.astype(np.int32), indices=A.indices.astype(np.int32),
                m=ROWS, n=COLS, nnz=A.nnz)
    if name.endswith("_segments"):
        args["seg_ptr"], args["seg_rows"] = row_segments(A.indptr, SEGMENT_NNZ)
        args["s"] = args["seg_rows"].size
    if name.startswith("sddmm"):
        args["x"] = rng.standard_normal((ROWS, feat), dtype=np.float32)
        args["y"] = rng.standard_normal((COLS, feat), dtype=np.float32)
        args["out"] = np.full(A.nnz, np.nan, np.float32)
        rows = np.repeat(np.arange(ROWS), np.diff(A.indptr))
        expected = np.einsum("ef,ef->e", args["x"][rows].astype(np.float64),
                             args["y"][A.indices].astype(np.float64))
        return args, "out", expected
    args["x"] = rng.standard_normal((COLS, feat), dtype=np.float32)
    args["y"] = np.full((ROWS, feat), np.nan, np.float32)
    weighted = not name.startswith("spmm_unweighted")
    values = A if weighted else (A != 0).astype(np.float32)
    if weighted:
        args["a"] = A.data
    return args, "y", values.astype(np.float64) @ args["x"].astype(np.float64)


def _call(kernel, name: str, args: dict) -> None:
    kernel(*[args[p.name] for p in CUDA_KERNELS[name].params if p.name != "feat_size"])


def _thread_extents(mod) -> dict:
    extents = {}

    def on_loop(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            extents.setdefault(str(loop.thread_binding.thread_tag), set()).add(
                str(loop.extent))

    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, on_loop), order="pre")
    return extents


@pytest.mark.parametrize("feat", FEATS + (384, 2048))
@pytest.mark.parametrize("name", NAMES)
def test_bindings_follow_the_cost_model(name, feat):
    layout = _layout(name, feat)
    assert layout.groups * layout.lanes * layout.vec * layout.chunks == feat
    assert layout.groups * layout.lanes * layout.rows == THREADS_PER_BLOCK
    extents = _thread_extents(_scheduled(name, feat))
    assert extents.get("threadIdx.z") == ({str(layout.groups)} if layout.groups > 1 else None)
    groups = {"sddmm": "nnz"}.get(name, "s" if name.endswith("_segments") else "m")
    blocks = {f"({groups} + {layout.rows - 1}) // {layout.rows}"}
    lanes = {str(layout.lanes)}
    if _zeroes_and_adds(name):           # the zeroing nest: one vector of the output per thread
        vectors = feat // layout.vec
        elements = "m" if vectors == 1 else f"m * {vectors}"
        blocks.add(f"m * {vectors // THREADS_PER_BLOCK}" if vectors % THREADS_PER_BLOCK == 0
                   else f"({elements} + {THREADS_PER_BLOCK - 1}) // {THREADS_PER_BLOCK}")
        lanes.add(str(THREADS_PER_BLOCK))
    assert extents["threadIdx.x"] == lanes
    assert extents["threadIdx.y"] == {str(layout.rows)}
    assert extents["blockIdx.x"] == blocks


@pytest.mark.parametrize("name", ["spmm", "spmm_unweighted", "spmm_segments"])
def test_a_row_is_walked_unrolled(name):
    """Rows to warps: ROW_UNROLL nonzeros per step (several gathered rows in flight);
    segments, short, one at a time."""
    unrolled = []

    def on_loop(loop):
        if loop.kind == tirx.ForKind.UNROLLED:
            unrolled.append(int(loop.extent))
    tvm_ffi.structural_walk(_scheduled(name, 32)["main"].body, (tirx.For, on_loop), order="pre")
    assert unrolled == ([] if name.endswith("_segments") else [ROW_UNROLL])


def test_cost_model():
    """SpMM past a warp of float4 (128 features): groups of warps, not chunks per lane."""
    assert [tuple(spmm_layout(f)[:3]) + (spmm_layout(f).groups,)
            for f in (1, 20, 32, 64, 128, 256, 384, 512, 2048)] == [
        (1, 1, 1, 1), (4, 1, 5, 1), (32, 1, 1, 1), (32, 2, 1, 1), (32, 4, 1, 1), (32, 4, 1, 2),
        (32, 4, 3, 1), (32, 4, 1, 4), (32, 4, 4, 4)]
    assert all(spmm_layout(f).rows >= 2 for f in (256, 384, 512, 2048))
    assert {sddmm_layout(f).groups for f in (1, 20, 32, 64, 128, 256, 512)} == {1}
    assert [tuple(sddmm_layout(f)[:3]) for f in (1, 20, 32, 64, 128, 256)] == [
        (1, 1, 1), (1, 4, 5), (8, 4, 1), (16, 4, 1), (32, 4, 1), (32, 4, 2)]


def test_every_cuda_kernel_has_its_schedule_and_no_other_name_does():
    assert set(CUDA_SCHEDULES) == set(CUDA_KERNELS)
    mod = sparsetir.lower_sparse_iter(CUDA_KERNELS["spmm"].specialize({"feat_size": 32}))
    with pytest.raises(ValueError, match=r"no CUDA schedule for kernel 'spmm_tiled'"):
        schedule_for("spmm_tiled", mod, 32, "cuda")


def test_the_row_tiled_cpu_kernel_is_refused():
    mod = sparsetir.lower_sparse_iter(KERNELS["spmm"].specialize({"feat_size": 32}))
    with pytest.raises(ValueError, match=r"CUDA_KERNELS\['spmm'\]"):
        schedule_spmm_cuda(mod, 32)


def test_the_segment_schedule_refuses_plain_csr():
    mod = sparsetir.lower_sparse_iter(CUDA_KERNELS["spmm"].specialize({"feat_size": 32}))
    with pytest.raises(ValueError, match=r"CUDA_KERNELS\['spmm_segments'\]"):
        schedule_spmm_segments_cuda(mod, 32)


@pytest.mark.cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("feat", FEATS)
@pytest.mark.parametrize("name", NAMES)
def test_nvcc_compiles_the_expected_kernel(name, feat, arch, golden):
    """One kernel with the layout's bindings and vector accesses; SDDMM adds across lanes
    with warp shuffles, its partial sums in registers (indexed by constants and the vector
    lane only); the source (launch bounds, guards) as in the golden file."""
    kernel = sparsetir.build(_scheduled(name, feat), {"kind": "cuda", "arch": arch},
                             schedule="none")
    segments = _zeroes_and_adds(name)
    assert device_kernels(kernel.executable) == ["main_kernel"] + ["main_kernel_1"] * segments
    src = cuda_source(kernel.executable)
    layout = _layout(name, feat)
    assert "blockIdx.x" in src and "threadIdx.y" in src
    assert ("threadIdx.x" in src) == (layout.lanes > 1 or segments)  # segments: zeroing
    assert ("threadIdx.z" in src) == (layout.groups > 1)
    vector = f"*({VECTOR_TYPES[layout.vec]}*)"
    # SpMM: X read, Y written (segments: zeroed with vector stores, then added to with scalar
    # atomics); SDDMM: both read
    vector_accesses = ["X_ptr", "Y_ptr"]
    assert all((f"{vector}({a} + " in src) == (layout.vec > 1) for a in vector_accesses)
    assert ("__shfl_down_sync" in src) == (name.startswith("sddmm") and layout.lanes > 1)
    partial_sum_indices = re.findall(r"_rf\w*_ptr(?: \+ |\[)([^)\]]+)", src)
    assert all(re.fullmatch(r"\d+|k_\w+", index) for index in partial_sum_indices), \
        partial_sum_indices
    assert src.count("atomic_add((&(Y_ptr[") == segments    # the write-back alone, once
    stores_by_segment_row = re.search(r"\n *Y_ptr\[\(*I_indices_ptr.*\] = Y_local_ptr\[", src)
    assert bool(stores_by_segment_row) == segments         # or a store: the row's one segment
    golden(src, variant=f"{name}-{feat}")


@pytest.mark.parametrize("feat", FEATS)
def test_sddmm_write_back_is_bounded_by_nnz(feat):
    """Rows of the last block past ``nnz`` store nothing: every block writing OUT (and its
    local copy) is predicated on the nonzero bound."""
    writers = []

    def on_realize(realize):
        if any(region.source.name in ("OUT", "OUT_local") for region in realize.block.writes):
            writers.append((realize.block.name_hint, str(realize.predicate)))

    tvm_ffi.structural_walk(_scheduled("sddmm", feat)["main"].body,
                            (s_tir.SBlockRealize, on_realize), order="pre")
    assert len(writers) >= 2 and all("< nnz" in predicate for _, predicate in writers), writers


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("feat", FEATS)
@pytest.mark.parametrize("name", NAMES)
def test_emulated_schedule_equals_scipy(name, feat, reverse):
    args, out, expected = _inputs(name, feat, np.random.default_rng(feat))
    _call(emulate(_scheduled(name, feat), reverse), name, args)
    np.testing.assert_allclose(args[out], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["spmm_segments", "spmm_unweighted_segments"])
def test_segments_out_of_row_order_are_refused(name):
    """A segment stores its sum when its neighbours hold other rows: exact only if a row's
    segments are neighbours, so the call refuses ``seg_rows`` that ever decreases."""
    args, _, _ = _inputs(name, 4, np.random.default_rng(0))
    args["seg_rows"] = args["seg_rows"][::-1].copy()
    with pytest.raises(ValueError, match="seg_rows is not sorted"):
        _call(emulate(_scheduled(name, 4)), name, args)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("seg_ptr, seg_rows", [
    ([0, 5], [3]),                                  # one segment
    ([0, 2, 2, 6, 7, 12], [0, 0, 2, 2, 2]),         # an empty segment, neighbours sharing rows
    ([0, 4, 9, 12], [1, 4, 4]),                     # not the CSR's rows: the format's own
])
def test_segments_as_given_equal_their_sum(seg_ptr, seg_rows, reverse):
    """The segment format defines the matrix itself: row ``seg_rows[s]`` gets the nonzeros
    ``seg_ptr[s]:seg_ptr[s + 1]``, whatever rows a CSR would put them in; stored where a
    segment is alone, added where neighbours share a row, every other row zero."""
    rng = np.random.default_rng(1)
    seg_ptr, seg_rows = np.array(seg_ptr, np.int32), np.array(seg_rows, np.int32)
    nnz, rows, cols = int(seg_ptr[-1]), 6, 5
    values = rng.standard_normal(nnz, dtype=np.float32)
    indices = np.concatenate([np.sort(rng.choice(cols, int(n), replace=False))
                              for n in np.diff(seg_ptr)]).astype(np.int32)
    x = rng.standard_normal((cols, 4), dtype=np.float32)
    expected = np.zeros((rows, 4))
    for segment, row in enumerate(seg_rows):
        span = slice(seg_ptr[segment], seg_ptr[segment + 1])
        expected[row] += values[span] @ x[indices[span]]
    y = np.full((rows, 4), np.nan, np.float32)
    emulate(_scheduled("spmm_segments", 4), reverse)(values, x, y, seg_ptr, seg_rows, indices,
                                                     seg_rows.size, rows, cols, nnz)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("seg_ptr, seg_rows", [
    ([0, 5], [3]),
    ([0, 2, 2, 6, 7, 12], [0, 0, 2, 2, 2]),
    ([0, 4, 9, 12], [4, 1, 4]),                     # out of row order: each result written once
])
def test_sddmm_segments_as_given(seg_ptr, seg_rows, reverse):
    """SDDMM over segments: nonzero ``p`` of segment ``s`` gets ``x[seg_rows[s]] .
    y[indices[p]]``, whatever the order of the segments' rows."""
    rng = np.random.default_rng(2)
    seg_ptr, seg_rows = np.array(seg_ptr, np.int32), np.array(seg_rows, np.int32)
    nnz, rows, cols, feat = int(seg_ptr[-1]), 6, 5, 20
    indices = np.concatenate([np.sort(rng.choice(cols, int(n), replace=False))
                              for n in np.diff(seg_ptr)]).astype(np.int32)
    x = rng.standard_normal((rows, feat), dtype=np.float32)
    y = rng.standard_normal((cols, feat), dtype=np.float32)
    rows_of_nonzeros = np.repeat(seg_rows, np.diff(seg_ptr))
    expected = np.einsum("ef,ef->e", x[rows_of_nonzeros].astype(np.float64),
                         y[indices].astype(np.float64))
    out = np.full(nnz, np.nan, np.float32)
    emulate(_scheduled("sddmm_segments", feat), reverse)(x, y, out, seg_ptr, seg_rows, indices,
                                                         seg_rows.size, rows, cols, nnz)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("changed, message", [
    (dict(seg_rows=[0, 6]), r"seg_rows\[1\] = 6 is out of range \[0, 6\)"),
    (dict(seg_rows=[0, -1]), r"seg_rows\[1\] = -1 is out of range"),
    (dict(seg_ptr=[0, 3, 2], indices=[0, 1]), r"seg_ptr is not monotone"),
    (dict(indices=[0, 1, 2, 7]), r"indices\[3\] = 7 is out of range \[0, 5\)"),
])
def test_sddmm_segments_refuse_malformed_segments_by_name(changed, message):
    args = dict(dict(seg_ptr=[0, 2, 4], seg_rows=[0, 1], indices=[0, 1, 2, 3]), **changed)
    seg_ptr, seg_rows, indices = (np.array(args[key], np.int32)
                                  for key in ("seg_ptr", "seg_rows", "indices"))
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal((rows, 4), dtype=np.float32) for rows in (6, 5))
    out = np.full(int(seg_ptr[-1]), np.nan, np.float32)
    with pytest.raises(ValueError, match=message):
        emulate(_scheduled("sddmm_segments", 4))(x, y, out, seg_ptr, seg_rows, indices,
                                                 seg_rows.size, 6, 5, int(seg_ptr[-1]))


def _torch_result(name: str, args: dict):
    """torch.sparse's answer (cuSPARSE on a GPU) on the kernel's arguments."""
    import torch  # pylint: disable=import-outside-toplevel
    shape = (args["m"], args["n"])
    if name.startswith("sddmm"):
        pattern = torch.sparse_csr_tensor(args["indptr"], args["indices"],
                                          torch.ones_like(args["out"]), shape)
        return torch.sparse.sampled_addmm(pattern, args["x"], args["y"].t(), beta=0.0).values()
    values = args["a"] if "a" in args else torch.ones_like(args["indices"],
                                                          dtype=torch.float32)
    return torch.sparse_csr_tensor(args["indptr"], args["indices"], values, shape) @ args["x"]


@pytest.mark.gpu
@pytest.mark.parametrize("feat", FEATS)
@pytest.mark.parametrize("name", NAMES)
def test_cuda_kernel_on_gpu_equals_torch(name, feat):
    import torch  # pylint: disable=import-outside-toplevel
    major, minor = torch.cuda.get_device_capability()
    kernel = sparsetir.build(_scheduled(name, feat),
                             {"kind": "cuda", "arch": f"sm_{major}{minor}"}, schedule="none")
    args, out, _ = _inputs(name, feat, np.random.default_rng(feat))
    args = {key: torch.from_numpy(value).cuda() if isinstance(value, np.ndarray) else value
            for key, value in args.items()}
    _call(kernel, name, args)
    torch.testing.assert_close(args[out], _torch_result(name, args), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_vector_accesses_raise_the_alignment_the_call_checks():
    """A float4 load needs 16-byte aligned data: the CUDA kernel's signature says so, so a
    tensor view starting 4 bytes into another is staged, not handed to the kernel."""
    from sparsetir.ops.kernels import CUDA_KERNELS
    from sparsetir.schedule.operators import schedule_for
    func = CUDA_KERNELS["spmm"].specialize({"feat_size": 128})
    kernel = sparsetir.build(schedule_for("spmm", sparsetir.lower_sparse_iter(func), 128,
                                          "cuda"), "cuda", schedule="none")
    alignment = {p.name: p.alignment for p in kernel.signature.params
                 if hasattr(p, "alignment")}
    assert alignment["x"] == alignment["y"] == 16    # float4 over features
    assert alignment["indices"] == alignment["a"] == 4    # one element for all lanes
