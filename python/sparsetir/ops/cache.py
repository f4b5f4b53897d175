"""Compiled kernels cached in memory and on disk, keyed by the scheduled IR and the target.

A key is the SHA-256 of the scheduled Stage II module's script, the target, the versions of
TVM and tvm-ffi and a digest of sparsetir's own sources (a changed lowering pass is a new key). On disk each entry is a folder holding the kernel's shared library,
its index-check library (CPU) and the flattened Stage III module (JSON) the call signature is
read from, so a new process loads the kernel without compiling. The cache lives in
``$SPARSETIR_CACHE/kernels`` (default ``~/.cache/sparsetir/kernels``); ``clear_cache()`` or
deleting that folder empties it. Entries are written to a temporary folder and renamed into
place, so concurrent processes never see half an entry.

Example
-------
>>> # kernel = cached_build(scheduled_stage2_module, "llvm")   # compiles once per machine
>>> # cache_dir()
>>> # PosixPath('/home/me/.cache/sparsetir/kernels')
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import tvm
import tvm_ffi

from ..build import kernel_of, lower_to_stage3, signature_of
from ..checks_kernel import checks_module
from ..target import compile_module, make_target

_MEMORY: dict = {}
_FORMAT = "1"
_SHAPES_ATTR = "sparsetir.stage2_shapes"


def cache_dir() -> Path:
    """Where compiled kernels are kept on disk."""
    root = os.environ.get("SPARSETIR_CACHE", str(Path.home() / ".cache" / "sparsetir"))
    return Path(root) / "kernels"


def clear_cache() -> None:
    """Forget every compiled kernel, in memory and on disk."""
    _MEMORY.clear()
    shutil.rmtree(cache_dir(), ignore_errors=True)


def cached_build(mod: tvm.IRModule, target="llvm", horizontal_fuse: bool = False):
    """``sparsetir.build(mod, target, schedule="none", horizontal_fuse=...)``, compiled at
    most once per machine."""
    tgt = make_target(target)
    key = _key(mod, tgt, horizontal_fuse)
    kernel = _MEMORY.get(key)
    if kernel is None:
        kernel = _load(cache_dir() / key, tgt)
    if kernel is None:
        kernel = _compile_and_store(mod, tgt, cache_dir() / key, horizontal_fuse)
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


def _compile_and_store(mod, tgt, folder: Path, horizontal_fuse: bool = False):
    flat, shapes = lower_to_stage3(mod, tgt, "none", horizontal_fuse)
    executable = compile_module(flat, tgt)
    checks = None
    signature = signature_of(flat["main"], shapes)
    if tgt.kind.name == "llvm" and signature.checks:
        checks = compile_module(checks_module(signature), "llvm")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder.parent))
        executable.export_library(str(staging / "kernel.so"))
        if checks is not None:
            checks.export_library(str(staging / "checks.so"))
        # the shapes travel inside the module, so their variables stay its parameters
        keep = flat["main"].with_attr(_SHAPES_ATTR, [list(shape) for shape in shapes])
        (staging / "stage3.json").write_text(tvm.ir.save_json(tvm.IRModule({"main": keep})))
        os.replace(staging, folder)
    except OSError:
        pass   # a read-only or full disk: the kernel still works, it is just not kept
    return kernel_of(flat, shapes, executable, tgt, checks)


def _load(folder: Path, tgt):
    if not (folder / "kernel.so").exists():
        return None
    try:
        flat = tvm.ir.load_json((folder / "stage3.json").read_text())
        shapes = [tuple(shape) for shape in flat["main"].attrs[_SHAPES_ATTR]]
        executable = tvm.runtime.Executable(tvm.runtime.load_module(str(folder / "kernel.so")))
        checks = None
        if (folder / "checks.so").exists():
            checks = tvm.runtime.Executable(tvm.runtime.load_module(str(folder / "checks.so")))
        return kernel_of(flat, shapes, executable, tgt, checks)
    except (OSError, ValueError, RuntimeError, tvm.TVMError):
        shutil.rmtree(folder, ignore_errors=True)   # a damaged entry: compile again
        return None
