"""The search that ``SparseMatrix(A, tune=True)`` runs at a kernel's first call.

``sparsetir.tune`` puts its ``tune`` function here when it is imported (``sparsetir.ops``
imports it), so that the operators reach the search without importing the package that
imports them. None until then: a matrix made with ``tune=True`` then runs untuned.

Example
-------
>>> import sparsetir.ops
>>> from sparsetir.ops import tuning
>>> tuning.search is sparsetir.ops.tune
True
"""

search = None
"""``tune(matrix, feat_sizes, kernels=[name], budget_s=...)``: searches, fills ``matrix.tuned``."""

BUDGET_S = 2.0
"""Seconds of checking and timing the search spends at a kernel's first call (compiles come on
top, the first time a kernel is built on the machine)."""
