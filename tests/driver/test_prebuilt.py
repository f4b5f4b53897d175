"""Prebuilt kernels (``sparsetir.prebuild``, ``driver.prebuilt``, ``driver.upgrade``): built for
the portable target, loaded on a cache miss without compiling, refused when a file differs from
the manifest or the CPU lacks what the target needs, and replaced by the kernel compiled for
this CPU in the background; numbers checked against scipy."""

import hashlib
import json
import logging
import platform
import shutil
import threading

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir.backend.target import host_target, make_target
from sparsetir import prebuild
from sparsetir.driver import build_module, cache, prebuilt, upgrade

pytest.importorskip("torch")       # the build step runs sparsetir.nn layers

KEY = ("ops", "gspmm", "copy_lhs", "sum", "float32", (16,), (True,), (True,), 0)
A = scipy.sparse.random(9, 7, density=0.4, format="csr", dtype=np.float32, random_state=3)
A = (scipy.sparse.diags((np.arange(9) % 4 != 1).astype(np.float32)) @ A).tocsr()  # empty rows
A.eliminate_zeros()
X = np.random.default_rng(2).standard_normal((7, 16)).astype(np.float32)
ONES = scipy.sparse.csr_matrix((np.ones(A.nnz, np.float32), A.indices, A.indptr), A.shape)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A prebuilt folder holding GCN's 16-feature aggregation (``KEY``), as ``make prebuilt``
    makes it."""
    if not prebuilt.host_runs({"system": platform.system(), "machine": platform.machine(),
                               "cpu_flags": list(prebuilt.CPU_FLAGS)}):
        pytest.skip(f"this CPU does not run {prebuilt.PORTABLE['mcpu']} code")
    out = tmp_path_factory.mktemp("prebuilt")
    manifest = prebuild.build(out, [prebuild.Model("gcn", (32, 16))])
    assert [entry["key"] for entry in manifest["kernels"].values()] == [repr(KEY)]
    return out


@pytest.fixture
def package(shipped, tmp_path, monkeypatch):
    """A copy of ``shipped`` as the package's prebuilt folder, an empty disk cache and an
    empty memory: a fresh install."""
    folder = tmp_path / "prebuilt"
    shutil.copytree(shipped, folder)
    monkeypatch.setattr(prebuilt, "folder", lambda: folder)
    monkeypatch.setenv("SPARSETIR_PREBUILT", "1")
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_MEMORY", {})
    prebuilt._manifest.cache_clear()            # pylint: disable=protected-access
    yield folder
    upgrade.wait()
    prebuilt._manifest.cache_clear()            # pylint: disable=protected-access


@pytest.fixture
def compiles(monkeypatch):
    """The names of the threads each compile ran in, in order."""
    threads = []
    compile_stage2 = build_module.compile_stage2

    def counted(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return compile_stage2(*args, **kwargs)

    monkeypatch.setattr(build_module, "compile_stage2", counted)
    return threads


def _aggregate():
    out = ops.gspmm(ops.SparseMatrix(A), "copy_lhs", "sum", X, None)
    np.testing.assert_allclose(out, ONES @ X, rtol=1e-5, atol=1e-5)
    return out


def _manifest(folder):
    return json.loads((folder / prebuilt.MANIFEST).read_text())


def test_the_build_records_every_file_with_its_size_and_sha256(shipped):
    manifest = _manifest(shipped)
    assert manifest["target"] == prebuilt.PORTABLE and manifest["format"] == prebuilt.FORMAT
    ((name, entry),) = manifest["kernels"].items()
    assert name == cache.name_digest(KEY, make_target(prebuilt.PORTABLE))
    assert set(entry["files"]) == {"kernel.so", "checks.so", "stage3.json"}
    for kept in entry["files"].values():
        data = (shipped / prebuilt.FILES / kept["sha256"]).read_bytes()
        assert kept == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_a_cache_miss_runs_the_prebuilt_kernel_and_the_host_kernel_replaces_it(
        package, compiles, caplog):
    with caplog.at_level(logging.DEBUG, logger="sparsetir"):
        matrix = ops.SparseMatrix(A)
        out = ops.gspmm(matrix, "copy_lhs", "sum", X, None)
        assert threading.current_thread().name not in compiles     # the caller compiled nothing
        np.testing.assert_allclose(out, ONES @ X, rtol=1e-5, atol=1e-5)
        assert any("prebuilt" in r.getMessage() and getattr(r, "sparsetir_event", "") == "loaded"
                   for r in caplog.records)
        (bound,) = matrix.prepared.values()
        shipped_code = bound.kernel.executable
        upgrade.wait()
    assert compiles == ["sparsetir-upgrade"]                 # compiled once, in the background
    assert bound.kernel.executable is not shipped_code       # the host kernel took its place
    y = np.full((9, 16), np.nan, np.float32)
    bound(X, y)                                              # a kernel bound before the swap
    np.testing.assert_allclose(y, ONES @ X, rtol=1e-5, atol=1e-5)
    cache._MEMORY.clear()            # pylint: disable=protected-access   # a later process
    _aggregate()                                             # loads it from the disk cache
    assert compiles == ["sparsetir-upgrade"]


def test_the_caller_compiles_a_kernel_not_shipped_while_the_upgrade_compiles(package, compiles):
    _aggregate()                                     # prebuilt: the upgrade starts
    x = np.random.default_rng(4).standard_normal((7, 24)).astype(np.float32)
    out = ops.gspmm(ops.SparseMatrix(A), "copy_lhs", "sum", x, None)     # 24: not shipped
    np.testing.assert_allclose(out, ONES @ x, rtol=1e-5, atol=1e-5)
    upgrade.wait()
    assert sorted(compiles) == sorted(["sparsetir-upgrade", threading.current_thread().name])
    _aggregate()


def test_a_tampered_prebuilt_file_is_refused_and_the_kernel_compiled(package, compiles, caplog):
    (entry,) = _manifest(package)["kernels"].values()
    library = package / prebuilt.FILES / entry["files"]["kernel.so"]["sha256"]
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="sparsetir"):
        assert prebuilt.prebuilt_kernel(KEY) is None
    assert "damaged" in caplog.text
    _aggregate()
    assert compiles == [threading.current_thread().name]      # compiled by the caller, once


@pytest.mark.parametrize("change", [{"cpu_flags": [*prebuilt.CPU_FLAGS, "avx10_9"]},
                                    {"machine": "aarch64"}, {"system": "Darwin"}])
def test_a_prebuilt_kernel_this_machine_cannot_run_is_never_loaded(package, compiles,
                                                                   monkeypatch, change):
    (package / prebuilt.MANIFEST).write_text(json.dumps({**_manifest(package), **change}))
    monkeypatch.setattr(prebuilt, "restore_kernel",
                        lambda *_: pytest.fail("a kernel for another CPU was loaded"))
    assert prebuilt.prebuilt_kernel(KEY) is None
    _aggregate()
    assert compiles == [threading.current_thread().name]


def test_prebuilt_kernels_can_be_turned_off(package, compiles, monkeypatch):
    monkeypatch.setenv("SPARSETIR_PREBUILT", "0")
    _aggregate()
    assert compiles == [threading.current_thread().name]


def test_without_a_prebuilt_folder_kernels_are_compiled(package, compiles):
    shutil.rmtree(package)
    _aggregate()
    assert compiles == [threading.current_thread().name]


def test_host_target_makes_llvm_the_portable_target_in_its_block_only():
    with host_target(prebuilt.PORTABLE):
        assert make_target("llvm").attrs["mcpu"] == "x86-64-v3"
    assert make_target("llvm").attrs["mcpu"] != "x86-64-v3"


def test_the_build_ships_nothing_where_the_cpu_cannot_run_the_target(tmp_path, monkeypatch):
    monkeypatch.setattr(prebuilt, "cpu_flags", frozenset)
    manifest = prebuild.build(tmp_path / "out")
    assert manifest["kernels"] == {} and "cannot run x86-64-v3" in manifest["skipped"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == [prebuilt.MANIFEST]
