"""Kernels kept under a name: ``remembered(key, make)`` makes one once per process and, through
the disk cache, finds it again in a later process without lowering anything.

``ops`` names each kernel it builds by what determines it (``key``: operator, dtype, feature
sizes, ...), and ``make()`` writes, lowers, schedules and builds it (``build(..., cache=True)``).
The disk cache keys a kernel by its scheduled module, so finding it there still costs the
Stage I parse, the lowering and the schedule (about 0.1 s a kernel: most of a warm first
epoch of GAT). So the first time ``make`` runs on a machine, the cache entry its kernel came
from is recorded under the name: an entry of its own in ``$SPARSETIR_CACHE/names``, holding
``name.json`` (the kernel entry's key and target kind), written and checked as every entry is
(``cache_folder``; it also records the key, for people). A later process loads the kernel
entry through it directly. The digest (``cache.name_digest``) covers the key, sparsetir's
sources, TVM's versions and the host target, as a kernel's own key does; like the in-memory
memo, it assumes that ``make`` depends on nothing else. A name whose entry is missing or
damaged is made again. When the disk cache has no kernel under the name, the package's
prebuilt kernel of the key (``driver.prebuilt``) is used if there is one for this CPU, and the
kernel for this CPU is compiled in the background (``driver.upgrade``) and takes its place.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> def make():                          # lowers, schedules and builds (disk cache on)
...     return sparsetir.build(spmm.specialize({"feat_size": 64}), "llvm", cache=True)
>>> kernel = remembered(("docs", "spmm", "float32", (64,)), make)
>>> remembered(("docs", "spmm", "float32", (64,)), make) is kernel   # made once a process
True
"""

from __future__ import annotations

import json
import re

from ..backend import cache_folder
from ..backend.target import make_target
from ..runtime import Kernel
from . import cache, compile_log
from .build_module import kernel_of
from .prebuilt import prebuilt_kernel
from .upgrade import upgrade_later


def remembered(key: tuple, make):
    """``make()``, kept in memory under ``key`` (``cache.remembered``) and, when it is one
    kernel from the disk cache, found by ``key`` in later processes."""
    return cache.remembered(key, lambda: _named(key, make))


def _named(key: tuple, make):
    folder = cache_folder.folder(cache.NAMES)            # None: unusable (it warned)
    name = folder / cache.name_digest(key, make_target("llvm")) if folder is not None else None
    kernel = _load_named(name) if name is not None else None
    if kernel is not None:
        return kernel
    kernel = prebuilt_kernel(key)
    if kernel is not None:             # runs now; the kernel for this CPU is compiled meanwhile
        upgrade_later(kernel, lambda: _made(key, name, make), " ".join(map(str, key)))
        return kernel
    return _made(key, name, make)


def _made(key: tuple, name, make):
    """``make()``, recorded under ``name`` (unless None) when it is one kernel from the disk
    cache."""
    with cache.used_entries() as used:
        kernel = make()
    if name is not None and len(used) == 1 and type(kernel) is Kernel and \
            not kernel._argument_checks:  # pylint: disable=protected-access
        entry, kind = used[0]
        record = json.dumps({"entry": entry, "target": kind, "key": repr(key)})
        cache_folder.write_entry(name, lambda staging: (staging / "name.json").write_text(record))
    return kernel


def _load_named(name) -> Kernel | None:
    """The kernel the name entry ``name`` points to; None when either entry is missing,
    damaged or refused."""
    files = cache_folder.read_entry(name)
    if files is None or "name.json" not in files:
        return None
    try:
        record = json.loads(files["name.json"].read_text())
        entry, kind = record["entry"], record["target"]
    except cache_folder.DAMAGED:
        return None
    if not isinstance(entry, str) or not re.fullmatch(r"[0-9a-f]{32}", entry) or \
            kind not in ("llvm", "cuda"):
        return None
    kernels = cache_folder.folder(cache.FOLDER)      # None: refused (it warned), as builds do
    if kernels is None:
        return None
    kernel = cache.load_entry(kernels / entry, kind, kernel_of)
    if kernel is not None:
        compile_log.loaded(None, kind)
    return kernel
