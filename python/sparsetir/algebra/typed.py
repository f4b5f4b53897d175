"""One kernel per value type: a statement compiled without ``dtype`` computes in its operands'.

``compile(statement, formats)`` (no ``dtype``) builds the float64 kernel, as scipy, TACO and
MLIR take the operands' type: a call whose operands are all float32 (or all float16) runs
that type's kernel, built by the first such call and kept on the kernel (and in the build
cache). Operands of different float types are refused by name (nothing is cast); a kernel
compiled with a ``dtype`` takes that type only.

Example
-------
>>> import numpy as np, scipy.sparse as sp
>>> from sparsetir.algebra import compile
>>> k = compile("A(i,j) = B(i,j) * C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
>>> B = sp.random(4, 5, density=0.5, format="csr", random_state=0, dtype=np.float32)
>>> k(B=B, C=B).values.dtype
dtype('float32')
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from ..errors import SparseTIRTypeError
from ..format import SparseTensor
from .storage import KERNEL_DTYPES, kernel_dtype


class ValueTyped:
    """What ``AlgebraKernel`` and ``GroupedKernel`` share: ``infers_dtype`` (compiled without
    ``dtype``) and the kernels of the other types a call has needed (``typed``)."""

    infers_dtype = False

    def typed(self, dtype) -> "ValueTyped":
        """This statement's kernel computing in ``dtype`` (this one for its own type; built
        once per type, then kept); ``SparseTIRTypeError`` for a type ``compile(dtype=...)``
        refuses."""
        dtype = kernel_dtype(dtype)
        if dtype == self.dtype:
            return self
        kernels = self.__dict__.setdefault("_typed", {})
        if dtype not in kernels:
            kernels[dtype] = self._retyped(dtype)
            kernels[dtype].plan = self.plan
        return kernels[dtype]

    def _retyped(self, dtype: str) -> "ValueTyped":
        """A new kernel of the same statement and formats computing in ``dtype``."""
        raise NotImplementedError

    def for_operands(self, operands: dict) -> "ValueTyped":
        """The kernel of the operands' value type where this one infers it, else this one."""
        if not self.infers_dtype:
            return self
        dtype = operand_dtype(self.statement, operands)
        return self if dtype is None else self.typed(dtype)


def operand_dtype(stmt, operands: dict):
    """The one float type of ``operands`` (name -> value) as a name, or None when none has a
    kernel's float type; ``SparseTIRTypeError`` naming the operands of mixed types."""
    types = {}
    for name, value in operands.items():
        dtype = _value_dtype(value)
        if dtype is not None and dtype.name in KERNEL_DTYPES:
            types[name] = dtype.name
    if len(set(types.values())) > 1:
        listed = ", ".join(f"{name} {dtype}" for name, dtype in types.items())
        raise SparseTIRTypeError(f"operands of {stmt.text!r} have mixed value types ({listed}); "
                                 "convert them to one type first (nothing is cast)")
    return next(iter(types.values()), None)


def _value_dtype(value):
    if scipy.sparse.issparse(value) or isinstance(value, (np.ndarray, np.generic)):
        return np.dtype(value.dtype)
    if isinstance(value, SparseTensor):
        return np.dtype(value.dtype)
    return None
