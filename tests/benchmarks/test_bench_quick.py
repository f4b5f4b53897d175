"""``benchmarks/bench.py --quick`` end to end, and the synthetic graph generator it uses.

The quick run (cora and citeseer, feature size 32, float32 and bfloat16) runs in a subprocess
once for the module. Every row must be a checked, finite measurement or n/a: n/a only for an
operator a library has no call for, or a contender whose library is not installed here (MKL,
GraphBLAS: benchmark-only dependencies, ``benchmarks/requirements.txt``). ours, scipy, torch and
DGL are always installed, so they must run. In bfloat16 ours and DGL must run (checked within
bfloat16's tolerance) and torch.sparse, which refuses bfloat16 on the CPU, must be reported as
refusing with torch's message, never as a time. The chart needs matplotlib; the test of every contender and the chart is
skipped when a benchmark-only package is missing.
"""

import csv
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from sparsetir.data import power_law_graph

ROOT = Path(__file__).resolve().parents[2]
BENCH_ONLY = ("matplotlib", "sparse_dot_mkl", "graphblas")
OPTIONAL = ("mkl", "graphblas")  # contenders whose library is a benchmark-only dependency
NOT_A_CALL = {("scipy", "sddmm"), ("mkl", "sddmm")}
REFUSES_BFLOAT16 = ("torch_sparse",)   # torch 2.13: CSR @ and sampled_addmm, on the CPU
NUMBERS = ("median_ms", "p25_ms", "p75_ms", "min_ms", "max_ms", "gbps", "roofline",
           "speedup_of_ours", "first_call_ms", "setup_ms", "max_error")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py"), "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "bench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return out, rows, proc.stdout


def test_quick_run_checks_every_result(quick_run):
    out, rows, stdout = quick_run
    assert {r["graph"] for r in rows} == {"cora", "citeseer"}
    assert {r["op"] for r in rows} == {"spmm", "spmm_unweighted", "sddmm"}
    half = {(r["contender"], r["op"], r["graph"]) for r in rows if r["dtype"] == "bfloat16"}
    assert half == {(c, op, g) for c in ("ours", "dgl", "torch_sparse")
                    for op in ("spmm", "spmm_unweighted", "sddmm") for g in ("cora", "citeseer")}
    for r in rows:
        where = f"{r['contender']} {r['op']} {r['graph']} {r['dtype']}: {r['note']}"
        if r["status"] == "refused":
            assert r["dtype"] == "bfloat16" and r["contender"] in REFUSES_BFLOAT16, where
            assert r["median_ms"] == "" and "BFloat16" in r["note"], where
            continue
        if r["status"] == "n/a":
            optional = r["contender"] in OPTIONAL and "not installed" in r["note"]
            assert (r["contender"], r["op"]) in NOT_A_CALL or optional, where
            continue
        assert r["status"] == "ok" and r["checked"] == "True", where
        for column in NUMBERS:
            assert math.isfinite(float(r[column])), (column, where)
        assert float(r["max_error"]) <= 1.0, where
        if r["dtype"] == "bfloat16":
            assert math.isfinite(float(r["speedup_over_float32"])), where
    sidecar = json.loads((out / "bench.json").read_text())
    assert sidecar["machine"]["cpus_usable"] >= 1 and sidecar["machine"]["bandwidth_gbps"] > 0
    assert "speedup of ours" in stdout and sidecar["machine"]["llvm_cpu"] in stdout
    assert "bfloat16 over float32" in stdout and "refuses bfloat16" in stdout
    assert (out / "bench.png").exists() == (importlib.util.find_spec("matplotlib") is not None)


def test_quick_run_every_contender_and_chart(request):
    missing = [m for m in BENCH_ONLY if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"benchmark-only packages not installed: {', '.join(missing)}")
    out, rows, _ = request.getfixturevalue("quick_run")  # only now: a skip costs no run
    for r in rows:
        refused = r["dtype"] == "bfloat16" and r["contender"] in REFUSES_BFLOAT16
        if (r["contender"], r["op"]) not in NOT_A_CALL and not refused:
            assert r["status"] == "ok", (r["contender"], r["op"], r["graph"], r["note"])
    assert (out / "bench.png").stat().st_size > 10_000


def test_power_law_graph():
    A = power_law_graph(20_000, 150_000, seed=3)
    assert A.shape == (20_000, 20_000) and A.nnz == 150_000 and A.dtype == np.float32
    assert A.indptr.dtype == np.int32 and A.indices.dtype == np.int32
    assert A.has_canonical_format  # sorted, no duplicates
    B = A.copy()
    B.sum_duplicates()
    assert B.nnz == A.nnz
    lengths = np.diff(A.indptr)
    assert (lengths == 0).sum() > 0 and lengths.max() > 20 * lengths.mean()  # skewed
    assert (power_law_graph(20_000, 150_000, seed=3) != A).nnz == 0
    assert (power_law_graph(20_000, 150_000, seed=4) != A).nnz > 0
    with pytest.raises(ValueError):
        power_law_graph(100, 5_000)


def test_bfloat16_check_passes_float32_sums_and_catches_bfloat16_sums():
    """The bfloat16 tolerance (``workload.RTOL``): a product of bfloat16-rounded inputs summed
    in float32 and rounded once passes; the same summed in bfloat16 along a long row of
    positive terms (where the running sum outgrows the terms) fails."""
    import torch   # pylint: disable=import-outside-toplevel
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import workload   # pylint: disable=import-outside-toplevel
    A = scipy.sparse.csr_matrix(np.random.default_rng(5).uniform(0.5, 1.5, (3, 2000))
                                .astype(np.float32))
    X = np.random.default_rng(6).uniform(0, 1, (2000, 8)).astype(np.float32)
    expected, bound = workload.reference(A, "spmm", X, None)
    rounded = torch.from_numpy(X).bfloat16().float().numpy()
    wide = torch.from_numpy(np.asarray(A @ rounded)).bfloat16().float().numpy()
    assert workload.check(wide, expected, bound, "bfloat16") <= 1
    narrow = torch.zeros(3, 8, dtype=torch.bfloat16)
    values, Xb = torch.from_numpy(A.toarray()).bfloat16(), torch.from_numpy(X).bfloat16()
    for k in range(2000):
        narrow += values[:, k:k + 1] * Xb[k]
    assert workload.check(narrow.float().numpy(), expected, bound, "bfloat16") > 1


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_every_input_starts_where_numpy_puts_a_large_array(op):
    """Each contender gets its inputs at ``workload.INPUT_OFFSET`` bytes past a cache line,
    whatever its process allocated before (where a gathered row starts changes the lines it
    touches), with the seeded values."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import workload   # pylint: disable=import-outside-toplevel
    A = power_law_graph(300, 2_000, seed=7)
    for _ in range(3):
        scratch = [np.empty(n, np.uint8) for n in (5, 70_000, 300_001)]   # move the allocator
        X, Y = workload.inputs(A, op, 32)
        del scratch
        for array in (X,) if Y is None else (X, Y):
            assert array.ctypes.data % workload.CACHE_LINE == workload.INPUT_OFFSET == 16
            assert array.dtype == np.float32 and array.flags.c_contiguous
    rng = np.random.default_rng(32)
    np.testing.assert_array_equal(X, rng.standard_normal(X.shape, np.float32))
