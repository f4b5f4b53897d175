"""How long the run-time format conversions of ``sparsetir.format`` take on a large matrix.

The matrix is SYNTHETIC: 100,000 x 100,000, row lengths drawn from a Pareto (power-law)
distribution (seed 0, ~1,000,000 nonzeros, a few rows of thousands of entries, many
of one or two), columns uniform at random. ``csf_to_ell3d`` gets the same nonzeros spread
over 8 relations; ``row_tiles`` the sorted row index of every nonzero. Each line is the
median of 5 timed calls after one warm-up call, in one process.

Run: ``.venv/bin/python benchmarks/format_conversion.py [--rows 100000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from sparsetir import format as fmt
from sparsetir.runtime.timing import median_seconds

BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def power_law_csr(rows: int, cols: int, seed: int = 0) -> tuple:
    """``(indptr, indices, data)`` int32/int32/float32, Pareto row lengths (mean ~10)."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.pareto(1.6, rows) * 6.4, cols).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = rng.integers(0, cols, int(indptr[-1])).astype(np.int32)
    data = rng.uniform(-1, 1, indices.size).astype(np.float32)
    return indptr, indices, data


def as_csf(indptr, indices, num_rels: int, seed: int = 0) -> tuple:
    """The nonzeros spread at random over ``num_rels`` relations, as two CSF levels."""
    rng = np.random.default_rng(seed)
    row_of = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    rel_of = rng.integers(0, num_rels, indices.size)
    order = np.lexsort((row_of, rel_of))
    key = rel_of[order] * (indptr.size - 1) + row_of[order]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    fiber_rel = rel_of[order][starts]
    indptr_0 = np.searchsorted(fiber_rel, np.arange(num_rels + 1)).astype(np.int32)
    indptr_1 = np.append(starts, indices.size).astype(np.int32)
    return indptr_0, row_of[order][starts].astype(np.int32), indptr_1, indices[order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = cols = args.rows
    indptr, indices, data = power_law_csr(rows, cols)
    shape = (rows, cols)
    csf = as_csf(indptr, indices, 8)
    sorted_rows = np.repeat(np.arange(rows), np.diff(indptr)).astype(np.int32)
    lengths = np.diff(indptr)
    print(f"synthetic power-law CSR {rows} x {cols}, {indices.size} nonzeros (seed 0), "
          f"row length max {lengths.max()}, empty rows {int((lengths == 0).sum())}; "
          f"{platform.machine()}, numpy {np.__version__}; median of {args.repeat}")
    cases = {
        "csr_to_ell (10 buckets 1..512)":
            lambda: fmt.csr_to_ell(indptr, indices, data, shape, BUCKETS),
        "column_part_hyb (4 parts, 10 buckets)":
            lambda: fmt.column_part_hyb(rows, cols, indptr, indices, 4, BUCKETS, data=data),
        "row_tiles (1M sorted rows, tile 32)":
            lambda: fmt.row_tiles(sorted_rows, rows, 32),
        "condense (tile 16, group 8)":
            lambda: fmt.condense(indptr, indices, 16, 8),
        "csf_to_ell3d (8 relations, 10 buckets)":
            lambda: fmt.csf_to_ell3d(*csf, BUCKETS, rows_per_block=[max(1, 32 // w)
                                                                    for w in BUCKETS]),
        "csr_pad (multiple 32)":
            lambda: fmt.csr_pad(indptr, indices, data, shape, 32),
    }
    for name, fn in cases.items():
        print(f"{name:42s} {median_seconds(fn, args.repeat) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
