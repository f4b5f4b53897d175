"""Kernels that save, load and pickle (``Kernel.save``, ``sparsetir.load``, ``driver.portable``).

A kernel from ``sparsetir.build``, ``sparsetir.ops`` or ``sparsetir.algebra`` comes back from a
file or a pickle with its numbers and its call contract (index checks, argument checks), in
this process, in a new one and in a ``torch.multiprocessing`` spawn worker; a file that is not
what was saved is refused before anything of it loads, as is a kernel from another TVM and a
kernel made by hand.
"""

import functools
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import sparsetir
import sparsetir.algebra
from csrmm_calls import build_kernel, call, make_args
from saved_workers import CHILD_PATH, refuses_bad_indices, spmm_error
from sparsetir.driver import cache, portable
from sparsetir.runtime import Kernel

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def kernel():
    return build_kernel()


def test_pickle_round_trip_keeps_numbers_and_checks(kernel):
    same = pickle.loads(pickle.dumps(kernel))
    assert same is not kernel and same.executable is not kernel.executable
    assert spmm_error(same) < 1e-5
    assert refuses_bad_indices(same)
    assert repr(same.signature) == repr(kernel.signature)        # TVM variables are new ones
    again = pickle.loads(pickle.dumps(same))           # a loaded kernel pickles too
    assert spmm_error(again) < 1e-5


