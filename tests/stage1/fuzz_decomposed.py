"""Random matrices through the decomposed kernels of ``decomposed_cases`` in one process;
prints a JSON summary.

``python fuzz_decomposed.py CASES SEED`` builds every kernel once, then makes CASES calls:
a fresh random matrix (empty rows, rows of varied lengths, rows ending at column 0, one or
many rows or columns) converted by ``sparsetir.format``, the output prefilled with NaN, one
kernel. Every call must give scipy's ``A @ B``, SparseTIR's ELL rule on a row longer than
its widest bucket too (the row is cut into ELL rows sharing its id, which add in turn).
A signal kills the process, which the calling test reports with the last case on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decomposed_cases import CASES, ELL_WIDTHS, FEAT  # noqa: E402

from sparsetir.runtime import ArgumentError  # noqa: E402


def random_matrix(rng) -> scipy.sparse.csr_matrix:
    m, n = int(rng.integers(1, 48)), int(rng.integers(1, 40))
    cap = int(rng.choice([1, 3, max(ELL_WIDTHS), 2 * max(ELL_WIDTHS)]))
    lengths = rng.integers(0, min(cap, n) + 1, m)
    lengths[rng.random(m) < 0.25] = 0                            # empty rows
    rows = []
    for length in lengths:
        columns = np.sort(rng.choice(n, size=length, replace=False))
        if length and rng.random() < 0.2:                        # a row ending at column 0
            columns = np.array([0])
        rows.append(columns)
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int32)
    indices = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    data = rng.uniform(-1, 1, indices.size).astype(np.float32)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(m, n))


def main(cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = sorted(CASES)
    for name in names:
        CASES[name].build()
    stats = {"cases": 0, "right": 0, "split_rows": 0, "wrong": [], "bad_refusal": []}
    for case in range(cases):
        name = names[int(rng.integers(len(names)))]
        A = random_matrix(rng)
        print(f"case {case}: {name} {A.shape} nnz={A.nnz}", file=sys.stderr, flush=True)
        B = rng.standard_normal((A.shape[1], FEAT)).astype(np.float32)
        C = np.full((A.shape[0], FEAT), np.nan, np.float32)
        stats["cases"] += 1
        try:
            CASES[name].build()(*CASES[name].arguments(A, B, C))
        except ArgumentError as err:
            stats["bad_refusal"].append(f"{case} {name}: {err}")
            continue
        if np.allclose(C, A @ B, rtol=1e-4, atol=1e-4):
            stats["right"] += 1
            long_rows = A.nnz and np.diff(A.indptr).max() > max(ELL_WIDTHS)
            stats["split_rows"] += bool(name == "ell_sparsetir" and long_rows)
        else:
            stats["wrong"].append(f"{case} {name} {A.shape}")
    print(json.dumps(stats))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
