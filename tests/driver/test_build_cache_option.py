"""The kernel cache is an option of ``sparsetir.build`` (one path to a kernel): a second build
compiles nothing, in this process or from disk, and the kernel loaded from disk checks its
arguments as the compiled one does (the Stage II metadata travel inside the stored module)."""

import numpy as np
import pytest
from kernel_zoo import CASES

import sparsetir
from sparsetir import ArgumentError
from sparsetir.driver import cache
from sparsetir.errors import HorizontalFusionError

FEAT = 4


@pytest.fixture
def stage2():
    """csrmm at Stage II, with ``n`` and the feature size removed by TVM's specialize."""
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func)
    params = {p.name: p for p in mod["main"].params}
    mod["main"] = mod["main"].specialize({params["feat_size"]: FEAT, params["n"]: 3})
    return mod


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    """An empty cache in ``tmp_path``; the list grows by one per kernel compiled."""
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMORY", {})
    count = []
    original = cache._compile_and_store
    monkeypatch.setattr(cache, "_compile_and_store", lambda *a: count.append(1) or original(*a))
    return count


def call(kernel, indices):
    indptr = np.array([0, 2, 2, 3], np.int32)                  # row 1 empty
    a = np.array([1, 2, 3], np.float32)
    b = np.arange(3 * FEAT, dtype=np.float32).reshape(3, FEAT)
    c = np.full((3, FEAT), np.nan, np.float32)
    kernel(a, b, c, indptr, np.asarray(indices, np.int32), 3, 3)
    dense = np.zeros((3, 3), np.float32)
    for row, (start, end) in enumerate(zip(indptr[:-1], indptr[1:])):
        dense[row, indices[start:end]] = a[start:end]
    np.testing.assert_allclose(c, dense @ b)


def test_build_with_cache_compiles_once_per_module_and_target(stage2, compiles):
    first = sparsetir.build(stage2, "llvm", schedule="none", cache=True)
    assert sparsetir.build(stage2, "llvm", schedule="none", cache=True) is first
    assert len(compiles) == 1
    with pytest.raises(HorizontalFusionError, match="nothing to fuse"):   # another key: compiled
        sparsetir.build(stage2, "llvm", schedule="none", horizontal_fuse=True, cache=True)
    assert len(compiles) == 2
    call(first, [0, 2, 1])


def test_a_kernel_from_disk_keeps_every_check(stage2, compiles, monkeypatch):
    compiled = sparsetir.build(stage2, "llvm", schedule="none", cache=True)
    monkeypatch.setattr(cache, "_MEMORY", {})                   # a new process
    loaded = sparsetir.build(stage2, "llvm", schedule="none", cache=True)
    assert loaded is not compiled and len(compiles) == 1
    assert [p.name for p in loaded.signature.params] == ["a", "b", "c", "indptr", "indices",
                                                         "m", "nnz"]
    assert str(loaded.signature) == str(compiled.signature)
    call(loaded, [0, 2, 1])
    with pytest.raises(ArgumentError, match="indices 'indices'.*out of range"):
        call(loaded, [0, 3, 1])                                  # n = 3 was specialised away
