"""Random repeated calls of ``sparsetir.ops.spmm`` / ``sddmm`` on a few ``SparseMatrix``es,
valid and invalid, in one process; prints a JSON summary.

``python fuzz_ops.py CASES SEED``: the matrices are made once and called again and again, so
most calls take the prepared fast path (``runtime.fast_path``) and the rest the general one.
Valid calls (numpy or torch, contiguous, strided, misaligned, negative-bit views, outputs that
held NaN) must match scipy; invalid ones (a wrong dtype, shape or kind, a read-only output, an
output overlapping an operand or the matrix's own arrays, an output leaf that requires grad,
a sparse torch tensor) must raise TypeError, ValueError or ArgumentError before anything is written. A signal kills the process, which the calling test
reports with the last case printed to stderr.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from fuzz_calls import _misaligned  # noqa: E402
from sparse_inputs import skewed_csr  # noqa: E402

import sparsetir.ops as ops  # noqa: E402
from sparsetir.runtime import ArgumentError  # noqa: E402

warnings.simplefilter("ignore")           # torch's warning on views of read-only numpy arrays
FEATS = (1, 8, 32)


def _variant(array: np.ndarray, form: int):
    """``array`` as numpy (0), strided numpy (1), misaligned numpy (2), torch (3), a torch
    negative-bit view holding the same values (4)."""
    if form == 1:
        wide = np.zeros(array.shape + (2,), array.dtype)
        wide[..., 0] = array
        return wide[..., 0]
    if form == 2:
        return _misaligned(array)
    if form == 3:
        return torch.from_numpy(array.copy())
    if form == 4:
        return torch._neg_view(torch.from_numpy(-array))
    return array.copy()


def _host(value) -> np.ndarray:
    return value.resolve_neg().numpy() if isinstance(value, torch.Tensor) else value


def _operands(op: str, shape: tuple, feat: int, rng):
    m, n = shape
    rows_x = n if op == "spmm" else m
    x = rng.standard_normal((rows_x, feat)).astype(np.float32)
    y = rng.standard_normal((n, feat)).astype(np.float32)
    return x, y


def _breakers(op, matrix, x, y, out_shape) -> list:
    """(what, operands, out) calls that must be refused."""
    refused = [
        ("float64 X", (x.astype(np.float64),) + ((y,) if op == "sddmm" else ()), None),
        ("X one row short", (x[:-1],) + ((y,) if op == "sddmm" else ()), None),
        ("out of another shape", (x,) + ((y,) if op == "sddmm" else ()),
         np.empty((out_shape[0] + 1,) + out_shape[1:], np.float32)),
        ("read-only out", (x,) + ((y,) if op == "sddmm" else ()),
         np.broadcast_to(np.float32(0), out_shape)),
        ("out over the matrix's values", (x,) + ((y,) if op == "sddmm" else ()),
         torch.from_numpy(matrix.data)[:int(np.prod(out_shape))].view(out_shape)
         if matrix.nnz >= np.prod(out_shape) else None),
        ("X a list", (x.tolist(),) + ((y,) if op == "sddmm" else ()), None),
        ("X a sparse torch tensor", (torch.from_numpy(x).to_sparse(),)
         + ((torch.from_numpy(y),) if op == "sddmm" else ()), None),
        ("out requires grad", (torch.from_numpy(x),) + ((torch.from_numpy(y),)
                                                         if op == "sddmm" else ()),
         torch.zeros(out_shape, requires_grad=True)),
    ]
    if op == "sddmm":
        refused.append(("numpy X with torch Y", (x, torch.from_numpy(y)), None))
    if op == "spmm" and matrix.shape[0] == matrix.shape[1]:
        refused.append(("out is X", (x,), x))
    return [case for case in refused if not (case[0].startswith("out over") and case[2] is None)]


def main(cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shapes = [(70, 45), (64, 64), (9, 30), (40, 1)]
    matrices = [ops.SparseMatrix(skewed_csr(m, n, seed=i, density=0.1))
                for i, (m, n) in enumerate(shapes)]
    stats = {"cases": 0, "valid_right": 0, "invalid_refused": 0, "wrong": [], "silent": []}
    for case in range(cases):
        matrix = matrices[rng.integers(len(matrices))]
        scipy_matrix = matrix.to_scipy()
        op = ("spmm", "sddmm")[rng.integers(2)]
        feat = FEATS[rng.integers(len(FEATS))]
        x, y = _operands(op, matrix.shape, feat, rng)
        out_shape = (matrix.shape[0], feat) if op == "spmm" else (matrix.nnz,)
        valid = rng.random() < 0.6
        print(f"case {case}: {op} {matrix.shape} feat {feat} "
              f"{'valid' if valid else 'invalid'}", file=sys.stderr, flush=True)
        stats["cases"] += 1
        if valid:
            form = int(rng.integers(5))
            operands = (_variant(x, form),) + ((_variant(y, form),) if op == "sddmm" else ())
            out = None if rng.random() < 0.3 else _variant(np.full(out_shape, np.nan,
                                                                   np.float32), form)
            if op == "spmm":
                expected = scipy_matrix @ x
                got = ops.spmm(matrix, *operands, out=out)
            else:
                coo = scipy_matrix.tocoo()
                expected = (x[coo.row] * y[coo.col]).sum(axis=1)
                got = ops.sddmm(matrix, *operands, out=out)
            if np.allclose(_host(got), expected, rtol=1e-4, atol=1e-4):
                stats["valid_right"] += 1
            else:
                stats["wrong"].append(f"{op}/{matrix.shape}/feat {feat}/form {form}")
            continue
        breakers = _breakers(op, matrix, x, y, out_shape)
        what, operands, out = breakers[rng.integers(len(breakers))]
        before = matrix.data.copy()
        call = ops.spmm if op == "spmm" else ops.sddmm
        try:
            call(matrix, *operands, out=out)
        except (TypeError, ValueError, ArgumentError):
            if np.array_equal(matrix.data, before):
                stats["invalid_refused"] += 1
            else:
                stats["wrong"].append(f"{op}/{what}: the matrix changed")
        else:
            stats["silent"].append(f"{op}/{matrix.shape}/feat {feat}: {what}")
    print(json.dumps(stats))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
