"""Compiles that show: a ``logging`` record (logger ``"sparsetir"``) for every compile.

``timed_compile`` runs a compile and records what it compiled, for what target, how long it
took and why it had to (the kernel was not in the disk cache, the cache was not asked for or
cannot be used): at ``INFO`` when it took ``SLOW_S`` seconds or more, else at ``DEBUG``; a
kernel loaded from the disk cache gets a ``DEBUG`` record. What a kernel is comes from
``compiling`` (``ops`` names its operator, dtype and feature sizes) or else from its blocks.
Python's logging prints nothing below ``WARNING`` unless configured, so this is silent by
default; ``SPARSETIR_LOG=info`` (or ``debug``) prints the records on stderr
(``configure_from_env``, run when ``sparsetir`` is imported), as does
``logging.getLogger("sparsetir").setLevel(logging.INFO)`` with a handler of your own.
``warmup`` listens to the same records (``EVENT``) for its progress lines.

Example
-------
Records printed on standard output (``logging.basicConfig()`` prints them on stderr), the
fast compiles too (``DEBUG``):

>>> import logging, sys, sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> logger, handler = logging.getLogger("sparsetir"), logging.StreamHandler(sys.stdout)
>>> level = logger.level
>>> logger.addHandler(handler); logger.setLevel("DEBUG")
>>> with compiling("my spmm float32 (64,)"):
...     kernel = sparsetir.build(spmm.specialize({"feat_size": 64}), "llvm")
compiled my spmm float32 (64,) for llvm in ... s (build(cache=False) compiles every time)
>>> logger.removeHandler(handler); logger.setLevel(level)
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import time

import tvm
import tvm_ffi
from tvm import s_tir

LOGGER = logging.getLogger("sparsetir")
SLOW_S = 1.0
"""Compiles at least this long are logged at INFO."""
EVENT = "sparsetir_event"
"""The attribute of each record saying what happened: ``"compiled"`` or ``"loaded"``."""

_WHAT = contextvars.ContextVar("sparsetir_compiling", default=None)


@contextlib.contextmanager
def compiling(what: str):
    """Name the kernels compiled in this block ``what`` in their records."""
    token = _WHAT.set(what)
    try:
        yield
    finally:
        _WHAT.reset(token)


def timed_compile(compile_module, mod: tvm.IRModule, target, why: str):
    """``compile_module()``, recorded as the compile of ``mod`` for ``target`` because
    ``why``."""
    start = time.perf_counter()
    result = compile_module()
    seconds = time.perf_counter() - start
    level = logging.INFO if seconds >= SLOW_S else logging.DEBUG
    if LOGGER.isEnabledFor(level):
        LOGGER.log(level, "compiled %s for %s in %.1f s (%s)", describe(mod), target.kind.name,
                   seconds, why, extra={EVENT: "compiled", "seconds": seconds})
    return result


def loaded(mod: tvm.IRModule | None, kind: str, source: str = "the disk cache") -> None:
    """Record that the kernel of ``mod`` (None: known by its name only, ``compiling``) for a
    target of kind ``kind`` came from ``source``."""
    if LOGGER.isEnabledFor(logging.DEBUG):
        LOGGER.debug("loaded %s for %s from %s", describe(mod), kind, source,
                     extra={EVENT: "loaded", "seconds": 0.0})


def describe(mod: tvm.IRModule) -> str:
    """What ``mod`` computes, as the caller named it (``compiling``) or by its blocks."""
    what = _WHAT.get()
    if what is not None or mod is None:
        return what or "kernel"
    blocks = []
    for func in mod.functions.values():
        tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: blocks.append(b.name_hint)),
                                order="pre")
    named = [name for name in dict.fromkeys(blocks) if name != "root"]
    return "kernel " + (", ".join(named[:4]) + (", ..." if len(named) > 4 else "") or "main")


def configure_from_env() -> None:
    """Print the records at ``$SPARSETIR_LOG``'s level and above on stderr (``info``,
    ``debug``, ``warning``...; unset or empty: nothing changes; an unknown level warns)."""
    name = os.environ.get("SPARSETIR_LOG", "").strip().upper()
    if not name:
        return
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        LOGGER.warning("SPARSETIR_LOG=%s is not a logging level (debug, info, warning, "
                       "error); it is ignored", os.environ["SPARSETIR_LOG"])
        return
    LOGGER.setLevel(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("sparsetir: %(message)s"))
    LOGGER.addHandler(handler)
