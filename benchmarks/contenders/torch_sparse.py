"""torch.sparse: a CSR tensor times a dense tensor, and ``torch.sparse.sampled_addmm``.

The CSR tensors (int64 indices, torch's default) and the dense inputs are made once, outside
the timed region. SDDMM is ``sampled_addmm(A, X, Y.T, beta=0)``: ``X @ Y.T`` at ``A``'s
nonzeros, a CSR tensor whose ``values()`` follow ``A.indices``. Threads:
``torch.set_num_threads``.

Example
-------
>>> c = TorchSparse(A, threads=2)
>>> vals = c.to_numpy("sddmm", c.sddmm(X, Y)())
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from contenders import Contender, ones_like

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def _csr(A) -> torch.Tensor:
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                   torch.from_numpy(A.indices.astype(np.int64)),
                                   torch.from_numpy(A.data), size=A.shape,
                                   check_invariants=False)  # a valid scipy CSR matrix


class TorchSparse(Contender):
    def __init__(self, A, threads: int):
        super().__init__(A, threads)
        torch.set_num_threads(threads)
        self.weighted, self.unweighted = _csr(A), _csr(ones_like(A))

    def spmm(self, X, weighted):
        A, X = (self.weighted if weighted else self.unweighted), torch.from_numpy(X)
        return lambda: A @ X

    def sddmm(self, X, Y):
        A, X, Yt = self.weighted, torch.from_numpy(X), torch.from_numpy(Y).T
        return lambda: torch.sparse.sampled_addmm(A, X, Yt, beta=0.0)

    def to_numpy(self, op, result):
        return (result.values() if op == "sddmm" else result).numpy()


CONTENDER = TorchSparse
