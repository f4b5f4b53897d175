"""Every attribute and annotation key sparsetir defines, and the Stage II metadata.

One home for each key: other modules import them from here (``tests/ir/test_attrs.py`` refuses
a key written as a literal anywhere else in the package).

``lower_sparse_iter`` leaves what the call of a compiled kernel must check (the CSR invariants
of each axis, the declared value ranges) and ``lower_sparse_buffer`` the Stage II shape of each
buffer it flattens. Sizes are kept as expressions (``PrimExpr``) over the function's own
parameters, never as text: they sit in the annotations of the function's root block, inside
its body, so that

* printing and parsing the module back (``tvm.script.from_source(mod.script())``) gives a
  structurally equal module with the sizes still bound to the parameters (TVM compares a
  function's attributes before it binds the parameters, so an expression there would not be);
* ``PrimFunc.specialize`` substitutes the values it is given (it leaves attributes alone);
* schedule primitives, ``lower_sparse_buffer`` and horizontal fusion keep them (they keep the
  root block's annotations).

Plain names (each Stage II parameter's Stage I name, the loops lowering made) stay function
attributes.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm)
>>> nnz = next(p for p in mod["main"].params if p.name == "nnz")
>>> index_checks(mod["main"])[0].nnz.same_as(nnz)     # the parameter Var itself
True
>>> index_checks(mod["main"].specialize({nnz: 10}))[0].nnz
10
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir, tirx
from ..errors import SparseTIRTypeError

# -- function attributes --------------------------------------------------------------------

PARAM_NAMES_ATTR = "sparsetir.param_names"
"""Stage II parameter name -> Stage I name (Stage II names buffers ``A``, ``J_indptr``)."""

LOWERED_LOOPS_ATTR = "sparsetir.lowered_loops"
"""Block name -> the loops lowering put between it and its enclosing block
(``lower.loop_signature``)."""

TILED_LAYOUTS_ATTR = "sparsetir.tiled_layouts"
"""Stage II buffer name -> layout text (``TiledLayout.parse`` reads it), for each parameter
``format.apply_tiled_layout`` re-declared as a flat physical array."""

INLINE_INDEX_CHECKS_ATTR = "sparsetir.inline_index_checks"
"""The index checks the kernel makes inside its loops (``backend.inline_checks``): one entry per
CSR axis, its Stage II buffer names, Stage I names, ``nnz``, ``bound`` and ``sorted``."""

# -- annotations of the root block: the metadata whose sizes are expressions -----------------

INDEX_CHECKS_KEY = "sparsetir.index_checks"
"""The CSR invariants the index parameters must satisfy (list of :class:`IndexCheck` entries)."""

VALUE_DOMAINS_KEY = "sparsetir.value_domains"
"""The declared value ranges of parameters (list of :class:`ValueDomain` entries)."""

STAGE2_SHAPES_KEY = "sparsetir.stage2_shapes"
"""Parameter name -> Stage II shape, for each buffer ``lower_sparse_buffer`` flattened."""

# -- block annotations ------------------------------------------------------------------------

PARALLEL_ANNOTATION = "sparsetir.rows_owned"
"""The block's outermost loop writes disjoint outputs (safe to parallelise)."""

INIT_PER_POINT_ANNOTATION = "sparsetir.init_per_point"
"""On a Stage I iteration: its spatial points never share an output element (row tiles), so its
``T.init`` stays native, once per point, even where a spatial variable does not index the
output (``lower.init_placement``). Not copied to the lowered block."""

PREPROCESS_ANNOTATION = "preprocess"
"""The block (or Stage I iteration) depends only on the sparse structure (indptr, indices)."""

ATOMIC_ANNOTATION = "atomic"
"""Accumulations in the block become atomic adds on CUDA (``transform.atomic``)."""

FUSE_ANNOTATION = "horizontal_fuse"
"""The block's top-level nest may share one launch with its neighbours
(``transform.horizontal_fusion``)."""

TILE_ROWS_ANNOTATION = "sparsetir.tile_owns_rows"
"""On a block whose outermost loop runs over row tiles: iteration ``t`` writes only the rows
of tile ``t``, the same rows in every nest so marked, as the kernel's call checks
(``ops.hyb.check_tiles``). CPU horizontal fusion then merges such nests' additions into one
output without atomics (``transform.horizontal_fusion``)."""

# -- Stage I iteration annotations ------------------------------------------------------------

FIRST_SLOTS_ANNOTATION = "sparsetir.first_slots"
"""Names of variables whose repeated (padding) slots store 0 (``lower.first_slots``)."""

# -- loop annotations -------------------------------------------------------------------------

PREFETCH_ANNOTATION = "sparsetir.prefetch_distance"
"""Prefetch the rows the loop gathers this many iterations ahead (``backend.prefetch``)."""

REALIGN_ANNOTATION = "sparsetir.realign_gathers"
"""Load the rows the loop gathers as whole cache lines when they start off one, shifted into
place in registers (``backend.realign_gathers``)."""