def test_saved_kernel_loads_in_a_new_process(kernel, tmp_path):
    path = tmp_path / "csrmm.stk"
    kernel.save(path)
    script = textwrap.dedent(f"""
        import sparsetir
        from saved_workers import CHILD_PATH, refuses_bad_indices, spmm_error
        kernel = sparsetir.load({str(path)!r})
        print(spmm_error(kernel), refuses_bad_indices(kernel))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300,
                          env={**os.environ, "PYTHONPATH": CHILD_PATH})
    assert done.returncode == 0, done.stderr[-3000:]
    error, refuses = done.stdout.split()
    assert float(error) < 1e-5 and refuses == "True"


def test_spawned_worker_calls_an_unpickled_kernel(kernel):
    import torch.multiprocessing as mp  # pylint: disable=import-outside-toplevel
    with mp.get_context("spawn").Pool(1) as pool:
        error, refuses = pool.apply(_worker, (kernel,))
    assert error < 1e-5 and refuses


def _worker(kernel):
    return spmm_error(kernel), refuses_bad_indices(kernel)


def _at_most_rows(limit, arguments):
    if arguments["m"] > limit:
        raise ValueError(f"'m' is {arguments['m']}, more than {limit} rows")


def test_argument_checks_travel(kernel):
    checked = kernel.with_argument_check(functools.partial(_at_most_rows, 11), ["m"])
    same = pickle.loads(pickle.dumps(checked))
    with pytest.raises(sparsetir.ArgumentError, match="more than 11 rows"):
        call(same, make_args())
    assert spmm_error(pickle.loads(pickle.dumps(
        kernel.with_argument_check(functools.partial(_at_most_rows, 12), ["m"])))) < 1e-5


@pytest.mark.parametrize("damage", ["flip", "cut", "header", "foreign"])
def test_a_file_that_is_not_what_was_saved_is_refused(kernel, tmp_path, damage):
    path = tmp_path / "csrmm.stk"
    kernel.save(path)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "cut":
        data = data[:-100]
    elif damage == "header":
        data[data.index(b'"size": ') + 8] ^= 0x01
    else:
        data = b"\x7fELF" + data[4:]
    path.write_bytes(bytes(data))
    with pytest.raises(sparsetir.KernelFileError, match=str(path)):
        sparsetir.load(path)


@pytest.mark.parametrize("named, message", [
    ("AlgebraKernel", "header names AlgebraKernel, its contents are Kernel"),
    ("dict", "holds a 'dict'")])
def test_a_header_naming_another_object_is_refused(kernel, tmp_path, named, message):
    """The header's object is checked too: one naming another kernel type (its size and
    SHA-256 cover the pickle only) or something that is not a kernel is refused (both loaded)."""
    path = tmp_path / "csrmm.stk"
    kernel.save(path)
    data = path.read_bytes()
    altered = data.replace(b'"object": "Kernel"', b'"object": "' + named.encode() + b'"', 1)
    assert altered != data
    path.write_bytes(altered)
    with pytest.raises(sparsetir.KernelFileError, match=message):
        sparsetir.load(path)


@pytest.mark.parametrize("where, builtin, problem", [
    ("missing.stk", FileNotFoundError, "No such file"),
    (".", IsADirectoryError, "Is a directory"),
    ("plain.txt/inside.stk", NotADirectoryError, "Not a directory")])
def test_load_of_a_path_it_cannot_read_names_it(tmp_path, where, builtin, problem):
    """A path ``load`` cannot read is a ``KernelPathError`` naming it and the problem, also the
    builtin ``OSError`` subclass it always was."""
    (tmp_path / "plain.txt").write_text("not a kernel")
    path = tmp_path / where
    with pytest.raises(sparsetir.KernelPathError) as caught:
        sparsetir.load(path)
    err = caught.value
    assert isinstance(err, builtin) and isinstance(err, sparsetir.SparseTIRError)
    assert err.filename == str(path) and problem in str(err)
    assert "sparsetir.load cannot read the saved kernel" in str(err)
    assert type(pickle.loads(pickle.dumps(err))) is type(err)


@pytest.mark.parametrize("where, builtin, problem", [
    ("no/such/folder/k.stk", FileNotFoundError, "no file can be created in"),
    (".", IsADirectoryError, "over a directory"),
    ("plain.txt/k.stk", NotADirectoryError, "no file can be created in")])
def test_save_to_a_path_it_cannot_write_names_it(kernel, tmp_path, where, builtin, problem):
    """A path ``save`` cannot write is refused naming the path the caller gave (not the
    staging file next to it), and nothing is left behind."""
    (tmp_path / "plain.txt").write_text("not a kernel")
    before = sorted(tmp_path.rglob("*"))
    path = tmp_path / where
    with pytest.raises(builtin, match=problem) as caught:
        kernel.save(path)
    assert isinstance(caught.value, sparsetir.KernelPathError)
    assert caught.value.filename == str(path)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="permissions do not bind root")
def test_save_into_a_folder_without_write_permission_names_it(kernel, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="no file can be created in") as caught:
            kernel.save(locked / "k.stk")
        assert isinstance(caught.value, sparsetir.KernelPathError)
    finally:
        locked.chmod(0o700)


def test_kernel_from_another_tvm_is_refused(kernel):
    function, (contents, checks, make_kernel) = kernel.__reduce__()
    with pytest.raises(sparsetir.KernelFileError, match="tvm 0.0.1"):
        function({**contents, "tvm": "0.0.1"}, checks, make_kernel)


def test_hand_made_kernel_and_bound_kernel_say_why_they_do_not_pickle(kernel):
    bare = Kernel(kernel.executable, kernel.signature)
    with pytest.raises(sparsetir.SparseTIRTypeError, match="made by hand"):
        pickle.dumps(bare)
    args = make_args()
    bound = kernel.bind(a=args["a"], b=args["b"], indptr=args["indptr"],
                        indices=args["indices"], m=12, n=9, nnz=args["nnz"])
    with pytest.raises(sparsetir.SparseTIRTypeError, match="bound.kernel"):
        pickle.dumps(bound)


def test_cached_kernel_pickles_from_its_entry(tmp_path, monkeypatch):
    """A kernel loaded from the disk cache pickles the entry's files; once the cache is
    cleared, pickling says so."""
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMORY", {})
    func = __import__("kernel_zoo").CASES["csrmm"].func.specialize({"feat_size": 16})
    sparsetir.build(func, "llvm", cache=True)
    monkeypatch.setattr(cache, "_MEMORY", {})
    loaded = sparsetir.build(func, "llvm", cache=True)           # from the disk entry
    assert loaded._origin.compiled.files is not None
    assert spmm_error(pickle.loads(pickle.dumps(loaded))) < 1e-5
    cache.clear_cache()
    with pytest.raises(sparsetir.SparseTIRValueError, match="clear_cache"):
        pickle.dumps(loaded)


def test_ops_kernel_round_trip():
    """An operator's kernel (``ops``' tiled SpMM) saved and loaded computes ``spmm``."""
    from sparsetir.ops.operators import _kernel  # pylint: disable=import-outside-toplevel
    from sparsetir.ops.matrix import SparseMatrix  # pylint: disable=import-outside-toplevel
    args = make_args()
    a = scipy.sparse.csr_matrix((args["a"], args["indices"], args["indptr"]), shape=(12, 9))
    matrix = SparseMatrix(a)
    tile_ptr, rows = matrix._row_tiles(1)
    same = pickle.loads(pickle.dumps(_kernel("spmm", 16)))
    out = np.full((12, 16), np.nan, np.float32)
    same(args["a"], args["b"], out, tile_ptr, rows, args["indptr"], args["indices"], 1, 12, 9,
         args["nnz"])
    np.testing.assert_allclose(out, args["expected"], rtol=1e-5, atol=1e-5)


def test_algebra_kernel_save_load(tmp_path):
    k = sparsetir.algebra.compile("A(i,j) = B(i,j) + C(i,j)",
                                  formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    rng = np.random.default_rng(0)
    keep = scipy.sparse.diags((np.arange(6) != 2).astype(float))     # row 2 empty in both
    B = (keep @ scipy.sparse.random(6, 5, density=0.4, format="csr", random_state=rng)).tocsr()
    C = (keep @ scipy.sparse.random(6, 5, density=0.4, format="csr", random_state=rng)).tocsr()
    path = tmp_path / "add.stk"
    k.save(path)
    for same in (sparsetir.load(path), pickle.loads(pickle.dumps(k))):
        np.testing.assert_allclose(same(B=B, C=C).to_scipy().toarray(), (B + C).toarray())
