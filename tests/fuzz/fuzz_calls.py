"""Random calls of zoo kernels, valid and invalid, in one process; prints a JSON summary.

``python fuzz_calls.py CASES SEED`` builds the kernels once and makes CASES random calls:
valid ones (fresh inputs, misaligned or strided or torch arrays) must match the reference,
invalid ones (one argument broken: a row pointer, an index, a dtype, a length, a scalar) must
raise ``ArgumentError``. A signal kills the process, which the calling test reports with the
last case printed to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import sparse_inputs as si  # noqa: E402
import torch  # noqa: E402
from kernel_zoo import CASES  # noqa: E402

import sparsetir  # noqa: E402
from sparsetir.runtime import ArgumentError  # noqa: E402

KERNELS = ["csrmm", "sddmm", "csr_reduce", "csr_element_wise", "segment_reduce", "ellmm",
           "bsrmm", "fused_sddmm", "csrmm_dense_iter", "rgcn_homo_forward", "csr2bsr"]


def _misaligned(array: np.ndarray) -> np.ndarray:
    raw = np.zeros(array.nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64 + array.itemsize
    view = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


def _strided(array: np.ndarray) -> np.ndarray:
    big = np.zeros(array.size * 2, array.dtype)
    view = big[::2]
    view[...] = array.reshape(-1)
    return view


def _breakers(name: str, inputs: dict, rng) -> list:
    """Ways to make one argument of ``inputs`` invalid: (description, changed inputs)."""
    out = []
    for key, value in inputs.items():
        if isinstance(value, np.ndarray):
            out.append((f"{key} as float64", {key: value.astype(np.float64)}))
            if value.size:
                out.append((f"{key} one short", {key: value[:-1].copy()}))
            if "indptr" in key and value.size > 1:
                bad = value.copy()
                bad[-1] += 1
                out.append((f"{key} last entry", {key: bad}))
                rows = np.flatnonzero(value[:-1] >= 1)
                if rows.size:
                    bad = value.copy()
                    r = rng.choice(rows)
                    bad[r + 1] = value[r] - 1
                    out.append((f"{key} decreasing", {key: bad}))
            if ("indices" in key or key == "etype") and value.size:
                bad = value.copy()
                bad[rng.integers(value.size)] = rng.choice([-1, 10 ** 7])
                out.append((f"{key} out of range", {key: bad}))
        elif isinstance(value, int):
            out.append((f"{key} as float", {key: value + 0.5}))
    return out


def main(cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    kernels = {name: sparsetir.build(CASES[name].func, "llvm") for name in KERNELS}
    stats = {"cases": 0, "valid_right": 0, "invalid_refused": 0, "wrong": [], "silent": []}
    for n in range(cases):
        name = KERNELS[rng.integers(len(KERNELS))]
        case = CASES[name]
        size = si.SIZES[rng.integers(len(si.SIZES))]
        inputs = case.make_inputs(np.random.default_rng(rng.integers(2 ** 31)), size)
        params = [p.name for p in case.func.params]
        valid = rng.random() < 0.4
        print(f"case {n}: {name} {size} {'valid' if valid else 'invalid'}", file=sys.stderr,
              flush=True)
        stats["cases"] += 1
        if valid:
            for out in case.outputs:
                inputs[out] = np.full_like(inputs[out], np.nan)
            expected = case.reference(inputs)
            form = rng.integers(3)
            args = {k: (v if not isinstance(v, np.ndarray) else
                        _misaligned(v) if form == 0 else _strided(v) if form == 1 else
                        torch.from_numpy(v.copy())) for k, v in inputs.items()}
            kernels[name](*[args[p] for p in params])
            for out in case.outputs:
                got = args[out].numpy() if isinstance(args[out], torch.Tensor) else args[out]
                if not np.allclose(got, expected[out], rtol=case.rtol, atol=case.atol):
                    stats["wrong"].append(f"{name}/{size}/form {form}: {out}")
                    break
            else:
                stats["valid_right"] += 1
            continue
        breakers = _breakers(name, inputs, rng)
        what, change = breakers[rng.integers(len(breakers))]
        merged = {**inputs, **change}
        try:
            kernels[name](*[merged[p] for p in params])
        except ArgumentError:
            stats["invalid_refused"] += 1
        else:
            stats["silent"].append(f"{name}/{size}: {what}")
    print(json.dumps(stats))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
