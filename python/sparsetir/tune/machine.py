"""What a tuning record is keyed by on the machine side, and the cache sizes the cost model
reads.

A choice measured on one CPU, thread count or compiler target says nothing about another, so a
record names the CPU model (``/proc/cpuinfo``), the CPU LLVM compiles for, the threads kernels
run on (``runtime.threads.thread_count``) and the digest of sparsetir's sources (the kernels
the candidates compile to; the kernel cache keys its entries by it too); a record whose machine
differs in anything is foreign and ignored.

Example
-------
>>> from sparsetir.tune.machine import machine_key, cache_bytes
>>> sorted(machine_key())
['cpu_model', 'llvm_cpu', 'sources', 'threads']
>>> cache_bytes(2) > 0
True
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..driver.cache import sources_digest
from ..runtime.threads import thread_count
from ..schedule.operators import l2_cache_bytes


def machine_key() -> dict:
    """The machine a measurement holds for (see the module docstring)."""
    return {"cpu_model": cpu_model(), "llvm_cpu": _llvm_cpu(), "threads": thread_count(),
            "sources": _sources()}


@lru_cache(maxsize=None)
def _sources() -> str:
    return sources_digest()


@lru_cache(maxsize=None)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or ``"unknown"``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


@lru_cache(maxsize=None)
def _llvm_cpu() -> str:
    import tvm  # pylint: disable=import-outside-toplevel
    return str(tvm.target.codegen.llvm_get_system_cpu())


def cache_bytes(threads: int) -> int:
    """The private cache the kernels' ``threads`` threads hold together: one L2 each."""
    return threads * l2_cache_bytes()
