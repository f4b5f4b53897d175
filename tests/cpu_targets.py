"""CPU targets the tests schedule for, whatever CPU runs them (importable without sparsetir).

Kernels' register tiles, realigned loads and prefetch counts follow the vector registers of
the target ``"llvm"`` means (``sparsetir.schedule.cpu_target``); a test that pins one of these
inside ``host_target(...)`` checks the same schedule on an Intel and an AMD machine.

Example
-------
>>> from cpu_targets import AVX2, AVX512
>>> AVX512["mcpu"], AVX2["mcpu"]
('skylake-avx512', 'x86-64-v3')
"""

AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512"}
"""Intel's AVX-512 (32 vector registers of 16 float32)."""

AVX2 = {"kind": "llvm", "mcpu": "x86-64-v3"}
"""AVX2 (16 vector registers of 8 float32): AMD Zen 3, and the prebuilt kernels' target."""

SSE = {"kind": "llvm", "mcpu": "x86-64"}
"""Baseline x86-64 (16 vector registers of 4 float32)."""
