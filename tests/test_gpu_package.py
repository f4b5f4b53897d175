"""The folder for a GPU machine without TVM (``benchmarks/gpu/package.py``), checked without a GPU.

The package is written once into a temporary folder (nvcc compiles the kernels; skipped without
nvcc). The tests check its size, that its JSON files agree with the manifest, the libraries and
each other, and that its own CPU self-test passes in a fresh process that never imports the
``tvm`` or ``tvm_ffi`` packages, and fails when a kernel's parameter order is wrong.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "benchmarks" / "gpu" / "package.py"
MAX_BYTES = 40 * 2**20
# the self-test, run from the folder, then proof that no TVM Python package was imported
SELFTEST = ("import sys, run; code = run.main(['--selftest-cpu']); "
            "assert not {'tvm', 'tvm_ffi'} & set(sys.modules), 'imported TVM'; sys.exit(code)")

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("nvcc") is None,
                                                  reason="packaging compiles CUDA with nvcc")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    subprocess.run([sys.executable, str(PACKAGE), "--out", str(out), "--arch", "sm_90"],
                   check=True, capture_output=True, text=True, timeout=600)
    return out


def _selftest(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SELFTEST], cwd=folder, capture_output=True,
                          text=True, timeout=300)


def test_package_is_small_and_has_no_compiler(bundle):
    files = [path for path in bundle.rglob("*") if path.is_file()]
    assert sum(path.stat().st_size for path in files) < MAX_BYTES
    assert "libtvm_compiler.so" not in {path.name for path in files}


def test_json_files_agree(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["arch"] == "sm_90"
    for path in manifest["runtime"] + [manifest["cuda_stub"]]:
        assert (bundle / path).is_file(), path
    for graph in manifest["graphs"]:
        assert (bundle / "data" / f"{graph}.npz").is_file(), graph
    packaged = set()
    for name in manifest["kernels"]:
        spec = json.loads((bundle / "kernels" / f"{name}.json").read_text())
        assert spec["name"] == name and spec["arch"] == manifest["arch"]
        assert (bundle / "kernels" / spec["library"]).is_file()
        assert (bundle / "kernels" / spec["cpu_library"]).is_file()
        packaged.add((spec["kernel"], spec["op"], spec["feat_size"]))
        roles = {p["role"]: p for p in spec["params"]}
        assert len(roles) == len(spec["params"])
        inputs = {"spmm": {"values", "x"}, "spmm_unweighted": {"x"}, "sddmm": {"x", "y"}}
        assert set(roles) == inputs[spec["op"]] | {"out", "indptr", "indices", "rows", "cols",
                                                   "nnz"}
        assert [p["kind"] for p in spec["params"]] == \
            ["buffer"] * (len(roles) - 3) + ["scalar"] * 3
        assert all(roles[r]["dtype"] == "int32" for r in ("indptr", "indices", "rows", "nnz"))
        assert [p["role"] for p in spec["params"] if p.get("written")] == ["out"]
        outputs = {"sddmm": "nnz"}
        assert roles["out"]["length"] == outputs.get(spec["op"], f"m * {spec['feat_size']}")
    zoo = {(kernel, op, feat) for kernel, op in
           [("csrmm", "spmm"), ("sddmm", "sddmm"), ("fused_sddmm", "sddmm")] for feat in (32, 128)}
    ops = {(f"ops_{op}", op, feat) for op in ("spmm", "spmm_unweighted", "sddmm")
           for feat in (32, 64, 128, 256)}
    assert packaged == zoo | ops


def test_cpu_selftest_passes_without_tvm_packages(bundle):
    result = _selftest(bundle)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "selftest-cpu: OK: 18 CUDA libraries" in result.stdout


def test_cpu_selftest_catches_a_wrong_parameter_order(bundle, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    path = broken / "kernels" / "csrmm_f32.json"
    spec = json.loads(path.read_text())
    params = spec["params"]
    params[1], params[2] = params[2], params[1]  # b and c swapped
    path.write_text(json.dumps(spec))
    result = _selftest(broken)
    assert result.returncode == 1
    assert "csrmm_f32 (CPU twin) on cora" in result.stdout
