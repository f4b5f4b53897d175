"""The disk cache loses nothing of the user's and loads nothing it did not write.

Each test has its own ``SPARSETIR_CACHE`` (a fresh copy of one filled cache where it needs
entries) and empty in-memory caches: the clear keeps foreign files, an empty variable is unset,
folders are 0700 under umask 000, a folder another user could write to is refused with a
warning, a damaged, cut-short or swapped library is compiled again (in a subprocess where the
old behaviour was a crash), an unusable location still gives results, and concurrent processes
leave one entry and no staging folders. Tests run as root, which owns everything and ignores
permission bits: another owner is simulated through ``os.geteuid`` and a read-only folder
through ``os.mkdir``.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsetir.ops as ops
from sparse_inputs import skewed_csr
from sparsetir.backend import cache_folder, native
from sparsetir.backend.cache_folder import CacheWarning
from sparsetir.driver import cache
from sparsetir.runtime import native_call

A = skewed_csr(10, 8, seed=2, density=0.3)          # rows 4 and 9 empty
STUB_FLAGS = ["-Wl,-soname,libcuda.so.1"]


def spmm_is_right(feat=4):
    X = np.random.default_rng(feat).standard_normal((8, feat)).astype(np.float32)
    out = np.full((10, feat), np.nan, np.float32)
    ops.spmm(ops.SparseMatrix(A), X, out=out)      # a bound kernel: the C fast call is built
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)


def forget_in_memory(monkeypatch):
    """A process that has compiled nothing: no kernel in memory, no native module loaded."""
    monkeypatch.setattr(cache, "_MEMORY", {})
    native_call._module.cache_clear()


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    forget_in_memory(monkeypatch)
    yield
    native_call._module.cache_clear()           # later tests load it from their own cache


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache holding spmm for 4 and 8 features and the native fast-call module."""
    root = tmp_path_factory.mktemp("filled") / "cache"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("SPARSETIR_CACHE", str(root))
        forget_in_memory(monkeypatch)
        spmm_is_right(4)
        spmm_is_right(8)
        assert native_call.available()
    native_call._module.cache_clear()
    return root


@pytest.fixture
def copied(filled, tmp_path, monkeypatch):
    """This test's own copy of the filled cache, in use."""
    root = tmp_path / "cache"
    shutil.copytree(filled, root)
    monkeypatch.setenv("SPARSETIR_CACHE", str(root))
    return root


@pytest.fixture
def compiles(monkeypatch):
    """The number of kernels compiled so far in this test."""
    count = []
    original = cache._compile_and_store
    monkeypatch.setattr(cache, "_compile_and_store", lambda *a: count.append(1) or original(*a))
    return count


def entries(root):
    return sorted(path.name for path in (root / "kernels").iterdir())


def run_script(script: str, root: Path, wait=True):
    """Run ``script`` in a new process with ``root`` as the cache. It gets this process's
    environment and sources digest (so kernels get the same keys even while sources are being
    edited) and imports this module as ``t``."""
    here = Path(__file__).parent
    env = {**os.environ, "SPARSETIR_CACHE": str(root),
           "PYTHONPATH": os.pathsep.join([str(here), str(here.parent),
                                          os.environ.get("PYTHONPATH", "")])}
    header = ("import sparsetir.driver.cache as c, test_disk_cache as t\n"
              f"c.sources_digest = lambda: {cache.sources_digest()!r}\n")
    command = [sys.executable, "-c", header + textwrap.dedent(script)]
    if wait:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)


def test_an_empty_variable_means_the_default_and_the_working_folder_is_left_alone(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "notes.txt").write_text("mine")
    assert ops.cache_dir() == tmp_path / "home" / ".cache" / "sparsetir" / "kernels"
    ops.clear_cache()
    assert (tmp_path / "kernels" / "notes.txt").read_text() == "mine"


