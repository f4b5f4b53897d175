"""The fp16 BSR SpMM (op ``bsr_spmm``, kernel ``tc_bsrmm``): seeded block-sparse matrices, the
kernel's inputs, torch's answer and torch's fp16 contenders.

``out = A @ x``: ``A`` a ``rows x cols`` matrix of ``block x block`` blocks, each present with
probability 10% (SparseTIR's PruneBERT-style setting), standard normal values in fp16; ``x``
``cols x feat`` standard normal in fp16; ``out`` float32. Products of fp16 values are exact in
float32, so the kernel and the reference (float32 dense matmul of the same fp16 values) differ
only in how the float32 sums are rounded (tensor cores add the products of an MMA with their own
rounding, not IEEE's). ``RTOL`` and ``ATOL`` are 1e-3, about two fp16 roundings: far above
those differences, far below what a wrong block or index gives. Matrices are made with
numpy from a seed derived from their shape and block size, so every machine builds the same ones.

Example
-------
>>> matrix = make(512, 384, 32)
>>> inputs = make_inputs(matrix, 64, torch.device("cpu"))   # by role; torch.device("cuda") on a GPU
>>> reference(inputs).shape                                 # float32
torch.Size([512, 64])
>>> contenders(inputs)["dense"]().dtype                     # fp16 A @ x (cuBLAS on a GPU)
torch.float16
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import torch

OP = "bsr_spmm"
DENSITY = 0.1
SHAPES = ((4096, 4096), (16384, 8192))  # (rows, cols) timed on the GPU; multiples of 32
RTOL, ATOL = 1e-3, 1e-3


@dataclasses.dataclass(frozen=True)
class BlockSparse:
    """A ``rows x cols`` matrix in BSR form: block-row pointers, block columns (sorted in each
    block row), and the ``(nnzb, block, block)`` fp16 blocks."""

    rows: int
    cols: int
    block: int
    indptr: np.ndarray
    indices: np.ndarray
    blocks: np.ndarray

    @property
    def name(self) -> str:
        return f"bsr-{self.rows}x{self.cols}"

    @property
    def nnz(self) -> int:
        """Stored values (whole blocks)."""
        return self.blocks.size

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator seeded by the shape, the block size and ``purpose``."""
        return np.random.default_rng(zlib.crc32(f"{self.name}/b{self.block}/{purpose}".encode()))


def make(rows: int, cols: int, block: int, density: float = DENSITY) -> BlockSparse:
    """The seeded block-sparse matrix: each block present with probability ``density``.

    >>> m = make(64, 96, 16)
    >>> m.indptr.shape, m.blocks.shape[1:], m.blocks.dtype
    ((5,), (16, 16), dtype('float16'))
    """
    if rows % block or cols % block:
        raise ValueError(f"{rows} x {cols} is not a whole number of {block} x {block} blocks")
    empty = BlockSparse(rows, cols, block, np.zeros(1, np.int32), np.zeros(0, np.int32),
                        np.zeros((0, block, block), np.float16))
    rng = empty.rng("pattern")
    present = rng.random((rows // block, cols // block)) < density
    indptr = np.zeros(rows // block + 1, np.int32)
    np.cumsum(present.sum(axis=1), out=indptr[1:])
    indices = np.nonzero(present)[1].astype(np.int32)
    blocks = rng.standard_normal((indices.size, block, block), dtype=np.float32)
    return dataclasses.replace(empty, indptr=indptr, indices=indices,
                               blocks=blocks.astype(np.float16))


def make_inputs(matrix: BlockSparse, feat: int, device) -> dict:
    """The kernel's inputs by role (``runner/bundle.py``), the output filled with NaN, and the
    matrix's ``shape``."""
    x = matrix.rng(f"x/{feat}").standard_normal((matrix.cols, feat), dtype=np.float32)
    return {
        "blocks": torch.from_numpy(matrix.blocks).to(device),
        "x": torch.from_numpy(x.astype(np.float16)).to(device),
        "out": torch.full((matrix.rows, feat), float("nan"), device=device),
        "indptr": torch.from_numpy(matrix.indptr).to(device),
        "indices": torch.from_numpy(matrix.indices).to(device),
        "block_rows": matrix.rows // matrix.block, "block_cols": matrix.cols // matrix.block,
        "nnzb": matrix.indices.size, "shape": (matrix.rows, matrix.cols),
    }


def reference(inputs: dict) -> torch.Tensor:
    """``A @ x`` in float32 from the fp16 values: torch's BSR made dense, then a matmul."""
    return _bsr(inputs, inputs["blocks"].float()).to_dense() @ inputs["x"].float()


def contenders(inputs: dict) -> dict:
    """Functions of no arguments computing ``A @ x`` in fp16 with torch: ``torch_bsr``, its BSR
    SpMM (which may be unsupported for fp16 on a device: it raises then), and ``dense``, a dense
    matmul of ``A`` made dense (cuBLAS on a GPU)."""
    bsr = _bsr(inputs, inputs["blocks"])
    dense, x = bsr.to_dense(), inputs["x"]
    return {"torch_bsr": lambda: bsr @ x, "dense": lambda: dense @ x}


def _bsr(inputs: dict, values: torch.Tensor) -> torch.Tensor:
    return torch.sparse_bsr_tensor(inputs["indptr"], inputs["indices"], values, inputs["shape"])
