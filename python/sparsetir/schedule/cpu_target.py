"""The CPU that ``"llvm"`` compiles for, and how wide its vector registers are.

``"llvm"`` means this machine's CPU (LLVM's name for it, ``llvm_get_system_cpu``), or, inside
a ``host_target(target)`` block, the target it names: how ``sparsetir.prebuild`` compiles
``ops``' kernels for a portable baseline. The CPU schedules size their register tiles for it
(``float32_lanes``): a tile sized for AVX-512's 32 registers of 16 lanes spills on AVX2's 16
registers of 8, where the accumulators then go through the stack at every nonzero.

Example
-------
>>> float32_lanes({"kind": "llvm", "mcpu": "skylake-avx512"})
16
>>> with host_target({"kind": "llvm", "mcpu": "x86-64-v3"}):      # AVX2
...     str(llvm_host()), float32_lanes()
('{"kind":"llvm","tag":"","keys":["cpu"],"mcpu":"x86-64-v3"}', 8)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from functools import lru_cache

import tvm
from tvm.target.codegen import llvm_get_system_cpu, target_has_features

from ..errors import SparseTIRValueError

_HOST = contextvars.ContextVar("sparsetir_host_target", default=None)

CACHE_LINE_BYTES = 64
"""The cache line of the CPUs ``"llvm"`` compiles for (x86-64, AArch64), in bytes."""

LINE_FLOATS = CACHE_LINE_BYTES // 4
"""float32 values in one cache line: one AVX-512 vector register."""

VECTOR_FEATURES = (("avx512f", 16), ("avx", 8))
"""LLVM CPU features and the float32 lanes of one vector register they give, widest first;
a CPU with neither has 128-bit vectors (SSE, NEON): 4 lanes."""


@contextlib.contextmanager
def host_target(target):
    """Make ``"llvm"`` mean ``target`` (a dict, target string or Target of kind llvm) in this
    block, for this thread."""
    token = _HOST.set(_llvm_target(target))
    try:
        yield
    finally:
        _HOST.reset(token)


def host_override() -> tvm.target.Target | None:
    """The target of the ``host_target`` block in force here; None outside every block."""
    return _HOST.get()


def llvm_host() -> tvm.target.Target:
    """The target ``"llvm"`` means here: ``host_target``'s inside its block, else this
    machine's CPU with the cores this process may use."""
    host = host_override()
    return host if host is not None else _native_host(len(os.sched_getaffinity(0)))


@lru_cache(maxsize=None)
def _native_host(cores: int) -> tvm.target.Target:
    return tvm.target.Target({"kind": "llvm", "mcpu": llvm_get_system_cpu(), "num-cores": cores})


def float32_lanes(target=None) -> int:
    """The float32 lanes of one vector register of the LLVM ``target`` (a dict, target
    string or Target; by default, or ``"llvm"``, ``llvm_host()``): 16 with AVX-512, 8 with
    AVX or AVX2, else 4."""
    return _lanes(str(_llvm_target(target)))


def vectors_are_lines(vector_lanes: int | None = None) -> bool:
    """Whether one vector register of ``vector_lanes`` float32 (by default ``float32_lanes()``)
    is a whole cache line, as with AVX-512: then every vector load of a row that starts off a
    line straddles two lines, where with AVX2's half-line vectors every other one does.

    Example
    -------
    >>> vectors_are_lines(16), vectors_are_lines(8)
    (True, False)
    """
    return (float32_lanes() if vector_lanes is None else vector_lanes) == LINE_FLOATS


def _llvm_target(target) -> tvm.target.Target:
    """``target`` as a Target of kind llvm (None or ``"llvm"``: ``llvm_host()``); ValueError
    for another kind (``SparseTIRValueError``)."""
    if target is None or target == "llvm":
        return llvm_host()
    parsed = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    if parsed.kind.name != "llvm":
        raise SparseTIRValueError(f"not a CPU (llvm) target: {parsed}")
    return parsed


@lru_cache(maxsize=None)
def _lanes(target: str) -> int:
    parsed = tvm.target.Target(target)
    return next((lanes for feature, lanes in VECTOR_FEATURES
                 if target_has_features(feature, parsed)), 4)
