"""Kernels shipped prebuilt in the package: ``ops``' commonest kernels, compiled at packaging
time (``sparsetir.prebuild``) for a portable CPU baseline, found by name when the disk cache
misses.

The baseline is x86-64-v3 (``PORTABLE``: AVX, AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE, the
x86-64 psABI's third level: every Intel CPU since Haswell, 2013, every AMD CPU since
Excavator, 2015, and so every current x86-64 server and cloud instance). ``ops``' CPU kernels
are vectorised feature loops: plain x86-64 (SSE2, no FMA) would run them with a quarter of the
vector width. A prebuilt kernel is loaded only where it runs: on Linux, on an x86-64 CPU whose
flags (``/proc/cpuinfo``, which the kernel clears for what the OS does not enable) include
every one the manifest requires (``CPU_FLAGS``); anywhere else the kernel is compiled, as
without prebuilt kernels.

The package folder ``sparsetir/prebuilt`` holds ``manifest.json``, which lists each kernel
under the name ``driver.named`` gives it (``cache.name_digest``: the operator's key,
sparsetir's sources, TVM's versions, here with the portable target) with the files of a disk
cache entry (``kernel.so``, ``checks.so``, ``stage3.json``), each file's size and SHA-256 as
the disk cache's metadata records them, and ``files/``, where each file is stored once under
its SHA-256 (the kernels share one index-checks library). A file that differs from its record
(cut short, changed, swapped, missing) makes the kernel a miss, and it is compiled. The verified bytes are what is
loaded (copied into the process's private folder first, ``portable.restore_kernel``), never
the file read a second time. The package's files are as trusted as its Python code: anyone who
can change them can change that too; the check is against damage and mismatched files, not an
attacker. ``SPARSETIR_PREBUILT=0`` turns prebuilt kernels off. In a source checkout the folder
is absent unless ``make prebuilt`` made it: kernels are then compiled, as before.

Example
-------
>>> kernel = prebuilt_kernel(("ops", "gspmm", "copy_lhs", "sum", "float32", (16,), (True,),
...                           (True,), 0))        # None: not shipped, or not for this CPU
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
from pathlib import Path

import tvm
import tvm_ffi

from ..backend.cache_folder import record
from ..backend.target import make_target
from . import compile_log
from .cache import name_digest
from .portable import FORMAT as PORTABLE_FORMAT
from .portable import restore_kernel

PORTABLE = {"kind": "llvm", "mcpu": "x86-64-v3"}
"""The target prebuilt kernels are compiled for."""
CPU_FLAGS = ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave", "cx16",
             "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2")
"""``/proc/cpuinfo``'s names of what x86-64-v3 requires beyond x86-64 (``abm``: LZCNT,
``pni``: SSE3)."""
MANIFEST = "manifest.json"
FILES = "files"
FORMAT = 1


def folder() -> Path:
    """Where the package keeps its prebuilt kernels."""
    return Path(__file__).resolve().parent.parent / "prebuilt"


def prebuilt_kernel(key: tuple):
    """The kernel of ``ops``' ``key`` shipped with the package, verified and loaded; None when
    none is shipped for it, this CPU cannot run it, a file is not the one recorded, or prebuilt
    kernels are turned off."""
    from .build_module import kernel_of  # pylint: disable=import-outside-toplevel
    if os.environ.get("SPARSETIR_PREBUILT", "1").strip() == "0":
        return None
    manifest = _manifest(folder())
    if manifest is None:
        return None
    name = name_digest(key, make_target(manifest["target"]))
    entry = manifest["kernels"].get(name)
    if not isinstance(entry, dict):
        return None
    files = _verified(folder() / FILES, entry.get("files"))
    if files is None:
        compile_log.LOGGER.warning("the prebuilt kernel %s (%s) in %s is damaged (a file "
                                   "differs from its manifest): it is compiled instead",
                                   name, entry.get("key"), folder())
        return None
    contents = {"format": PORTABLE_FORMAT, "tvm": tvm.__version__,
                "tvm_ffi": tvm_ffi.__version__, "target": "llvm", "files": files}
    try:
        kernel = restore_kernel(contents, (), kernel_of)
    except Exception:  # pylint: disable=broad-exception-caught
        return None                            # whatever TVM raised: compile it instead
    compile_log.loaded(None, str(manifest["target"].get("mcpu", "llvm")),
                       "the package's prebuilt kernels")
    return kernel


def host_runs(manifest: dict) -> bool:
    """Whether this machine runs code compiled for ``manifest``'s target: its system and
    machine, and every CPU flag the manifest requires."""
    if platform.system() != manifest.get("system") or \
            platform.machine() != manifest.get("machine"):
        return False
    required = manifest.get("cpu_flags")
    return isinstance(required, list) and set(required) <= cpu_flags()


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset:
    """The flags ``/proc/cpuinfo`` lists for this machine's first CPU (empty where there is
    none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


@functools.lru_cache(maxsize=4)
def _manifest(where: Path) -> dict | None:
    """The manifest in ``where`` when it is one this sparsetir reads and this machine runs its
    kernels; else None."""
    try:
        manifest = json.loads((where / MANIFEST).read_text())
        usable = manifest["format"] == FORMAT and isinstance(manifest["kernels"], dict) and \
            isinstance(manifest["target"], dict) and \
            make_target(manifest["target"]).kind.name == "llvm"
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return manifest if usable and host_runs(manifest) else None


def _verified(stored: Path, records) -> dict | None:
    """``{name: bytes}`` of the files ``records`` lists (``{name: {"size", "sha256"}}``), read
    from ``stored`` (by SHA-256), when each has the recorded size and SHA-256; None
    otherwise."""
    if not isinstance(records, dict) or not {"kernel.so", "stage3.json"} <= records.keys():
        return None
    files = {}
    for name, kept in records.items():
        digest = kept.get("sha256") if isinstance(kept, dict) else None
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            return None
        try:
            data = (stored / digest).read_bytes()
        except OSError:
            return None
        if record(data) != kept:
            return None
        files[name] = data
    return files
