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
files the cache wrote.

Example
-------
>>> # kernel = cached_build(scheduled_stage2_module, "llvm")   # compiles once per machine
>>> # cache_dir()
>>> # PosixPath('/home/me/.cache/sparsetir/kernels')
"""

from __future__ import annotations

import functools
import hashlib
from contextlib import suppress
from pathlib import Path

import tvm
import tvm_ffi

from ..backend import cache_folder
from .build_module import kernel_of, lower_to_stage3, signature_of
from ..runtime.compiled_checks import checks_module
from ..backend.target import compile_module, make_target

_MEMORY: dict = {}
_FORMAT = "2"
_SHAPES_ATTR = "sparsetir.stage2_shapes"
_FOLDER = "kernels"
_FILES = ("kernel.so", "checks.so", "stage3.json")


def cache_dir() -> Path:
    """Where compiled kernels are kept on disk."""
    return cache_folder.root() / _FOLDER


def clear_cache() -> None:
    """Forget every compiled kernel, in memory and on disk (files the cache did not write stay)."""
    _MEMORY.clear()
    cache_folder.clear(_FOLDER, _FILES)


def remembered(key: tuple, make):
    """``make()``, computed once and kept in memory under ``key`` until :func:`clear_cache`
    (``ops`` keeps its kernels per operator and feature size this way)."""
    if key not in _MEMORY:
        _MEMORY[key] = make()
    return _MEMORY[key]


def cached_build(mod: tvm.IRModule, target="llvm", horizontal_fuse: bool = False):
    """``sparsetir.build(mod, target, schedule="none", horizontal_fuse=...)``, compiled at
    most once per machine."""
    tgt = make_target(target)
    key = _key(mod, tgt, horizontal_fuse)
    kernel = _MEMORY.get(key)
    if kernel is None:
        folder = cache_folder.folder(_FOLDER)        # None: unusable (it warned), memory only
        entry = folder / key if folder is not None else None
        kernel = _load(entry, tgt) if entry is not None else None
        if kernel is None:
            kernel = _compile_and_store(mod, tgt, entry, horizontal_fuse)
    _MEMORY[key] = kernel
    return kernel


def _key(mod, tgt, horizontal_fuse: bool) -> str:
    text = "\n".join([_FORMAT, _sources_digest(), tvm.__version__, tvm_ffi.__version__,
                      str(tgt), str(horizontal_fuse), mod.script()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _compile_and_store(mod, tgt, entry: Path | None, horizontal_fuse: bool = False):
    """Compile; keep the result in ``entry`` unless it is None."""
    flat, shapes = lower_to_stage3(mod, tgt, "none", horizontal_fuse)
    executable = compile_module(flat, tgt)
    checks = None
    signature = signature_of(flat["main"], shapes)
    if tgt.kind.name == "llvm" and signature.checks:
        checks = compile_module(checks_module(signature), "llvm")

    def write_files(staging: Path) -> None:
        executable.export_library(str(staging / "kernel.so"))
        if checks is not None:
            checks.export_library(str(staging / "checks.so"))
        # the shapes travel inside the module, so their variables stay its parameters
        keep = flat["main"].with_attr(_SHAPES_ATTR, [list(shape) for shape in shapes])
        (staging / "stage3.json").write_text(tvm.ir.save_json(tvm.IRModule({"main": keep})))

    if entry is not None:
        cache_folder.write_entry(entry, write_files)    # None: not kept (it warned)
    return kernel_of(flat, shapes, executable, tgt, checks)


def _load(entry: Path, tgt):
    """The kernel in ``entry``; None when it is missing, damaged or refused."""
    files = cache_folder.read_entry(entry)             # every file's size and SHA-256 checked
    if files is None or not {"kernel.so", "stage3.json"} <= files.keys():
        return None
    # The files are the ones stored; should loading still fail, whatever TVM raised (its errors
    # are RuntimeError, ValueError...; there is no tvm.TVMError), the entry goes and compiling
    # again replaces it or reports the real error.
    try:
        flat = tvm.ir.load_json(files["stage3.json"].read_text())
        shapes = [tuple(shape) for shape in flat["main"].attrs[_SHAPES_ATTR]]
        executable = tvm.runtime.Executable(tvm.runtime.load_module(str(files["kernel.so"])))
        checks = None
        if "checks.so" in files:
            checks = tvm.runtime.Executable(tvm.runtime.load_module(str(files["checks.so"])))
        return kernel_of(flat, shapes, executable, tgt, checks)
    except Exception:  # pylint: disable=broad-exception-caught
        with suppress(OSError):
            cache_folder.discard(entry, _FILES)
        return None
