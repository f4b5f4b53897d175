"""The machine the benchmark ran on, and its measured memory bandwidth.

``bandwidth(threads)`` is a STREAM-like measurement in numpy: ``threads`` Python threads each
work on their own slice of three 128 MiB float64 arrays (numpy releases the GIL), best of five.
``copy`` (``a = b``) counts 16 bytes per element, ``triad`` (``a = b + s c``) 24, as STREAM
does; numpy does the triad in two passes (``a = s c; a += b``), so its figure is low.
The larger of the two is the roofline the benchmark reports achieved bandwidth against.

Example
-------
>>> info = describe(threads=2)
>>> info["cpu_model"], info["llvm_cpu"], info["bandwidth_gbps"]
('AMD EPYC', 'znver4', 20.2)
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

LIBRARIES = ("apache-tvm", "numpy", "scipy", "torch", "dgl", "mkl", "sparse_dot_mkl",
             "python-graphblas", "suitesparse-graphblas")


def _proc_field(path: str, key: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.split(":")[0].strip() == key:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def bandwidth(threads: int, mib: int = 128, repeat: int = 5) -> dict:
    """Best-of-``repeat`` copy and triad bandwidth in GB/s with ``threads`` threads."""
    n = mib * 2**20 // 8
    a, b, c = np.full(n, 0.0), np.full(n, 1.0), np.full(n, 2.0)  # touched: no page faults
    bounds = np.linspace(0, n, threads + 1).astype(int)
    slices = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def copy(s):
        np.copyto(a[s], b[s])

    def triad(s):
        np.multiply(c[s], 3.0, out=a[s])
        a[s] += b[s]

    result = {}
    with ThreadPoolExecutor(threads) as pool:
        for name, kernel, nbytes in (("copy", copy, 16 * n), ("triad", triad, 24 * n)):
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                list(pool.map(kernel, slices))
                best = min(best, time.perf_counter() - start)
            result[f"{name}_gbps"] = round(nbytes / best / 1e9, 1)
    return result


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` ("unknown" where there is none)."""
    return _proc_field("/proc/cpuinfo", "model name")


def describe(threads: int) -> dict:
    """CPU model, LLVM's name for the host CPU, cores, memory, library versions and bandwidth."""
    import tvm

    info = {
        "cpu_model": cpu_model(),
        "cpu_vendor": _proc_field("/proc/cpuinfo", "vendor_id"),
        "llvm_cpu": str(tvm.target.codegen.llvm_get_system_cpu()),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpus_total": os.cpu_count(),
        "memory": _proc_field("/proc/meminfo", "MemTotal"),
        "threads": threads,
        "python": platform.python_version(),
        "libraries": {name: v for name in LIBRARIES if (v := _version(name))},
    }
    info.update(bandwidth(threads))
    info["bandwidth_gbps"] = max(info["copy_gbps"], info["triad_gbps"])
    return info
