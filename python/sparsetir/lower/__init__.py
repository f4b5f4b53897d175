"""Stage I -> Stage II: ``lower_sparse_iter`` and its parts.

``plan`` decides loops and blocks, ``access`` rewrites coordinate accesses into positions,
``layout`` gives each sparse buffer its Stage II shape, ``emit`` writes the TensorIR,
``coordinate_checks`` proves or checks every index, ``first_slots`` zeroes padding slots,
``init_placement`` decides where each ``T.init`` runs, ``regions`` and ``loop_signature``
record what later stages need.

Example
-------
>>> import sparsetir, tvm
>>> from sparsetir.ops.kernels import spmm as csrmm       # a Stage I SparseFunction
>>> mod = sparsetir.lower_sparse_iter(csrmm)      # a tvm.IRModule; tvm.s_tir.Schedule(mod) works
>>> sch = tvm.s_tir.Schedule(mod)
>>> len(sch.get_loops(sch.get_sblock("spmm1")))    # the loops j, k over a row's nonzeros
2
"""
from .lower_sparse_iter import lower_sparse_iter

__all__ = ["lower_sparse_iter"]
