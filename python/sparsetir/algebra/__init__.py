"""Sparse tensor algebra in TACO's index notation, compiled through co-iteration.

``compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})`` returns a
kernel: ``k.func`` is the Stage I function it generated (``k.func.script()`` prints it),
``k.lattices`` the merge lattice of each index, ``k.rebuild(func)`` the kernel of a rewritten
or scheduled function, and ``k(B=..., C=...)`` the result (``SparseTensor`` / numpy array /
0-d array). See ``docs/coiteration.md``.
"""

from .compiler import compile  # pylint: disable=redefined-builtin
from .grouped import GroupedKernel
from .kernel import AlgebraKernel
from .notation import NotationError, parse

__all__ = ["AlgebraKernel", "GroupedKernel", "NotationError", "compile", "parse"]
