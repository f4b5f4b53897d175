"""Compare Stage I functions as SparseTIR's tests do, with a short diff when they differ.

Structural equality of a ``SparseFunction`` ignores its name, as TVM's ``PrimFunc`` equality
ignores the Python function's name (only the ``global_symbol`` attribute, if any, takes part):
a transform's result equals the expected kernel whatever the expected kernel was called.
``tvm.ir.assert_structural_equal`` therefore works on them, but TVM's printer cannot render a
Stage I node and its failure message dumps both objects whole (kilobytes). The assertion here
reports the first mismatching path and a unified diff of the two scripts, at most
``MAX_DIFF_LINES`` lines.

``map_free_vars=True`` (SparseTIR's third argument) matches variables that no function defines
by position of first use, as TVM's does.

Example
-------
>>> from sparsetir.ir import assert_structural_equal, structural_equal
>>> import sparsetir
>>> from sparsetir.ops.kernels import sddmm_fused, spmm
>>> from sparsetir.script import from_source
>>> unfused = from_source(sddmm_fused.script().replace("T.fuse(I, J)", "I, J")
...                       .replace("def sddmm_fused", "def sddmm"))
>>> sch = sparsetir.Schedule(unfused)
>>> it = sch.get_sparse_iteration("sddmm")
>>> i, j, k = sch.get_sp_iters(it)
>>> sch.sparse_fuse(it, [i, j])
>>> structural_equal(sch.func, sddmm_fused)             # True: the name is ignored
True
>>> assert_structural_equal(sch.func, sddmm_fused, True)
>>> assert_structural_equal(sch.func, spmm)
Traceback (most recent call last):
...
ValueError: structural mismatch at lhs <root>.buffers[0].name, rhs <root>.buffers[0].name
--- lhs
+++ rhs
...
"""

from __future__ import annotations

import difflib

import tvm_ffi

from .function import SparseFunction
from .node import replace

MAX_DIFF_LINES = 40
"""How many lines of the diff a failed assertion shows."""


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """Whether ``lhs`` and ``rhs`` (Stage I nodes, TIR nodes) are structurally equal."""
    return bool(tvm_ffi.structural_equal(lhs, rhs, map_free_vars))


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` when ``lhs`` and ``rhs`` differ, naming the first mismatching path
    of each and showing a unified diff of their scripts (at most ``MAX_DIFF_LINES`` lines)."""
    mismatch = tvm_ffi.get_first_structural_mismatch(lhs, rhs, map_free_vars)
    if mismatch is None:
        return
    lhs_path, rhs_path = mismatch
    diff = _diff(lhs, rhs)
    shown = diff[:MAX_DIFF_LINES]
    if len(diff) > len(shown):
        shown.append(f"... ({len(diff) - len(shown)} more diff lines)")
    raise ValueError(f"structural mismatch at lhs {lhs_path}, rhs {rhs_path}\n"
                     + ("\n".join(shown) if shown else
                        "(the scripts print alike: the difference is in variable identity, "
                        "e.g. free variables; try map_free_vars=True)"))


def _diff(lhs, rhs) -> list:
    if isinstance(lhs, SparseFunction) and isinstance(rhs, SparseFunction):
        rhs = replace(rhs, name=lhs.name)      # the name takes no part in equality
    return list(difflib.unified_diff(_text(lhs).splitlines(), _text(rhs).splitlines(),
                                     "lhs", "rhs", lineterm="", n=2))


def _text(obj) -> str:
    return obj.script() if isinstance(obj, SparseFunction) else str(obj)
