"""The checks every distributed operator makes of its arguments, naming the one refused.

Example
-------
>>> # check_node_rows("X_local", X_local, DM)
"""

from __future__ import annotations

import torch

from ..errors import SparseTIRTypeError, SparseTIRValueError


def check_matrix(DM) -> None:
    """Refuse anything but a ``DistSparseMatrix``."""
    if not getattr(DM, "is_distributed", False):
        raise SparseTIRTypeError(f"DM must be a sparsetir.distributed.DistSparseMatrix, got "
                                 f"{type(DM).__name__}")


def check_node_rows(name: str, X, DM, two_dims: bool = True) -> None:
    """Refuse ``X`` unless it is a float CPU tensor with one row per owned node, of the
    matrix's dtype, and 2-D (``two_dims``) or at least 1-D."""
    if not torch.is_tensor(X):
        raise SparseTIRTypeError(f"{name} must be a torch tensor, got {type(X).__name__}")
    if (X.dim() != 2 if two_dims else X.dim() < 1) or X.shape[0] != DM.part.num_owned:
        raise SparseTIRValueError(f"{name} has shape {tuple(X.shape)}: it needs "
                                  f"{'2 dimensions' if two_dims else 'a first dimension'} and "
                                  f"one row per node rank {DM.part.rank} owns "
                                  f"({DM.part.num_owned})")
    dtype = str(X.dtype).replace("torch.", "")
    if dtype != str(DM.blocks[0].dtype):
        raise SparseTIRTypeError(f"{name} is {dtype} and the matrix {DM.blocks[0].dtype}: "
                                 "nothing is cast, pass one dtype")
    if X.device.type != "cpu":
        raise SparseTIRTypeError(f"{name} is on {X.device}; sparsetir.ops runs on the CPU")