def test_clear_cache_removes_its_entries_and_nothing_else(copied):
    kernels = copied / "kernels"
    (kernels / "notes.txt").write_text("mine")
    for lookalike in (".staging-backup", "exp1"):      # names the cache uses, no marker
        (kernels / lookalike).mkdir()
        (kernels / lookalike / "kernel.so").write_text("mine")
    (kernels / "exp1" / "metadata.json").write_text('{"format": 1, "key": "exp1", "files": {}}')
    (kernels / "mine").mkdir()
    (kernels / "mine" / "kernel.so").write_text("mine")
    (kernels / "mine" / "metadata.json").write_text('{"author": "me"}')
    ops.clear_cache()
    assert entries(copied) == [".staging-backup", "exp1", "mine", "notes.txt"]
    assert (kernels / "exp1" / "metadata.json").exists()
    for lookalike in (".staging-backup", "exp1"):
        assert (kernels / lookalike / "kernel.so").read_text() == "mine"
        shutil.rmtree(kernels / lookalike)
    assert sorted(path.name for path in (kernels / "mine").iterdir()) == ["kernel.so",
                                                                          "metadata.json"]
    shutil.rmtree(kernels / "mine")
    (kernels / "notes.txt").unlink()
    ops.clear_cache()
    assert not kernels.exists()              # nothing of the user's left in it: removed
    assert (copied / "fastcall").is_dir()    # the native library is not a kernel


def test_clear_cache_removes_an_entry_a_killed_process_left_set_aside(copied):
    """A process killed while it set an entry aside (``cache_folder._set_aside``) leaves it in
    ``.set-aside-*``: clear_cache removes it as any entry, and what the cache did not write
    stays."""
    kernels = copied / "kernels"
    names = entries(copied)
    for number, name in enumerate(names):
        (kernels / f".set-aside-{number}").mkdir()
        os.rename(kernels / name, kernels / f".set-aside-{number}" / name)
    (kernels / ".set-aside-0" / names[0] / "notes.txt").write_text("mine")
    ops.clear_cache()
    assert entries(copied) == [".set-aside-0"]
    assert [path.name for path in (kernels / ".set-aside-0" / names[0]).iterdir()] == [
        "notes.txt"]


def test_clear_cache_makes_ops_compile_again(tmp_path, monkeypatch, compiles):
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    spmm_is_right(4)
    ops.clear_cache()
    assert not (tmp_path / "kernels").exists()
    spmm_is_right(4)                         # not kept in memory past the clear: stored again
    assert len(compiles) == 2 and len(entries(tmp_path)) == 1


def test_clear_cache_deletes_nothing_outside_an_entry(copied, tmp_path):
    """An entry's metadata naming a file outside the entry (``../../x``) makes it not the
    cache's: clear_cache used to delete the file it named."""
    victim = tmp_path / "thesis.tex"
    victim.write_text("precious")
    entry = copied / "kernels" / ("ab" * 16)
    entry.mkdir(mode=0o700)
    record = {"size": 8, "sha256": hashlib.sha256(b"precious").hexdigest()}
    (entry / "metadata.json").write_text(json.dumps(
        {"format": 1, "key": entry.name, "files": {os.path.relpath(victim, entry): record}}))
    os.chmod(entry / "metadata.json", 0o600)
    ops.clear_cache()
    assert victim.read_text() == "precious"


def test_folders_and_files_are_private_whatever_the_umask(tmp_path, monkeypatch):
    root = tmp_path / "new" / "cache"
    monkeypatch.setenv("SPARSETIR_CACHE", str(root))
    old = os.umask(0)
    try:
        spmm_is_right()
        native.build_shared("libcuda_stub.c", STUB_FLAGS)
    finally:
        os.umask(old)
    paths = [root.parent, *root.parent.rglob("*")]
    assert len(paths) > 8
    for path in paths:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


@pytest.mark.parametrize("how", ["writable by others", "another owner"])
def test_a_folder_another_user_could_write_is_refused(how, copied, compiles, monkeypatch):
    if how == "writable by others":
        os.chmod(copied, 0o777)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    before = {path: path.read_bytes() for path in copied.rglob("*") if path.is_file()}
    with pytest.warns(CacheWarning, match="can be written by group or others|belongs to uid"):
        spmm_is_right()
    assert compiles == [1]                      # not loaded from the refused folder
    with pytest.warns(CacheWarning):
        stub = native.build_shared("libcuda_stub.c", STUB_FLAGS)
    assert not stub.is_relative_to(copied)      # built privately instead
    assert native_call.available()    # the fast call too
    assert {path: path.read_bytes() for path in copied.rglob("*") if path.is_file()} == before


