"""Prove that every computed coordinate lies on its axis, or check it when the kernel runs.

An access whose index is not the iterated position of that very axis (``B[J_indices[...], k]``,
``B[i // blk, ...]``, ``W[E[i, j], ...]``, a position of one ragged axis used on another) reads
wherever the coordinate points. Lowering tries to prove ``0 <= coordinate < bound`` (the axis
length, or the row length of a ragged axis) with TVM's arithmetic analyzer, knowing the range of
every block variable and the range of every value the call wrapper validates: the indices of a
sparse axis lie in ``[0, length)``, and a buffer declared with ``T.assume_buffer_domain(E, (lo,
hi))`` holds values in ``[lo, hi)``. What cannot be proven becomes an assertion in the block,
which stops the kernel with an ``ArgumentError`` (an error kind registered with tvm-ffi,
``errors.ARGUMENT_ERROR_KIND``) naming the buffer, axis and coordinate. A coordinate
read from a data buffer without a declared domain is refused at lowering.

A check runs before the first read it protects: the search block of a lookup runs the checks
of the coordinates that select the searched row (``indptr[i // blk]``) before searching, an
init runs its own checks (it runs before its block's, and alone on an empty reduction), and
the row an attached axis takes from its new parent is checked in the block holding its loop.
A check that fails in a parallel loop stops the call on one thread too (``parallel_checks``).

Example
-------
Rows summed in pairs, ``Y[i // 2, k]`` with ``m_out`` rows (as csr2bsr's ``B[i // blk_size,
...]``): not provable, so the kernel asserts ``0 <= i // 2 < m_out``:

>>> import numpy as np, sparsetir
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def pool(x: T.handle, y: T.handle, m: T.int32, m_out: T.int32):
...     I = T.dense_fixed(m)
...     I_out = T.dense_fixed(m_out)
...     K = T.dense_fixed(4)
...     X = T.match_sparse_buffer(x, (I, K), "float32")
...     Y = T.match_sparse_buffer(y, (I_out, K), "float32")
...     with T.sp_iter([I, K], "RS", "pool") as [i, k]:
...         Y[i // 2, k] = Y[i // 2, k] + X[i, k]
>>> kernel = sparsetir.build(pool, "llvm", cache=True)
>>> X, Y = np.arange(24, dtype=np.float32).reshape(6, 4), np.zeros((3, 4), np.float32)
>>> kernel(X, Y, 6, 3)
>>> np.allclose(Y, X.reshape(3, 2, 4).sum(axis=1))
True

A call with too small an ``m_out`` raises ``ArgumentError``:

>>> kernel(X, np.zeros((2, 4), np.float32), 6, 2)
Traceback (most recent call last):
...
sparsetir.errors.ArgumentError: coordinate i // 2 of Y on axis I_out must lie in [0, m_out)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import structural_map
from ..errors import ARGUMENT_ERROR_KIND, LoweringError


class CoordinateChecker:
    """Proves coordinates in range, or returns the condition to check.

    Parameters
    ----------
    domains : dict
        Stage II buffer -> ``(lo, hi)`` of the values it holds (validated at the call).
    data_buffers : dict
        Stage II buffer -> Stage I name of every buffer holding data (not index arrays).
    """

    def __init__(self, domains: dict, data_buffers: dict):
        self.domains = domains
        self.data_buffers = data_buffers
        self.prover = tvm.sym.Analyzer()

    def bind(self, var, extent) -> None:
        """Tell the prover that block variable ``var`` lies in ``[0, extent)``."""
        self.prover.bind(var, tvm.ir.Range.from_min_extent(tirx.const(0, "int32"), extent))

    def condition(self, coord, bound, what: str):
        """None when ``0 <= coord < bound`` is proven, else that condition.

        ``what`` names the coordinate for the error raised when a data buffer without a
        declared domain feeds it.
        """
        loads = []
        tvm_ffi.structural_walk(coord, (tvm.ir.TensorLoad, loads.append), order="pre")
        for load in loads:
            if load.source in self.data_buffers and load.source not in self.domains:
                name = self.data_buffers[load.source]
                raise LoweringError(
                    f"{what} is read from {name}, whose values are not known to lie on the "
                    f"axis; declare their range with T.assume_buffer_domain({name}, (lo, hi)) "
                    "and the call will check it")
        fresh = {}

        def on_load(load):
            if load.source not in self.domains:
                return load
            var = tirx.Var(f"{load.source.name}_value", "int32")
            fresh[var] = self.domains[load.source]
            return var

        abstract = structural_map(coord, (tvm.ir.TensorLoad, on_load), order="post")
        for var, (lo, hi) in fresh.items():
            self.prover.bind(var, tvm.ir.Range.from_min_extent(lo, hi - lo))
        if self.prover.can_prove(abstract >= 0) and self.prover.can_prove(abstract < bound):
            return None
        return tirx.all(coord >= 0, coord < bound)


def assertion(condition, message: str) -> tirx.AssertStmt:
    """The statement that stops the kernel with ``message`` unless ``condition`` holds: an
    error of kind ``ARGUMENT_ERROR_KIND``, which the call raises as ``ArgumentError``."""
    return tirx.AssertStmt(condition, tvm.ir.StringImm(ARGUMENT_ERROR_KIND),
                           [tvm.ir.StringImm(message)])

