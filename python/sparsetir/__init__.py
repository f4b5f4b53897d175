"""sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel.

Stage I (coordinate space, ``sparsetir.ir``) is written with ``sparsetir.script.tir``;
``lower_sparse_iter`` turns it into schedulable TensorIR (Stage II), ``lower_sparse_buffer`` into
flat buffers (Stage III), and ``build`` into a callable kernel.
"""
from . import ir, script
from .ir import SparseFunction
from .transform import lower_sparse_iter
from .transform.lower_sparse_buffer import lower_sparse_buffer
from .build import build
