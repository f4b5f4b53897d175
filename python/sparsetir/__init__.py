"""sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel.

Stage I (coordinate space, ``sparsetir.ir``) is written with ``sparsetir.script.tir``;
``lower_sparse_iter`` turns it into schedulable TensorIR (Stage II), ``lower_sparse_buffer`` into
flat buffers (Stage III), and ``build`` into a callable kernel.
"""
from . import ir, script
from .build import build
from .ir import SparseFunction
from .transform import lower_sparse_buffer, lower_sparse_iter

__all__ = ["SparseFunction", "build", "ir", "lower_sparse_buffer", "lower_sparse_iter", "script"]
