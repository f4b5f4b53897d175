"""Sparse tensor algebra in TACO's index notation, compiled through co-iteration.

``compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})`` returns a
kernel: ``k.func`` is the Stage I function it generated (``k.func.script()`` prints it),
``k.lattices`` the merge lattice of each index, ``k.rebuild(func)`` the kernel of a rewritten
or scheduled function, and ``k(B=..., C=...)`` the result (``SparseTensor`` / numpy array /
0-d array). Unstored entries of a sparse operand are structural zeros: the expression is
computed only where the merge visits (a product is not computed where a factor stores
nothing, so NaN or inf in the other factor does not propagate there; a sparse divisor is
refused). An operand format with slices makes the operand its window; a result format with
slices is refused. A statement whose merge is too large for one kernel (a sum of many sparse
operands) compiles to a ``GroupedKernel``: a chain of kernels over runs of its terms. See
``docs/coiteration.md``.
"""

from .compiler import compile  # pylint: disable=redefined-builtin
from .grouped import GroupedKernel
from .kernel import AlgebraKernel
from .notation import NotationError, parse

__all__ = ["AlgebraKernel", "GroupedKernel", "NotationError", "compile", "parse"]
