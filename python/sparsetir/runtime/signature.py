"""Description of a compiled kernel's parameters and of the index checks its data must pass."""
from __future__ import annotations

import numbers
import operator
from dataclasses import dataclass
from typing import Mapping, Union

from tvm import tirx
from ..errors import SparseTIRTypeError, SparseTIRValueError


@dataclass(frozen=True)
class ScalarParam:
    """An integer scalar parameter.

    Parameters
    ----------
    name : str
        Parameter name as in the kernel signature.
    var : tvm.tirx.Var
        The TIR variable (int32 or int64) that buffer lengths and checks refer to.

    Examples
    --------
    >>> m = tirx.Var("m", "int32")
    >>> ScalarParam("m", m)
    ScalarParam(name='m', var=m)
    """

    name: str
    var: tirx.Var


@dataclass(frozen=True)
class BufferParam:
    """A flat 1-D buffer parameter.

    Parameters
    ----------
    name : str
        Parameter name as in the kernel signature.
    dtype : str
        Element type, such as ``"float32"`` or ``"int32"``.
    length : PrimExpr or int
        Number of elements, an integer expression over the kernel's scalar vars.
    written : bool
        Whether the kernel stores into the buffer.
    shape : tuple of PrimExpr or int
        The declared (Stage II) dimensions, which an argument with more than one dimension
        must match; empty when only the length is known.
    keeps_shape : bool
        The compiled function takes the buffer with ``shape`` (a tensorized buffer keeps its
        dimensions), not flat: the call passes a view of that shape.
    alignment : int
        Byte alignment the compiled function assumes for the data (0: the kernel's default).
    layout : str
        The text of the ``TiledLayout`` whose flat physical array the buffer is
        (``sparsetir.format.apply_tiled_layout``), empty otherwise. Such a buffer declares the
        shape ``(length,)`` unless told another: it takes only a 1-D array, never an N-D array
        that merely has as many elements (the logical array, whose elements sit elsewhere).

    Examples
    --------
    >>> m, n = tirx.Var("m", "int32"), tirx.Var("n", "int32")
    >>> BufferParam("indptr", "int32", m + 1, written=False).length
    m + 1
    >>> BufferParam("b", "float32", n * 64, written=False, shape=(n, 64)).shape
    (n, 64)
    >>> BufferParam("x", "float32", 8, written=False, layout="{1,0:T(2,2)}").shape
    (8,)
    """

    name: str
    dtype: str
    length: object
    written: bool
    shape: tuple = ()
    keeps_shape: bool = False
    alignment: int = 0
    layout: str = ""

    def __post_init__(self):
        if self.layout and not self.shape:
            object.__setattr__(self, "shape", (self.length,))


@dataclass(frozen=True)
class IndptrCheck:
    """The row pointer of a variable (CSR) axis.

    ``indptr[0]`` must be 0, ``indptr[-1]`` must equal `nnz`, and the
    entries must be non-decreasing.

    Parameters
    ----------
    param : str
        Name of the :class:`BufferParam` holding the row pointer.
    nnz : PrimExpr or int
        Number of stored entries the row pointer spans.

    Examples
    --------
    >>> nnz = tirx.Var("nnz", "int32")
    >>> IndptrCheck("indptr", nnz)
    IndptrCheck(param='indptr', nnz=nnz)
    """

    param: str
    nnz: object


@dataclass(frozen=True)
class IndicesCheck:
    """The coordinates of a sparse axis.

    Parameters
    ----------
    param : str
        Name of the :class:`BufferParam` holding the indices.
    bound : PrimExpr or int
        Every index must lie in ``[0, bound)``.
    indptr : str or None
        Name of the row pointer delimiting the rows, or None for rows of fixed width.
    width : PrimExpr, int or None
        Row width (ELL) when `indptr` is None.  With neither, the indices form
        a single row (a sparse vector).
    sorted : bool
        Whether indices must be strictly increasing within each row
        (kernels that binary-search a row rely on it).

    Examples
    --------
    >>> n = tirx.Var("n", "int32")
    >>> IndicesCheck("indices", n, indptr="indptr", width=None, sorted=True)
    IndicesCheck(param='indices', bound=n, indptr='indptr', width=None, sorted=True)
    """

    param: str
    bound: object
    indptr: str | None
    width: object | None
    sorted: bool


