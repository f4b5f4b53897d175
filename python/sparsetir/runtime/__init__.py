"""Calling compiled sparse kernels safely with numpy arrays, torch tensors and tvm tensors.

Examples
--------
>>> from sparsetir.runtime import Kernel
>>> kernel = Kernel(tvm.compile(mod, "llvm"), signature)
>>> kernel(indptr, indices, data, x, y, m, n, nnz)  # results land in y
"""
from . import fork  # noqa: F401  (registers the fork handler: kernels work in forked children)
from ..errors import ArgumentError
from .kernel import Kernel
from .signature import (
                        BufferParam,
                        IndicesCheck,
                        IndptrCheck,
                        ScalarParam,
                        Signature,
                        ValueDomainCheck,
                        evaluate_int,
)
from .validate import check_indices, check_indptr

__all__ = [
    "ArgumentError",
    "BufferParam",
    "IndicesCheck",
    "IndptrCheck",
    "Kernel",
    "ScalarParam",
    "Signature",
    "ValueDomainCheck",
    "check_indices",
    "check_indptr",
    "evaluate_int",
]
