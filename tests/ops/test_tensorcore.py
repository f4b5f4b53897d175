"""Tensor-core BSR SpMM (``sparsetir.ops.tensorcore``) in fp16 with fp32 sums.

* ``cuda``: for block sizes 16 and 32, the CUDA source (WMMA fragments, loads, stores and
  ``mma_sync``; the golden file ``golden/test_tensorcore/...-<block size>.txt``, the same for
  both architectures, ``pytest --update-golden`` rewrites it) has one warp per 16 rows and
  16-byte copies, nvcc builds it for sm_80 and sm_90 (a fatbin in the exported library), and
  nvcc turns it into tensor-core PTX (``wmma.mma.sync``).
* CPU: the same schedule up to the tensorize steps (fragments in ``local`` memory), its thread
  bindings made serial (``cuda_emulation``, both orders), equals ``scipy.sparse.bsr_matrix @ X``.
  BSR needs whole blocks: the 70 x 50 matrix is padded to whole blocks by ``csr_to_bsr`` and X
  gets zero rows to match; one block row is empty, and the output starts as NaN.
* ``gpu``: the real kernel against torch on a GPU (skipped without one).
"""

from __future__ import annotations

import functools
import subprocess

import numpy as np
import pytest
import scipy.sparse

import sparsetir
from cuda_emulation import emulate
from sparsetir.ops.tensorcore import (bsr_operands, bsr_spmm_tensorcore, bsrmm_fp16,
                                      schedule_bsr_spmm_tensorcore)
from sparsetir.backend.target import cuda_source, export

BLOCK_SIZES = (16, 32)
ARCHS = ("sm_80", "sm_90")
PARAMS = ("a", "x", "y", "indptr", "indices", "mb", "nb", "nnzb")
ROWS, COLS = 70, 50                       # not multiples of either block size
FATBIN_MAGIC = bytes.fromhex("50ed55ba")


@functools.lru_cache(maxsize=None)
def _cuda_kernel(block_size: int, arch: str):
    return bsr_spmm_tensorcore(block_size, 64, {"kind": "cuda", "arch": arch})


def _operands(block_size: int, feat: int) -> tuple:
    """(operands, the matrix) for a 70 x 50 matrix whose second block row is empty."""
    rng = np.random.default_rng(block_size + feat)
    matrix = scipy.sparse.random(ROWS, COLS, density=0.1, format="lil", random_state=rng,
                                 dtype=np.float32)
    matrix[block_size:2 * block_size] = 0
    x = rng.standard_normal((COLS, feat)).astype(np.float32)
    operands = bsr_operands(matrix, x, block_size)
    assert operands["indptr"][1] == operands["indptr"][2]      # block row 1 is empty
    return operands, matrix


def _expected(operands: dict, block_size: int) -> np.ndarray:
    """scipy's BSR product of the fp16 operands, in float64, shaped like ``y``."""
    shape = (operands["mb"] * block_size, operands["nb"] * block_size)
    bsr = scipy.sparse.bsr_matrix((operands["a"].astype(np.float64), operands["indices"],
                                   operands["indptr"]), shape=shape)
    x = operands["x"].reshape(shape[1], -1).astype(np.float64)
    return (bsr @ x).reshape(operands["y"].shape)


@pytest.mark.cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_cuda_uses_wmma_and_builds(block_size, arch, tmp_path, golden):
    kernel = _cuda_kernel(block_size, arch)
    src = cuda_source(kernel.executable)
    golden(src, variant=str(block_size))
    assert f"__launch_bounds__({32 * block_size // 16})" in src     # one warp per 16 rows
    assert "*(uint4*)(X_ptr" in src and "*(float4*)(Y_ptr" in src       # 16-byte copies
    alignment = {p.name: getattr(p, "alignment", None) for p in kernel.signature.params}
    assert alignment["a"] == alignment["x"] == alignment["y"] == 16
    library = export(kernel.executable, tmp_path / "bsrmm.so").read_bytes()
    assert FATBIN_MAGIC in library
    (tmp_path / "bsrmm.cu").write_text(src)
    subprocess.run(["nvcc", f"-arch={arch}", "-ptx", "-o", str(tmp_path / "bsrmm.ptx"),
                    str(tmp_path / "bsrmm.cu")], check=True, capture_output=True)
    ptx = (tmp_path / "bsrmm.ptx").read_text()
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in ptx


@pytest.mark.parametrize("block_size, feat, reverse", [(16, 48, False), (32, 64, False),
                                                       (32, 32, True)])
def test_schedule_on_cpu_equals_scipy_bsr(block_size, feat, reverse):
    kernel = emulate(schedule_bsr_spmm_tensorcore(block_size, feat, tensorize=False), reverse)
    operands, matrix = _operands(block_size, feat)
    kernel(*[operands[p] for p in PARAMS])
    np.testing.assert_allclose(operands["y"], _expected(operands, block_size), rtol=1e-5,
                               atol=1e-5)
    assert not operands["y"][1].any()                                # the empty block row
    y = operands["y"].reshape(-1, feat)[:ROWS]
    x = operands["x"].reshape(-1, feat)[:COLS].astype(np.float64)
    np.testing.assert_allclose(y, matrix @ x, rtol=1e-2, atol=1e-2)  # A rounded to fp16


def test_stage1_kernel_takes_the_operands_on_cpu():
    """The Stage I kernel with sparsetir's default CPU schedule (shapes checked at the call)
    takes ``bsr_operands`` as they are and agrees with scipy."""
    kernel = sparsetir.build(bsrmm_fp16.specialize({"blk": 16, "feat_size": 32}), "llvm")
    operands, _ = _operands(16, 32)
    kernel(*[operands[p] for p in PARAMS])
    np.testing.assert_allclose(operands["y"], _expected(operands, 16), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_size, feat, tiles", [(8, 32, 0), (16, 40, 0), (16, 64, 3)])
def test_sizes_refused(block_size, feat, tiles):
    with pytest.raises(ValueError):
        schedule_bsr_spmm_tensorcore(block_size, feat, tiles)


@pytest.mark.gpu
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_gpu_kernel_equals_torch(block_size):
    import torch  # pylint: disable=import-outside-toplevel
    import tvm  # pylint: disable=import-outside-toplevel
    arch = "sm_" + tvm.cuda(0).compute_version.replace(".", "")
    operands, _ = _operands(block_size, 64)
    args = {p: torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v
            for p, v in operands.items()}
    _cuda_kernel(block_size, arch)(*[args[p] for p in PARAMS])
    shape = (operands["mb"] * block_size, operands["nb"] * block_size)
    bsr = torch.sparse_bsr_tensor(args["indptr"], args["indices"], args["a"].float(), shape)
    expected = bsr.to_dense() @ args["x"].reshape(shape[1], 64).float()
    torch.testing.assert_close(args["y"].reshape(shape[0], 64), expected, rtol=1e-3, atol=1e-3)