@dataclass(frozen=True)
class ValueDomainCheck:
    """The values of a data buffer that index another buffer (``T.assume_buffer_domain``).

    Parameters
    ----------
    param : str
        Name of the :class:`BufferParam`.
    min, max : PrimExpr or int
        Every value must lie in ``[min, max)``.

    Examples
    --------
    >>> r = tirx.Var("r", "int32")      # the number of edge types
    >>> ValueDomainCheck("etype", 0, r)
    ValueDomainCheck(param='etype', min=0, max=r)
    """

    param: str
    min: object
    max: object


Param = Union[ScalarParam, BufferParam]
Check = Union[IndptrCheck, IndicesCheck, ValueDomainCheck]


@dataclass(frozen=True)
class Signature:
    """All parameters of a kernel, in order, with the checks on its index data.

    Construction fails with ValueError when names repeat or a check refers to
    a parameter that is not a buffer of the signature.

    Parameters
    ----------
    params : tuple of ScalarParam or BufferParam
        The kernel's parameters in call order.
    checks : tuple of IndptrCheck or IndicesCheck
        Checks run on the index arrays before a validated call.

    Examples
    --------
    >>> m, n, nnz = (tirx.Var(s, "int32") for s in ("m", "n", "nnz"))
    >>> signature = Signature(
    ...     params=(BufferParam("indptr", "int32", m + 1, False),
    ...             BufferParam("indices", "int32", nnz, False),
    ...             ScalarParam("m", m), ScalarParam("n", n), ScalarParam("nnz", nnz)),
    ...     checks=(IndptrCheck("indptr", nnz),
    ...             IndicesCheck("indices", n, "indptr", None, sorted=False)))
    >>> [param.name for param in signature.params]
    ['indptr', 'indices', 'm', 'n', 'nnz']
    >>> Signature(params=(ScalarParam("m", m), ScalarParam("m", m)))
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: signature repeats a parameter name: ['m', 'm']
    """

    params: tuple
    checks: tuple = ()

    def __post_init__(self):
        names = [param.name for param in self.params]
        if len(set(names)) != len(names):
            raise SparseTIRValueError(f"signature repeats a parameter name: {names}")
        buffers = {param.name for param in self.params if isinstance(param, BufferParam)}
        for check in self.checks:
            referenced = [check.param]
            if isinstance(check, IndicesCheck) and check.indptr is not None:
                referenced.append(check.indptr)
            for name in referenced:
                if name not in buffers:
                    raise SparseTIRValueError(f"{check} refers to {name!r}, which is not a buffer parameter")


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _trunc_mod(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


_BINARY_OPS = {
    tirx.Add: operator.add,
    tirx.Sub: operator.sub,
    tirx.Mul: operator.mul,
    tirx.FloorDiv: operator.floordiv,
    tirx.FloorMod: operator.mod,
    tirx.Div: _trunc_div,
    tirx.Mod: _trunc_mod,
    tirx.Min: min,
    tirx.Max: max,
}


def evaluate_int(expr, env: Mapping[tirx.Var, int]) -> int:
    """Evaluate an integer expression given values for its variables.

    Parameters
    ----------
    expr : PrimExpr or int
        Built from ``IntImm``, ``Var``, ``Cast`` and the arithmetic nodes
        ``Add``, ``Sub``, ``Mul``, ``FloorDiv``, ``FloorMod``, ``Div``,
        ``Mod``, ``Min`` and ``Max``.
    env : mapping of tvm.tirx.Var to int
        Values of the variables `expr` refers to.

    Returns
    -------
    int
        The value, computed with Python integers (no overflow).

    Raises
    ------
    ValueError
        If `expr` refers to a variable missing from `env`.
    TypeError
        If `expr` contains a node the evaluator does not handle.
    ZeroDivisionError
        If a divisor evaluates to zero.

    Examples
    --------
    >>> m = tirx.Var("m", "int32")
    >>> evaluate_int((m + 1) * 2, {m: 4})
    10
    """
    if isinstance(expr, numbers.Integral):
        return int(expr)
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        if expr not in env:
            bound = ", ".join(str(var) for var in env) or "none"
            raise SparseTIRValueError(f"variable {expr} is unbound (bound: {bound})")
        return env[expr]
    if isinstance(expr, tirx.Cast):
        return evaluate_int(expr.value, env)
    op = _BINARY_OPS.get(type(expr))
    if op is None:
        raise SparseTIRTypeError(f"cannot evaluate {type(expr).__name__} expression {expr} as an integer")
    return op(evaluate_int(expr.a, env), evaluate_int(expr.b, env))
