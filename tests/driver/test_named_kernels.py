"""Kernels found by name in a later process (``driver.named``): no Stage I parse, lowering or
schedule on a warm cache, the same numbers, and a name whose entry is gone or damaged is made
again."""

import json

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir.backend.cache_folder import CacheWarning
from sparsetir.driver import cache
from sparsetir.ops import generic
from sparsetir.schedule.cpu_target import host_target, llvm_host
from cpu_targets import AVX2

A = scipy.sparse.random(9, 7, density=0.3, format="csr", dtype=np.float32, random_state=5)
A = (scipy.sparse.diags((np.arange(9) != 3).astype(np.float32)) @ A).tocsr()    # row 3 empty
X = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMORY", {})
    return tmp_path


def _max_right():
    out = ops.copy_u_max(ops.SparseMatrix(A), X)
    expected = np.array([[X[A.indices[s:e], j].max() if e > s else 0 for j in range(5)]
                         for s, e in zip(A.indptr[:-1], A.indptr[1:])])
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def _no_lowering(monkeypatch):
    def refuse(*_):
        raise AssertionError("lowered although the kernel is on disk under its name")
    monkeypatch.setattr(generic, "lower_sparse_iter", refuse)


def test_a_later_process_loads_by_name_without_lowering(fresh, monkeypatch):
    _max_right()
    assert len(list((fresh / "names").iterdir())) == 1
    monkeypatch.setattr(cache, "_MEMORY", {})                      # a new process
    with monkeypatch.context() as patched:
        _no_lowering(patched)
        _max_right()


@pytest.mark.parametrize("damage", ["entry removed", "name altered"])
def test_a_name_that_leads_nowhere_is_made_again(fresh, monkeypatch, damage):
    _max_right()
    name = next((fresh / "names").iterdir())
    record = json.loads((name / "name.json").read_text())
    if damage == "entry removed":
        cache_entry = fresh / "kernels" / record["entry"]
        for path in cache_entry.iterdir():
            path.unlink()
        cache_entry.rmdir()
    else:
        (name / "name.json").write_text(json.dumps({**record, "entry": "0" * 32}))
    monkeypatch.setattr(cache, "_MEMORY", {})
    _max_right()                                                   # compiled again
    monkeypatch.setattr(cache, "_MEMORY", {})
    with monkeypatch.context() as patched:
        _no_lowering(patched)
        _max_right()                                               # the name was replaced


def test_a_kernels_folder_others_can_write_is_not_loaded_from_by_name(fresh, monkeypatch):
    """The name path read ``kernels/<entry>`` without the check every build makes of the
    folder: a ``kernels`` folder that group or others can write to was used, with no warning."""
    _max_right()
    (fresh / "kernels").chmod(0o777)
    monkeypatch.setattr(cache, "_MEMORY", {})
    loaded = []
    monkeypatch.setattr(cache, "load_entry", lambda *args: loaded.append(args))
    with pytest.warns(CacheWarning, match="can be written by group or others"):
        _max_right()
    assert not loaded


def test_a_kernel_remembered_for_another_cpu_is_kept_apart(fresh):
    """Inside ``host_target`` (how ``prebuild`` compiles for a portable CPU), ``"llvm"`` names
    another CPU: a kernel remembered outside the block is not the one inside, nor back."""
    made = []

    def make():
        made.append(llvm_host().attrs["mcpu"])
        return len(made)
    key = ("tests", "kernel for the CPU llvm names")
    assert cache.remembered(key, make) == 1
    with host_target(AVX2):
        assert cache.remembered(key, make) == 2
        assert cache.remembered(key, make) == 2
    assert cache.remembered(key, make) == 1
    assert made[1] == AVX2["mcpu"] != made[0]