def test_a_library_owned_by_another_user_is_not_loaded(copied, monkeypatch):
    (entry,) = (copied / "fastcall").iterdir()
    (library,) = entry.glob("*.so")
    real_fstat = os.fstat

    def fstat(descriptor):                      # the library as another user's
        status = real_fstat(descriptor)
        if os.path.samestat(status, os.stat(library)):
            return os.stat_result((*status[:4], 4242, *status[5:]))
        return status
    with monkeypatch.context() as patch:
        patch.setattr(os, "fstat", fstat)
        with pytest.warns(CacheWarning, match="belongs to uid 4242"):
            assert native_call.available()
    assert cache_folder.read_entry(entry)       # built again, in its place


@pytest.mark.parametrize("damage", ["empty kernel.so", "garbled stage3.json",
                                    "garbled stage3.json with its digest", "no metadata.json",
                                    "swapped kernel.so", "kernel.so grown to 1 GB",
                                    "entry linked to another"])
def test_a_damaged_entry_is_compiled_again(damage, copied, compiles):
    first, second = (copied / "kernels" / name for name in entries(copied))
    if damage == "empty kernel.so":
        (first / "kernel.so").write_bytes(b"")
    elif damage == "kernel.so grown to 1 GB":      # sparse: refused by its size, never read
        os.truncate(first / "kernel.so", 1 << 30)
    elif damage == "entry linked to another":
        shutil.rmtree(first)
        first.symlink_to(second, target_is_directory=True)
    elif damage.startswith("garbled stage3.json"):
        (first / "stage3.json").write_text("{garbled")
        if damage.endswith("digest"):          # passes the check, fails in TVM
            metadata = json.loads((first / "metadata.json").read_text())
            metadata["files"]["stage3.json"] = {"size": 8, "sha256": hashlib.sha256(
                b"{garbled").hexdigest()}
            (first / "metadata.json").write_text(json.dumps(metadata))
    elif damage == "no metadata.json":
        (first / "metadata.json").unlink()
    else:
        swap = (first / "kernel.so").read_bytes()
        (first / "kernel.so").write_bytes((second / "kernel.so").read_bytes())
        (second / "kernel.so").write_bytes(swap)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        spmm_is_right(4)
        spmm_is_right(8)
    assert len(compiles) == (2 if damage == "swapped kernel.so" else 1)
    assert all(cache_folder.read_entry(entry) for entry in (first, second))   # replaced
    assert not first.is_symlink()
    assert entries(copied) == sorted([first.name, second.name])


