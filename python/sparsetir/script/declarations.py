"""What the sparse constructs of the ``T`` namespace evaluate to while a kernel is parsed.

``T.dense_fixed(m)``, ``T.sp_iter(...)``, ``T.init()`` and the other sparse constructs are
ordinary Python calls made by the parser's expression evaluator. They return these small
declaration records; the parser (``parser.py``) turns each record into IR, giving it the name of
the variable it is assigned to. Keeping them plain Python means the namespace has no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AxisDecl:
    """``T.<kind>(...)``: an axis waiting for its name."""

    kind: str
    parent: Any
    length: Any
    nnz: Any = None
    nnz_cols: Any = None
    indptr: Any = None
    indices: Any = None
    idtype: str = "int32"
    sorted: bool = True
    indptr_dtype: Any = None        # None: stored in idtype
    indices_dtype: Any = None


@dataclass(frozen=True)
class BufferDecl:
    """``T.match_sparse_buffer`` / ``T.alloc_sparse_buffer``: a buffer waiting for its name."""

    axes: Any
    dtype: str
    handle: Any = None
    scope: str = "global"
    extra_storage: Any = None
    default_value: Any = None


@dataclass(frozen=True)
class SpIterDecl:
    """``T.sp_iter(axes, kinds, name)``, consumed by a ``with`` statement."""

    axes: Any
    kinds: str
    name: str


@dataclass(frozen=True)
class InitDecl:
    """``T.init()``, consumed by a ``with`` statement."""


@dataclass(frozen=True)
class FuncAttrDecl:
    """``T.func_attr({...})``."""

    attrs: dict


@dataclass(frozen=True)
class IterAttrDecl:
    """``T.sp_iter_attr({...})``."""

    attrs: dict


@dataclass(frozen=True)
class DomainDecl:
    """``T.assume_buffer_domain(buf, (lo, hi))``."""

    buffer: Any
    domain: Any
