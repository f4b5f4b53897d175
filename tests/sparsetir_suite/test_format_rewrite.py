"""SparseTIR's ``tests/python/sparsetir/test_format_rewrite.py`` as it stood at f2cbe47, ported.

SparseTIR later split this file into ``test_composable_format.py`` (the three rewrites, the pass
``tvm.tir.transform.SparseFormatRewrite(rewrites)(mod)`` renamed ``format_decompose(mod,
rewrites)``, kernels from ``sparse_tir_format_rewrite_scripts`` renamed
``sparse_tir_composable_format_scripts``) and ``test_format_conversion_routine.py``
(``test_column_part_hyb``, ``test_condense``), keeping each test's text otherwise. Their
ports run here under this file's names:

| SparseTIR test (f2cbe47) | status |
|---|---|
| ``test_csrmm_bsr_rewrite`` | passes with documented renames (``SparseFormatRewrite(rules)(mod)`` -> ``format_decompose(func, rules)``), the expected function in our form (``test_composable_format.py``) |
| ``test_csrmm_ell_rewrite`` | the same |
| ``test_csrmm_padding_rewrite`` | the same |
| ``test_column_part_hyb`` | passes with documented renames (``test_format_conversion_routine.py``) |
| ``test_condense`` | passes with documented renames (``test_format_conversion_routine.py``) |
"""

from test_composable_format import (  # noqa: F401  (collected here under f2cbe47's names)
    test_csrmm_bsr_rewrite,
    test_csrmm_ell_rewrite,
    test_csrmm_padding_rewrite,
)
from test_format_conversion_routine import (  # noqa: F401
    test_column_part_hyb,
    test_condense,
)
