"""``build``: the one driver from a Stage I function or Stage II module to a callable kernel,
and the kernel cache it can keep its results in (``cache``).

Example
-------
>>> import sparsetir
>>> kernel = sparsetir.build(csrmm.specialize({"feat_size": 64}), "llvm")
"""
from .build_module import build

__all__ = ["build"]
