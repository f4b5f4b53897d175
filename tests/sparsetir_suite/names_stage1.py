"""The kernel names SparseTIR's Stage I tests loop over, kept in one place for the ports.

SparseTIR's ``test_lower_sparse_iter.py``, ``test_lower_sparse_buffer.py`` and
``test_script_roundtrip.py`` each write out their own ``func_name_list`` of kernels from
``sparse_tir_scripts`` (here ``scripts_stage1``); the ports take theirs from here:

- ``FUNC_NAMES``: the list of SparseTIR's two lowering tests (19 kernels, its order);
  ``test_script_roundtrip.py``'s is the same without ``hyper_gnn``.
- ``NOT_LOWERED``: the two kernels that cannot be lowered as SparseTIR wrote them
  (``test_lower_sparse_iter.py`` says why and checks the errors).
- ``LOWERED``: ``FUNC_NAMES`` without ``NOT_LOWERED``, the 17 kernels the lowering tests run.

>>> from names_stage1 import LOWERED, NOT_LOWERED
>>> len(LOWERED), sorted(NOT_LOWERED)
(17, ['bmm', 'rgcn_homo_forward'])
"""

FUNC_NAMES = [
    "csrmm",
    "csrmm_dense_iter",
    "segment_reduce",
    "csr_reduce",
    "bsrmm",
    "ellmm",
    "csr_element_wise",
    "hyper_gnn",
    "bmm",
    "sddmm",
    "fused_sddmm",
    "square_sum",
    "square_sum_two_K",
    "fused_reduction_4d_2d",
    "fused_reduction_4d_3d",
    "rgcn_homo_forward",
    "rgcn_hetero_forward",
    "sparse_softmax",
    "csr2bsr",
]

NOT_LOWERED = {"bmm", "rgcn_homo_forward"}

LOWERED = [name for name in FUNC_NAMES if name not in NOT_LOWERED]
