"""Stage I -> Stage II: ``lower_sparse_iter`` and its parts.

``plan`` decides loops and blocks, ``access`` rewrites coordinate accesses into positions,
``layout`` gives each sparse buffer its Stage II shape, ``emit`` writes the TensorIR,
``coordinate_checks`` proves or checks every index, ``first_slots`` zeroes padding slots,
``init_placement`` decides where each ``T.init`` runs, ``regions`` and ``loop_signature``
record what later stages need.

Example
-------
>>> import sparsetir
>>> mod = sparsetir.lower_sparse_iter(csrmm)      # a tvm.IRModule; tvm.s_tir.Schedule(mod) works
"""
from .lower_sparse_iter import lower_sparse_iter

__all__ = ["lower_sparse_iter"]
