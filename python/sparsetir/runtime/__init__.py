"""Calling compiled sparse kernels safely with numpy arrays, torch tensors and tvm tensors.

Examples
--------
>>> import numpy as np, scipy.sparse, sparsetir, tvm
>>> from sparsetir.driver.build_module import signature_of
>>> from sparsetir.ops.kernels import spmm                      # Y = A @ X over CSR
>>> from sparsetir.runtime import Kernel
>>> mod = sparsetir.lower_sparse_buffer(sparsetir.lower_sparse_iter(
...     spmm.specialize({"feat_size": 16})))
>>> kernel = Kernel(tvm.compile(mod, "llvm"), signature_of(mod["main"]))
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X, Y = np.ones((5, 16), np.float32), np.empty((6, 16), np.float32)
>>> kernel(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)     # results land in Y
>>> np.allclose(Y, A @ X)
True
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
