"""Compiled kernels cached in memory and on disk, keyed by the scheduled IR and the target.

A key is the SHA-256 of the scheduled Stage II module's script, the target, the versions of
TVM and tvm-ffi and a digest of sparsetir's own sources (a changed lowering pass is a new key).
On disk each entry is a folder holding the kernel's shared library, its index-check library
(CPU), the flattened Stage III module (JSON) the call signature is read from and the metadata
recording each file's SHA-256, so a new process loads the kernel without compiling. The cache
lives in ``$SPARSETIR_CACHE/kernels`` (default ``~/.cache/sparsetir/kernels``; an empty variable
counts as unset) and follows ``sparsetir.backend.cache_folder``'s rules: a folder another user could
write to is refused, entries appear whole or not at all, and an entry that is damaged, cut short
or swapped is compiled again and replaced. Where the disk cannot keep a kernel a
``CacheWarning`` says why and the kernel is kept in memory. ``clear_cache()`` removes only the
files the cache wrote. A kernel just compiled runs the library stored for it (not TVM's JIT of
the module in memory, which would compile it a second time); kernels whose index checks are the
same share one compiled checks module (``checks_executable``). ``write_files`` and
``load_compiled`` are also how a kernel is saved and pickled (``driver.portable``), and
``driver.named`` finds entries by an operator's name.

It is an option of the one driver, ``sparsetir.build(..., cache=True)``, which hands it the
way to compile a module and to make a kernel of the result (``cached``): this module only
keeps what a build produced (``Compiled``).

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> stage2 = sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 16}))
>>> kernel = sparsetir.build(stage2, "llvm", schedule="none", cache=True)
>>> kernel is sparsetir.build(stage2, "llvm", schedule="none", cache=True)   # from memory
True
>>> cache_dir()
PosixPath('.../kernels')
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
from contextlib import suppress
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import tvm
import tvm_ffi
from tvm_ffi.serialization import from_json_graph_str

from ..backend import cache_folder
from ..backend.cpu_atomics import load_cpu_atomics, uses_cpu_atomics
from ..backend.target import compile_module
from ..errors import SparseTIRValueError
from ..schedule.cpu_target import host_override
from . import compile_log

_MEMORY: dict = {}
_USED_ENTRIES = contextvars.ContextVar("sparsetir_used_entries", default=None)
_CHECKS: dict = {}
"""Index-check modules compiled in this process, by the SHA-256 of their script, each as
``[executable, its library's bytes once exported]``: one serves every kernel with the same
checks (the ten kernels of a GAT on one graph share one)."""
FORMAT = "3"
FOLDER = "kernels"
_FILES = ("kernel.so", "checks.so", "stage3.json")
NAMES = "names"
"""The folder beside ``FOLDER`` of ``driver.named``'s entries (each a ``name.json``)."""


def cache_dir() -> Path:
    """Where compiled kernels are kept on disk."""
    return cache_folder.root() / FOLDER


def clear_cache() -> None:
    """Forget every compiled kernel, in memory and on disk (files the cache did not write stay)."""
    _MEMORY.clear()
    _CHECKS.clear()
    cache_folder.clear(FOLDER, _FILES)
    cache_folder.clear(NAMES, ("name.json",))


def checks_executable(mod: tvm.IRModule):
    """``mod`` (index checks, ``compiled_checks.checks_module``) compiled for the host, once
    per process."""
    key = hashlib.sha256(mod.script().encode()).hexdigest()
    if key not in _CHECKS:
        _CHECKS[key] = [compile_module(mod, "llvm"), None]
    return _CHECKS[key][0]


def _exported(executable, folder: Path, name: str) -> None:
    """``executable`` exported to ``folder / name``; a shared checks executable is exported
    once per process and its bytes written again after."""
    shared = next((entry for entry in _CHECKS.values() if entry[0] is executable), None)
    if shared is None:
        executable.export_library(str(folder / name))
        return
    if shared[1] is None:
        executable.export_library(str(folder / name))
        shared[1] = (folder / name).read_bytes()
    else:
        (folder / name).write_bytes(shared[1])


def remembered(key: tuple, make):
    """``make()``, computed once and kept in memory under ``key`` until :func:`clear_cache`
    (``ops`` keeps its kernels per operator and feature size this way); inside a
    ``host_target`` block, under ``key`` and that block's target, since ``"llvm"`` then names
    another CPU."""
    host = host_override()
    memo = key if host is None else (key, str(host))
    if memo not in _MEMORY:
        with compile_log.compiling(" ".join(map(str, key))):      # what a compile record names
            _MEMORY[memo] = make()
    return _MEMORY[memo]


class Compiled(NamedTuple):
    """What a build produced: the flattened (Stage III) module, which the call signature is
    read from, its executable, and the executable of its index checks (CPU kernels with
    checks; else None)."""

    flat: tvm.IRModule
    executable: object
    checks: Optional[object] = None
    files: Optional[Callable[[], dict]] = None
    """``{name: bytes}`` of the files ``write_files`` would write, for executables loaded
    from files (which TVM cannot export again); None: ``write_files`` exports them."""


def cached(mod: tvm.IRModule, tgt, horizontal_fuse: bool, compile_stage2, kernel_of):
    """The kernel of ``mod`` (scheduled Stage II) for target ``tgt``, compiled at most once
    per machine: ``compile_stage2(mod, tgt, horizontal_fuse)`` gives the ``Compiled`` of a
    module the cache does not hold, ``kernel_of(compiled, tgt)`` the kernel of one it does
    (``sparsetir.build`` passes its own)."""
    key = _key(mod, tgt, horizontal_fuse)
    kernel = _MEMORY.get(key)
    if kernel is None:
        folder = cache_folder.folder(FOLDER)        # None: unusable (it warned), memory only
        entry = folder / key if folder is not None else None
        kernel = load_entry(entry, tgt, kernel_of) if entry is not None else None
        if kernel is None:
            why = "not in the disk cache" if entry is not None else "the disk cache cannot be used"
            kernel = compile_log.timed_compile(
                lambda: _compile_and_store(mod, tgt, entry, horizontal_fuse, compile_stage2,
                                           kernel_of), mod, tgt, why)
        else:
            compile_log.loaded(mod, tgt.kind.name)
    used = _USED_ENTRIES.get()
    if used is not None:
        used.append((key, tgt.kind.name))
    _MEMORY[key] = kernel
    return kernel


@contextlib.contextmanager
def used_entries():
    """The ``(key, target kind)`` of each kernel ``cached`` gives in this block, in a list
    (``driver.named`` records the entry a named kernel came from)."""
    used = []
    token = _USED_ENTRIES.set(used)
    try:
        yield used
    finally:
        _USED_ENTRIES.reset(token)


def _key(mod, tgt, horizontal_fuse: bool) -> str:
    text = "\n".join([FORMAT, sources_digest(), tvm.__version__, tvm_ffi.__version__,
                      str(tgt), str(horizontal_fuse), mod.script()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def name_digest(key: tuple, tgt) -> str:
    """The name ``driver.named`` keeps the kernel of ``ops``' ``key`` under for target ``tgt``
    (and ``driver.prebuilt`` ships it under): like a kernel's own key it covers sparsetir's
    sources and TVM's versions."""
    text = "\n".join([FORMAT, sources_digest(), tvm.__version__, tvm_ffi.__version__,
                      str(tgt), repr(key)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def sources_digest() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _compile_and_store(mod, tgt, entry: Path | None, horizontal_fuse: bool,
                       compile_stage2, kernel_of):
    """The kernel of ``mod``, compiled and kept in ``entry`` unless it is None. The kernel
    runs the library just stored: the compiled module in memory would be compiled once more
    to machine code (TVM's JIT) at its first call, which costs as much as the compile."""
    compiled = compile_stage2(mod, tgt, horizontal_fuse)
    if entry is not None and cache_folder.write_entry(
            entry, lambda staging: write_files(compiled, staging)) is not None:
        kernel = load_entry(entry, tgt, kernel_of)
        if kernel is not None:
            return kernel
    return kernel_of(compiled, tgt)                     # not kept (it warned): memory only


def write_files(compiled: Compiled, folder: Path) -> None:
    """Write the files of ``compiled`` (``_FILES``) into ``folder``: what ``load_compiled``
    reads back, in the cache and in saved kernels (``driver.portable``)."""
    if compiled.files is not None:
        for name, data in compiled.files().items():
            (folder / name).write_bytes(data)
        return
    compiled.executable.export_library(str(folder / "kernel.so"))
    if compiled.checks is not None:
        _exported(compiled.checks, folder, "checks.so")
    # the Stage II metadata (sizes over the parameters) travels inside the module
    (folder / "stage3.json").write_text(tvm.ir.save_json(compiled.flat))


def entry_bytes(entry: Path) -> dict:
    """``{name: bytes}`` of the files of the cache entry ``entry``, checked again against its
    metadata; SparseTIRValueError when the entry was removed or changed since."""
    files = cache_folder.read_entry(entry)
    if files is None:
        raise SparseTIRValueError(
            f"the kernel's cache entry {entry} was removed or changed after the kernel was "
            "loaded from it (clear_cache?): build the kernel again to save or pickle it")
    return {name: path.read_bytes() for name, path in files.items()}


def load_compiled(files: dict) -> Compiled:
    """The ``Compiled`` kept in ``files`` (``{name: path}`` of what ``write_files`` wrote,
    checked by the caller); whatever TVM raises when a library does not load passes through."""
    # written by this TVM (the key and a saved kernel's versions say so): no upgrade to run
    # (tvm.ir.load_json re-encodes the whole module to upgrade it: ~50 ms per kernel)
    flat = from_json_graph_str(files["stage3.json"].read_text())
    if uses_cpu_atomics(flat):
        load_cpu_atomics()                   # symbols the stored library calls
    executable = tvm.runtime.Executable(tvm.runtime.load_module(str(files["kernel.so"])))
    checks = None
    if "checks.so" in files:
        checks = tvm.runtime.Executable(tvm.runtime.load_module(str(files["checks.so"])))
    return Compiled(flat, executable, checks)


def load_entry(entry: Path, tgt, kernel_of):
    """The kernel of the build kept in ``entry``; None when it is missing, damaged or
    refused."""
    files = cache_folder.read_entry(entry)             # every file's size and SHA-256 checked
    if files is None or not {"kernel.so", "stage3.json"} <= files.keys():
        return None
    # The files are the ones stored; should loading still fail, whatever TVM raised (its errors
    # are RuntimeError, ValueError...; there is no tvm.TVMError), the entry goes and compiling
    # again replaces it or reports the real error.
    try:
        compiled = load_compiled(files)._replace(files=functools.partial(entry_bytes, entry))
        return kernel_of(compiled, tgt)
    except Exception:  # pylint: disable=broad-exception-caught
        with suppress(OSError):
            cache_folder.discard(entry, _FILES)
        return None
