"""The folder for a GPU machine without TVM (``benchmarks/gpu/package.py``), checked without a GPU.

The package is written once into a temporary folder (nvcc compiles the kernels; skipped without
nvcc). The tests check its size, that its JSON files agree with the manifest, the libraries and
each other (the tensor-core BSR SpMM's tiles 16-byte aligned), and that its own CPU self-test
passes in a fresh process that never imports the ``tvm`` or ``tvm_ffi`` packages, and fails when
a CSR or the BSR kernel's parameter order is wrong. The runner refuses a misaligned tensor.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "benchmarks" / "gpu" / "package.py"
RUNNER = ROOT / "benchmarks" / "gpu" / "runner"
MAX_BYTES = 40 * 2**20
# the self-test, run from the folder, then proof that no TVM Python package was imported
SELFTEST = ("import sys, run; code = run.main(['--selftest-cpu']); "
            "assert not {'tvm', 'tvm_ffi'} & set(sys.modules), 'imported TVM'; sys.exit(code)")
CSR = {"indptr", "indices", "rows", "cols", "nnz"}
ROLES = {  # what each op reads besides its output
    "spmm": {"values", "x"} | CSR, "spmm_unweighted": {"x"} | CSR, "sddmm": {"x", "y"} | CSR,
    "bsr_spmm": {"blocks", "x", "indptr", "indices", "block_rows", "block_cols", "nnzb"},
}
SEGMENTS = {"seg_ptr", "seg_rows", "indices", "segments", "rows", "cols", "nnz"}
SEGMENT_ROLES = {"spmm": {"values", "x"} | SEGMENTS, "spmm_unweighted": {"x"} | SEGMENTS,
                 "sddmm": {"x", "y"} | SEGMENTS}
DATA = {"values", "x", "y", "blocks", "out"}  # the rest are int32 indices and sizes
LIBRARIES = 34

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
        packaged.add((spec["kernel"], spec["op"], spec.get("block_size"), spec["feat_size"]))
        roles = {p["role"]: p for p in spec["params"]}
        assert len(roles) == len(spec["params"])
        segmented = spec["kernel"].endswith("_segments")
        assert set(roles) == (SEGMENT_ROLES if segmented else ROLES)[spec["op"]] | {"out"}
        scalars = 3 + segmented                                  # + the segment count
        assert [p["kind"] for p in spec["params"]] == \
            ["buffer"] * (len(roles) - scalars) + ["scalar"] * scalars
        assert all(roles[r]["dtype"] == "int32" for r in set(roles) - DATA)
        assert [p["role"] for p in spec["params"] if p.get("written")] == ["out"]
        outputs = {"sddmm": "nnz",
                   "bsr_spmm": f"mb * {spec.get('block_size', 0) * spec['feat_size']}"}
        assert roles["out"]["length"] == outputs.get(spec["op"], f"m * {spec['feat_size']}")
        if spec["op"] == "bsr_spmm":
            assert [roles[r]["alignment"] for r in ("blocks", "x", "out")] == [16] * 3
    zoo = {(kernel, op, None, feat) for kernel, op in
           [("csrmm", "spmm"), ("sddmm", "sddmm"), ("fused_sddmm", "sddmm")]
           for feat in (32, 128)}
    ops = {(f"ops_{op}{form}", op, None, feat)
           for op, form in [("spmm", ""), ("spmm_unweighted", ""), ("sddmm", ""),
                            ("spmm", "_segments"), ("spmm_unweighted", "_segments"),
                            ("sddmm", "_segments")]
           for feat in (32, 64, 128, 256)}
    tensorcore = {("tc_bsrmm", "bsr_spmm", block, feat) for block in (16, 32) for feat in (64, 128)}
    assert packaged == zoo | ops | tensorcore


def test_device_run_is_one_call_with_a_log_and_a_limit(bundle, tmp_path):
    """The one call the GPU machine makes, rehearsed here: the self-test passes, the timed run
    says there is no GPU, all of it in OUT_DIR/run.log, within the limit given."""
    out = tmp_path / "out"
    result = subprocess.run(["sh", str(bundle / "device_run.sh"), str(out), "200"],
                            env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                            text=True, timeout=260)
    assert result.returncode == 0, result.stderr
    log = (out / "run.log").read_text()
    assert f"selftest-cpu: OK: {LIBRARIES} CUDA libraries" in log and "selftest exit 0" in log
    assert "no CUDA GPU visible" in log and "run exit 2" in log
    for name in json.loads((bundle / "manifest.json").read_text())["kernels"]:
        source = (bundle / "kernels" / f"{name}.cu").read_text()
        assert "__global__" in source, name           # the fallback's CUDA source


def test_cpu_selftest_passes_without_tvm_packages(bundle):
    result = _selftest(bundle)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"selftest-cpu: OK: {LIBRARIES} CUDA libraries" in result.stdout


@pytest.mark.parametrize("kernel, first, second, problem", [
    ("csrmm_f32", 1, 2, "cora"),                       # b and c
    ("ops_spmm_segments_f32", 3, 4, "cora/s1"),        # seg_ptr and seg_rows
    ("tc_bsrmm_b16_f64", 5, 6, "bsr-512x384/b16"),     # mb and nb
])
def test_cpu_selftest_catches_a_wrong_parameter_order(bundle, tmp_path, kernel, first, second,
                                                      problem):
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    path = broken / "kernels" / f"{kernel}.json"
    spec = json.loads(path.read_text())
    params = spec["params"]
    params[first], params[second] = params[second], params[first]
    path.write_text(json.dumps(spec))
    result = _selftest(broken)
    assert result.returncode == 1
    assert f"{kernel} (CPU twin) on {problem}" in result.stdout


def test_runner_refuses_a_misaligned_tensor():
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("gpu_runner_bundle", RUNNER / "bundle.py")
    bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bundle)
    kernel = {"name": "k", "params": [{"name": "x", "role": "x", "kind": "buffer",
                                       "alignment": 16}]}
    x = torch.zeros(16, dtype=torch.float16)
    assert bundle.arguments(kernel, {"x": x}) == [x]
    with pytest.raises(ValueError, match="16-byte aligned"):
        bundle.arguments(kernel, {"x": x[1:]})
