"""torch.sparse: a CSR tensor times a dense tensor, and ``torch.sparse.sampled_addmm``.

The CSR tensors (int64 indices, torch's default), the dense inputs and the outputs (NaN) are
made once, outside the timed region. SpMM is ``torch.mm(A, X, out=Y)``; SDDMM is
``sampled_addmm(A, X, Y.T, beta=0, out=C)``: ``X @ Y.T`` at ``A``'s nonzeros, into a CSR tensor
``C`` of ``A``'s pattern whose ``values()`` follow ``A.indices``. In bfloat16 the CSR values
and dense inputs are bfloat16 tensors (torch 2.13 refuses both calls so on the CPU: the
worker reports the refusal). Threads: ``torch.set_num_threads``.

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

    def spmm(self, X, weighted, dtype="float32"):
        dtype = getattr(torch, dtype)
        A = (self.weighted if weighted else self.unweighted).to(dtype)
        X = torch.from_numpy(X).to(dtype)
        out = torch.full((A.shape[0], X.shape[1]), float("nan"), dtype=dtype)
        return lambda: torch.mm(A, X, out=out)

    def sddmm(self, X, Y, dtype="float32"):
        dtype = getattr(torch, dtype)
        A, X = self.weighted.to(dtype), torch.from_numpy(X).to(dtype)
        Yt = torch.from_numpy(Y).to(dtype).T
        out = A.clone()
        out.values().fill_(float("nan"))
        return lambda: torch.sparse.sampled_addmm(A, X, Yt, beta=0.0, out=out)

    def to_numpy(self, op, result):
        return super().to_numpy(op, result.values() if op == "sddmm" else result)


CONTENDER = TorchSparse
