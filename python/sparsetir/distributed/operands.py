"""The checks every distributed operator makes of its arguments, naming the one refused.

Example
-------
>>> import os, tempfile
>>> import numpy as np, scipy.sparse, torch, torch.distributed as dist
>>> from sparsetir.distributed import DistSparseMatrix, partition
>>> store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
>>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)    # one rank: all of A
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> DM = DistSparseMatrix(partition(A, 1)[0])
>>> X_local = torch.rand(6, 16)[torch.from_numpy(np.asarray(DM.part.owned))]
>>> check_node_rows("X_local", X_local, DM)             # one row per owned node: accepted
>>> check_node_rows("X_local", X_local[:5], DM)
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRValueError: X_local has shape (5, 16): it needs 2 dimensions
and one row per node rank 0 owns (6)
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import torch

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ops.graph_tensors import is_distributed


def check_matrix(DM) -> None:
    """Refuse anything but a ``DistSparseMatrix``."""
    if not is_distributed(DM):
        raise SparseTIRTypeError(f"DM must be a sparsetir.distributed.DistSparseMatrix, got "
                                 f"{type(DM).__name__}")


def check_node_rows(name: str, X, DM, two_dims: bool = True, exchanged: bool = False) -> None:
    """Refuse ``X`` unless it is a float CPU tensor with one row per owned node, of the
    matrix's dtype, and 2-D (``two_dims``) or at least 1-D. The dtype of rows the exchange
    sends (``exchanged``) is checked after it instead (``check_rows_dtype``): the exchange
    refuses, on every rank, rows whose dtype differs between ranks, so a refusal here on one
    rank alone would leave the others waiting in it."""
    if not torch.is_tensor(X):
        raise SparseTIRTypeError(f"{name} must be a torch tensor, got {type(X).__name__}")
    if (X.dim() != 2 if two_dims else X.dim() < 1) or X.shape[0] != DM.part.num_owned:
        raise SparseTIRValueError(f"{name} has shape {tuple(X.shape)}: it needs "
                                  f"{'2 dimensions' if two_dims else 'a first dimension'} and "
                                  f"one row per node rank {DM.part.rank} owns "
                                  f"({DM.part.num_owned})")
    if not exchanged:
        check_rows_dtype(name, X, DM)
    if X.device.type != "cpu":
        raise SparseTIRTypeError(f"{name} is on {X.device}; sparsetir.ops runs on the CPU")


def check_rows_dtype(name: str, X, DM) -> None:
    """Refuse ``X`` unless it has the matrix's dtype (nothing is cast)."""
    dtype = str(X.dtype).replace("torch.", "")
    if dtype != str(DM.blocks[0].dtype):
        raise SparseTIRTypeError(f"{name} is {dtype} and the matrix {DM.blocks[0].dtype}: "
                                 "nothing is cast, pass one dtype")
