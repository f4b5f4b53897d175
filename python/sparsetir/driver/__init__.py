"""``build``: the one driver from a Stage I function or Stage II module to a callable kernel,
and the kernel cache it can keep its results in (``cache``).

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm    # a Stage I function: C = A @ B over CSR
>>> kernel = sparsetir.build(csrmm.specialize({"feat_size": 64}), "llvm")
>>> [param.name for param in kernel.signature.params]
['a', 'x', 'y', 'indptr', 'indices', 'm', 'n', 'nnz']
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> B, C = np.ones((5, 64), np.float32), np.zeros((6, 64), np.float32)
>>> kernel(A.data, B, C, A.indptr, A.indices, 6, 5, A.nnz)
>>> np.allclose(C, A @ B)
True
"""
from .build_module import build

__all__ = ["build"]