@dataclass(frozen=True)
class IndexCheck:
    """The index arrays of one axis, as the call checks them.

    ``indptr`` / ``indices`` are Stage I parameter names (``""`` when absent); ``nnz`` is what
    the row pointer ends at, ``bound`` the exclusive bound of the coordinates, ``width`` the
    fixed number of slots of an ELL row (0 for a variable row) and ``sorted`` whether rows
    must be sorted. Sizes are expressions over the function's parameters.
    """

    axis: str
    indptr: str
    indices: str
    nnz: object
    bound: object
    width: object
    sorted: bool


@dataclass(frozen=True)
class ValueDomain:
    """The values of parameter ``param`` (Stage I name) lie in ``[min, max)``."""

    param: str
    min: object
    max: object


def root_annotations(func: tirx.PrimFunc) -> dict:
    """The annotations of ``func``'s root block (empty without one)."""
    body = func.body
    if not isinstance(body, s_tir.SBlockRealize):
        return {}
    return dict(body.block.annotations or {})


def with_root_annotations(func: tirx.PrimFunc, annotations: dict) -> tirx.PrimFunc:
    """``func`` with ``annotations`` added to its root block's (``func`` must have one)."""
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        raise SparseTIRTypeError(f"function {func.attrs.get('global_symbol', '')} has no root block "
                        "to keep sparsetir's metadata in")
    root = realize.block
    merged = {**dict(root.annotations or {}), **annotations}
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, root.body,
                            root.init, root.alloc_buffers, root.match_buffers, merged)
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root))


def param_names(func: tirx.PrimFunc) -> dict:
    """Stage II parameter name -> Stage I name (empty for a function sparsetir did not lower)."""
    return _text_map(func, PARAM_NAMES_ATTR)


def tiled_layouts(func: tirx.PrimFunc) -> dict:
    """Stage II buffer name -> layout text, for each parameter stored in a tiled layout."""
    return _text_map(func, TILED_LAYOUTS_ATTR)


def _text_map(func: tirx.PrimFunc, key: str) -> dict:
    """The function attribute ``key`` (a map of names to text) as a dict of str; empty when
    absent."""
    attrs = func.attrs
    return {str(k): str(v) for k, v in (attrs.get(key, {}) if attrs else {}).items()}


def index_checks(func: tirx.PrimFunc) -> list:
    """The :class:`IndexCheck` of every axis with index arrays, sizes over ``func``'s params."""
    return [IndexCheck(str(e["axis"]), str(e["indptr"]), str(e["indices"]), e["nnz"],
                       e["bound"], e["width"], bool(e["sorted"]))
            for e in root_annotations(func).get(INDEX_CHECKS_KEY, [])]


def value_domains(func: tirx.PrimFunc) -> list:
    """The :class:`ValueDomain` of every parameter declared with ``T.assume_buffer_domain``."""
    return [ValueDomain(str(e["param"]), e["min"], e["max"])
            for e in root_annotations(func).get(VALUE_DOMAINS_KEY, [])]


def stage2_shapes(func: tirx.PrimFunc) -> dict:
    """Parameter name -> Stage II shape (a tuple), for the buffers ``lower_sparse_buffer``
    flattened."""
    recorded = root_annotations(func).get(STAGE2_SHAPES_KEY, {})
    return {str(name): tuple(shape) for name, shape in recorded.items()}


def metadata_annotations(checks: list, domains: list) -> dict:
    """The root-block annotations holding ``checks`` (:class:`IndexCheck`) and ``domains``
    (:class:`ValueDomain`), as ``lower_sparse_iter`` writes them."""
    return {INDEX_CHECKS_KEY: [{k: size(v) for k, v in vars(c).items()} for c in checks],
            VALUE_DOMAINS_KEY: [{k: size(v) for k, v in vars(d).items()} for d in domains]}


def shapes_annotation(shapes: dict) -> dict:
    """The root-block annotation recording ``shapes`` (parameter name -> Stage II shape), as
    ``lower_sparse_buffer`` writes it."""
    return {STAGE2_SHAPES_KEY: {name: [size(d) for d in shape] for name, shape in shapes.items()}}


def size(value):
    """``value`` as kept in an annotation: an ``int32`` constant as a Python int (TVMScript
    prints it as one and parses it back as one), any other value as it is."""
    if isinstance(value, tirx.IntImm) and str(value.ty.dtype) == "int32":
        return int(value.value)
    return value


def annotated_true(block, key: str) -> bool:
    """Whether ``block`` carries annotation ``key`` with a true value (``False`` or ``0`` opts
    out, as an absent key does).

    Example
    -------
    >>> import sparsetir, tvm
    >>> from sparsetir.ops.kernels import spmm
    >>> sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(spmm))
    >>> block = sch.get_sblock("spmm0")
    >>> annotated_true(sch.get(block), FUSE_ANNOTATION)
    False
    >>> sch.annotate(block, FUSE_ANNOTATION, True)
    >>> annotated_true(sch.get(block), FUSE_ANNOTATION)
    True
    >>> other = sch.get_sblock("spmm1")
    >>> sch.annotate(other, FUSE_ANNOTATION, 0)          # 0 opts out
    >>> annotated_true(sch.get(other), FUSE_ANNOTATION)
    False
    """
    value = block.annotations.get(key) if block.annotations else None
    return value is not None and bool(int(value) if hasattr(value, "value") else value)

