"""``sparsetir.algebra.compile``: the kernel of a statement in TACO's index notation.

One ``AlgebraKernel`` where its merge fits the emitter's limit; else a ``GroupedKernel`` that
sums the statement's terms in a chain of smaller kernels (``grouped``), or the
``MergeTooLargeError`` saying why it cannot, raised before anything is compiled.

Example
-------
>>> import numpy as np, scipy.sparse as sp
>>> k = compile("A(i,j) = B(i,j) * C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
>>> B = sp.random(4, 5, density=0.5, format="csr", random_state=0)
>>> bool(np.allclose(k(B=B, C=B).to_dense(), B.multiply(B).toarray()))
True
"""

from __future__ import annotations

from ..errors import MergeTooLargeError, SparseTIRValueError
from .grouped import split
from .kernel import AlgebraKernel
from .notation import parse
from .order import plan_order
from .storage import compile_arguments, level_format

DEFAULT_DTYPE = "float64"
"""The type a kernel compiled without ``dtype`` is built in (others by the calls needing them)."""


def compile(statement: str, formats: dict = None, dtype: str = None):  # pylint: disable=redefined-builtin
    """Compile ``statement`` (e.g. ``"A(i,j) = B(i,j) + C(i,j)"``) with ``formats`` (tensor
    name -> ``Encoding.named`` name, MLIR encoding text or ``Encoding``; others dense).
    Without ``dtype`` the kernel computes in its operands' float type (float64 built now, each
    other type by its first call: ``typed``); with it, in ``dtype`` only. Tensors whose level
    orders contradict are converted (``k.plan`` says which: ``order``).
    Unstored entries of a sparse operand are structural zeros: an expression is computed only
    where its operands' merge visits (``docs/coiteration.md``, *Unstored entries*)."""
    infers = dtype is None
    formats, dtype = compile_arguments(formats, DEFAULT_DTYPE if infers else dtype)
    stmt = parse(statement)
    ranks = {stmt.lhs.name: len(stmt.lhs.indices), **{a.name: len(a.indices) for a in stmt.accesses}}
    for name in formats:
        if name not in ranks:
            raise SparseTIRValueError(f"formats names {name!r}, which {statement!r} does not use")
    fmts = {name: level_format(formats.get(name), rank, name) for name, rank in ranks.items()}
    if fmts[stmt.lhs.name].slices is not None:
        raise SparseTIRValueError(
            f"format of {stmt.lhs.name}: {formats[stmt.lhs.name]!r} has dimension slices; a "
            f"result is the whole tensor {statement!r} defines (its operands' formats may "
            "have slices: each operand is then its window); convert the result to a slice "
            "encoding afterwards (SparseTensor.convert) for a window of it")
    plan = plan_order(stmt, fmts)         # tensors in contradicting level orders converted
    try:
        kernel = AlgebraKernel(stmt, plan.formats, dtype)
    except MergeTooLargeError as err:
        kernel = split(stmt, plan.formats, dtype, err)
    kernel.plan, kernel.infers_dtype = plan, infers
    return kernel