@pytest.mark.parametrize("holding", [None, "notes.txt"])
def test_a_folder_where_a_library_belongs_is_set_aside_and_replaced(holding, copied, compiles):
    """As a tuning record's (``tests/tune``): the entry was compiled again at every process
    and never stored (a CacheWarning each time). What the cache did not write is kept, in a
    ``.set-aside-*`` folder."""
    first = copied / "kernels" / entries(copied)[0]
    (first / "kernel.so").unlink()
    (first / "kernel.so").mkdir(mode=0o700)
    if holding:
        (first / "kernel.so" / holding).write_text("mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        spmm_is_right(4)
        spmm_is_right(8)
    assert len(compiles) == 1 and cache_folder.read_entry(first)
    aside = [path for path in (copied / "kernels").iterdir() if path.name.startswith(".")]
    if holding:
        assert [(path / first.name / "kernel.so" / holding).read_text() for path in aside] == [
            "mine"]
    else:
        assert not aside


def test_a_fifo_in_an_entry_is_a_miss_not_a_hang(copied):
    first = copied / "kernels" / entries(copied)[0]
    (first / "metadata.json").unlink()
    os.mkfifo(first / "metadata.json", 0o600)     # open() for reading would wait for a writer
    done = run_script("""
        t.spmm_is_right(4)
        t.spmm_is_right(8)
    """, copied)
    assert done.returncode == 0, done.stderr[-3000:]
    assert cache_folder.read_entry(first)


def test_libraries_cut_short_are_built_again_not_loaded(copied):
    for library in copied.rglob("*.so"):
        data = library.read_bytes()
        library.write_bytes(data[:len(data) // 2])
    done = run_script("""
        from sparsetir.runtime import native_call
        t.spmm_is_right(4)
        t.spmm_is_right(8)
        print(native_call.available())
    """, copied)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"]
    assert all(cache_folder.read_entry(entry) for entry in (copied / "kernels").iterdir())


@pytest.mark.parametrize("where", ["a file", "a path under a file", "a read-only folder"])
def test_an_unusable_location_still_gives_results(where, tmp_path, compiles, monkeypatch):
    place = tmp_path / "place"
    if where == "a read-only folder":
        place.mkdir()
        real_mkdir = os.mkdir

        def mkdir(path, *args, **kwargs):
            if Path(path).is_relative_to(place):
                raise PermissionError(13, "Permission denied", str(path))
            return real_mkdir(path, *args, **kwargs)
        monkeypatch.setattr(os, "mkdir", mkdir)
        root = place
    else:
        place.write_text("not a folder")
        root = place if where == "a file" else place / "cache"
    monkeypatch.setenv("SPARSETIR_CACHE", str(root))
    with pytest.warns(CacheWarning, match="cannot use the cache folder"):
        spmm_is_right()
        assert native_call.available()
    assert list(tmp_path.rglob("*")) == [place]


def test_processes_compiling_the_same_kernel_at_once_leave_one_entry(tmp_path):
    root = tmp_path / "cache"
    script = f"""
        import os, time
        original = c._compile_and_store

        def together(*args):          # both processes missed the disk before either stores
            open(os.path.join({str(tmp_path)!r}, f"ready-{{os.getpid()}}"), "w").close()
            deadline = time.time() + 60
            while len([n for n in os.listdir({str(tmp_path)!r}) if n.startswith("ready-")]) < 2:
                assert time.time() < deadline
                time.sleep(0.01)
            return original(*args)
        c._compile_and_store = together
        t.spmm_is_right()
    """
    processes = [run_script(script, root, wait=False) for _ in range(2)]
    for process in processes:
        assert process.wait(timeout=180) == 0, process.stderr.read()[-3000:]
    (entry,) = (root / "kernels").iterdir()
    assert cache_folder.read_entry(entry)
    assert len(list((root / "fastcall").iterdir())) == 1


def test_a_failing_gcc_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match="cannot build .*libcuda_stub.c"):
        native.build_shared("libcuda_stub.c", ["-Wl,--no-such-option"])
    assert [path.name for path in tmp_path.rglob("*")] == ["libcuda_stub"]


def test_an_entry_placed_while_another_writer_sets_the_damaged_one_aside_stays(tmp_path,
                                                                               monkeypatch):
    """Writer Y finds the entry damaged; before it sets it aside, writer X places an intact one
    and hands its paths to its caller. Y used to move X's entry away (X's caller then found
    its files gone); it now puts it back and returns X's entry."""
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    entry = cache_folder.folder("kernels") / ("cd" * 16)

    def write(staging):
        (staging / "kernel.so").write_bytes(b"K" * 100)
    cache_folder.write_entry(entry, write)
    os.truncate(entry / "kernel.so", 3)                       # damaged
    set_aside, placed_by_x = cache_folder._set_aside, {}

    def x_runs_first(*args, **kwargs):
        with monkeypatch.context() as inner:
            inner.setattr(cache_folder, "_set_aside", set_aside)
            placed_by_x.update(cache_folder.write_entry(entry, write))
        return set_aside(*args, **kwargs)
    monkeypatch.setattr(cache_folder, "_set_aside", x_runs_first)
    placed_by_y = cache_folder.write_entry(entry, write)
    assert placed_by_x["kernel.so"].read_bytes() == b"K" * 100
    assert placed_by_y == placed_by_x and cache_folder.read_entry(entry) is not None
    assert [path.name for path in entry.parent.iterdir()] == [entry.name]
