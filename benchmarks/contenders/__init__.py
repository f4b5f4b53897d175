"""The contenders: one module each, every one a subclass of :class:`Contender`.

A contender is built once per graph, outside the timed region (as a DGL graph or a torch CSR
tensor would be), then asked for a ``run`` callable per operator. ``run()`` is the whole call as
a user of that library makes it, inputs already in the library's own types; it returns the
library's own result, and ``to_numpy`` (not timed) turns that into numpy for the check. An
operator the library has no natural call for gets ``None`` (reported n/a).

Operators, for a float32 CSR matrix ``A`` (``m x n``): ``spmm`` ``Y = A @ X`` (``X``: ``n x f``),
``spmm_unweighted`` the same with every value of ``A`` taken as 1, and ``sddmm``: for every
nonzero ``(r, c)`` of ``A`` the value ``dot(X[r], Y[c])`` (``X``: ``m x f``, ``Y``: ``n x f``), as a
1-D array aligned with ``A.indices``.

Dtypes: every contender runs in float32; those in ``BFLOAT16`` also in bfloat16, asked with
``dtype="bfloat16"`` (``spmm(X, weighted, dtype)``, ``sddmm(X, Y, dtype)``): the inputs still
come as float32 numpy arrays and the contender rounds them (and its edge values) to bfloat16
in its own types, outside the timed region. A library whose call refuses bfloat16 raises, and
the worker reports it as refusing, with the library's message.

Example
-------
>>> from contenders import load
>>> Contender = load("scipy")              # ImportError when the library is not installed
>>> c = Contender(A, threads=2)
>>> run = c.spmm(X, weighted=True)
>>> Y = c.to_numpy("spmm", run())
"""

from __future__ import annotations

import importlib

import numpy as np

NAMES = ("ours", "ours_tuned", "ours_plain", "dgl", "torch_sparse", "scipy", "mkl", "graphblas")
OURS = ("ours", "ours_tuned", "ours_plain")
"""sparsetir's contenders; the rest are the libraries it is compared with."""
BFLOAT16 = ("ours", "dgl", "torch_sparse")
"""The contenders run in bfloat16 too: ours, and the libraries with bfloat16 calls on the CPU
(scipy, MKL's sparse BLAS and GraphBLAS have none)."""


class Contender:
    """Base class: every operator n/a, results already numpy."""

    def __init__(self, A, threads: int):
        self.A, self.threads = A, threads

    def spmm(self, X: np.ndarray, weighted: bool, dtype: str = "float32"):
        """A callable computing ``A @ X`` (values of ``A`` or ones) in ``dtype``, or None."""
        return None

    def sddmm(self, X: np.ndarray, Y: np.ndarray, dtype: str = "float32"):
        """A callable computing ``dot(X[r], Y[c])`` for every nonzero ``(r, c)`` in ``dtype``,
        or None."""
        return None

    def to_numpy(self, op: str, result) -> np.ndarray:
        """``run()``'s result for operator ``op`` as a numpy array (not timed); a torch
        tensor of any floating dtype as float32."""
        if type(result).__module__.startswith("torch"):
            return result.detach().float().numpy()
        return np.asarray(result)


def load(name: str) -> type:
    """The :class:`Contender` subclass of contender ``name`` (ImportError if not installed)."""
    if name not in NAMES:
        raise KeyError(f"no contender {name!r}; known: {', '.join(NAMES)}")
    return importlib.import_module(f"contenders.{name}").CONTENDER


def ones_like(A):
    """``A``'s pattern with every value 1 (the unweighted operand a library without a pattern-only
    matrix is given), float32."""
    B = A.copy()
    B.data = np.ones(A.nnz, np.float32)
    return B
