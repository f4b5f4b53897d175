"""Stage I declarations from an MLIR encoding: the axes and buffer of a matrix stored as MLIR does.

``declare(enc)`` turns a 2-D :class:`~sparsetir.format.Encoding` into the TVMScript a kernel
writer would type for that format: one axis per level, in level order, over the arrays of
MLIR's storage (``positions(l)`` is the ``indptr`` and ``coordinates(l)`` the ``indices`` of
level ``l``'s axis), the buffer of the values over those axes, and each dimension's coordinate
as an expression of the level variables. ``encoded_spmm`` (``declare_spmm.py``) builds a
kernel from these pieces.

=========================================  =================================================
level                                      Stage I
=========================================  =================================================
``dense`` (``d``, ``d floordiv b``,        ``T.dense_fixed(size)``: ``m``, ``n``, the block
``d mod b``)                               counts ``mb``, ``nb``, or ``b``
``compressed``                             ``T.sparse_variable(parent, (size, nnz), (pos,
                                           crd))``, ``sorted=False`` when nonunique or
                                           nonordered; as the outermost level its parent is
                                           a one-position root axis ``R``
``singleton``                              ``T.sparse_fixed(parent, (size, 1), crd)``
``structured[n, m]`` (innermost)           ``T.dense_fixed(n)`` slots, and the in-block
                                           coordinates as a buffer over the levels
                                           (``A_crd``, dtype from ``crdWidth``) with
                                           ``T.assume_buffer_domain(A_crd, (0, m))``
=========================================  =================================================

That covers the dense matrix, CSR, CSC, DCSR, DCSC, COO, BSR and BSC (either order inside a
block) and n:m (2:4). A Stage I axis with a parent follows the positions of one chain of axes,
so a compressed or singleton level may have dense levels above it only at level 0 (a
``compressed`` level under two dense levels has no axis). ``loose_compressed`` levels, slices and
symbol maps have none either: ``declare`` refuses them, naming the level; convert the tensor
(``SparseTensor.convert``) to one of the formats above.

Axes compute with ``int64`` indices when an index array the format stores has a width of 64 or
native (0), else with ``int32``; narrower positions and coordinates are declared in their width
(``indptr_dtype="int16"``, ``indices_dtype="int8"``: lowering reads them as such and widens each
value, and the call refuses arrays of another dtype or too narrow for the matrix).

Example
-------
>>> decl = declare(Encoding.named("CSR"))
>>> print("\\n".join(decl.lines))
I = T.dense_fixed(m, "int64")
J = T.sparse_variable(I, (n, nnz), (a_pos1, a_crd1), "int64")
A = T.match_sparse_buffer(a, (I, J), "float32")
>>> decl.coordinates, decl.access
(('i', 'j'), 'A[i, j]')
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .encoding import Encoding

__all__ = ["EncodedDeclaration", "declare"]

_DIM_NAMES = ("I", "J")
_DIM_SIZES = ("m", "n")
_BLOCK_COUNTS = ("mb", "nb")


@dataclasses.dataclass(frozen=True)
class LevelAxis:
    """One level's axis: its name, iteration variable, dimension (None for the root axis),
    level kind, Stage I declaration, arrays, and block factor and operation (``d floordiv
    b``: ``"floordiv"``; ``d mod b``: ``"mod"``; ``d``: ``"id"``)."""

    name: str
    var: str
    dim: int | None
    kind: str
    line: str
    pos: str | None = None          # handle of the positions (indptr)
    crd: str | None = None          # handle of the coordinates (indices or A_crd's values)
    factor: int = 1
    op: str = "id"


@dataclasses.dataclass(frozen=True)
class EncodedDeclaration:
    """The Stage I pieces of a buffer stored in ``encoding`` (see the module docstring).

    ``lines``: the declarations (axes, buffers, domains) in order; ``handles`` / ``scalars``:
    the parameters they use, in order (the buffer's own handle first); ``axes`` / ``vars``: the
    level axes (the root ``R`` first, when there is one) and their iteration variables, in
    level order; ``kinds``: ``"S"`` for the root and a level of dimension 0, ``"R"`` for
    dimension 1 (a matrix product's spatial and reduction levels);
    ``coordinates``: each dimension's coordinate as an expression of the variables;
    ``access``: the buffer read at the variables.
    """

    encoding: Encoding
    idtype: str
    lines: tuple
    handles: tuple
    scalars: tuple
    axes: tuple
    vars: tuple
    kinds: str
    coordinates: tuple
    access: str
    levels: tuple

    def arguments(self, tensor) -> dict:
        """Parameter name -> value for :attr:`handles` and :attr:`scalars`, from ``tensor`` (a
        ``SparseTensor`` in this encoding): its values, each level's positions and coordinates
        (the tensor's private storage, ``SparseTensor.storage``, bound without a copy:
        numpy will not make them writable; do not write them through ``torch.from_numpy`` or
        a pointer, which would change the tensor under what was computed from it) and the
        sizes."""
        if getattr(tensor, "encoding", None) != self.encoding:
            raise SparseTIRValueError(
                f"tensor must be a SparseTensor in {self.encoding}, got "
                f"{getattr(tensor, 'encoding', type(tensor).__name__)}")
        positions, coordinates, values = tensor.storage()
        arrays = {self.handles[0]: values}
        levels = [axis for axis in self.levels if axis.dim is not None]    # not the root
        for number, level in enumerate(levels):
            if level.pos is not None:
                arrays[level.pos] = positions[number]
            if level.crd is not None:
                arrays[level.crd] = coordinates[number]
        return {**arrays, **_sizes(self.encoding, tensor, coordinates)}


def declare(encoding, name: str = "A", dtype: str = "float32") -> EncodedDeclaration:
    """The Stage I declarations of a matrix buffer ``name`` (handle ``name.lower()``) of
    ``dtype`` stored in ``encoding`` (an :class:`Encoding`, or what ``Encoding.named`` takes)."""
    enc = Encoding.named(encoding)
    if not isinstance(name, str) or not name.isidentifier() or not name[0].isupper():
        raise SparseTIRValueError(f"name must be a capitalised identifier, got {name!r}")
    if not isinstance(dtype, str):
        raise SparseTIRTypeError(f"dtype must be a dtype name, got {dtype!r}")
    _check_supported(enc)
    idtype = _idtype(enc)
    handle = name.lower()
    levels = _level_axes(enc, handle, idtype)
    lines = [level.line for level in levels]
    buffer_axes = ", ".join(level.name for level in levels)
    lines.append(f'{name} = T.match_sparse_buffer({handle}, ({buffer_axes}), "{dtype}")')
    at = ", ".join(level.var for level in levels)
    for level in levels:
        if level.kind == "structured":
            lines.append(f'{name}_crd = T.match_sparse_buffer({level.crd}, ({buffer_axes}), '
                         f'"{enc.crd_dtype}")')
            lines.append(f"T.assume_buffer_domain({name}_crd, (0, {enc.levels[-1].type.m}))")
    handles = (handle,) + tuple(h for level in levels for h in (level.pos, level.crd)
                                if h is not None)
    return EncodedDeclaration(
        encoding=enc, idtype=idtype, lines=tuple(lines), handles=handles,
        scalars=_scalars(enc), axes=tuple(level.name for level in levels),
        vars=tuple(level.var for level in levels),
        kinds="".join("R" if level.dim == 1 else "S" for level in levels),
        coordinates=tuple(_coordinate(levels, d, f"{name}_crd[{at}]", idtype)
                          for d in range(2)),
        access=f"{name}[{at}]", levels=tuple(levels))


def _check_supported(enc: Encoding):
    """Refuse what Stage I axes cannot state, naming the level."""
    if enc.dim_rank != 2:
        raise SparseTIRValueError(f"declare takes a matrix (2 dimensions); {enc} has "
                                  f"{enc.dim_rank}")
    if enc.symbols or any(s is not None for s in (enc.slices or ())):
        raise SparseTIRValueError(f"{enc}: slices and symbols are storage only (no kernel "
                                  "declares them); convert the tensor first")
    for number, level in enumerate(enc.levels):
        kind = level.type.kind
        problem = None
        if level.op == "expr":
            problem = f"its expression {level.expr} is not d, d floordiv b or d mod b"
        elif kind not in ("dense", "compressed", "singleton", "structured"):
            problem = f"{level.type} levels have no Stage I axis (storage only)"
        elif kind in ("compressed", "singleton") and any(
                lv.type.kind == "dense" for lv in enc.levels[1:number]):
            problem = ("its parent chain is broken by a dense level between it and level 0 "
                       "(a Stage I axis with a parent follows the positions of one chain)")
        if problem:
            raise SparseTIRValueError(f"level {number} ({level.expr} : {level.type}) of {enc}: "
                                      f"{problem}; convert the tensor to a format with a kernel")


def _idtype(enc: Encoding) -> str:
    """``int64`` when an index array the format stores is 64-bit (or native), else ``int32``."""
    kinds = {level.type.kind for level in enc.levels}
    stored = set()
    if "compressed" in kinds:
        stored.add(np.dtype(enc.pos_dtype))
    if kinds & {"compressed", "singleton", "structured"}:
        stored.add(np.dtype(enc.crd_dtype))
    return "int64" if np.dtype(np.int64) in stored else "int32"


def _level_axes(enc: Encoding, handle: str, idtype: str) -> list:
    """One :class:`LevelAxis` per level of ``enc``, under a one-position root axis ``R`` when
    the outermost level is compressed (a Stage I axis with positions needs a parent)."""
    axes = []
    suffix = "" if idtype == "int32" else f', "{idtype}"'
    if enc.levels[0].type.kind == "compressed":
        axes.append(LevelAxis("R", "r", None, "dense", f"R = T.dense_fixed({literal(1, idtype)}"
                                                       f"{suffix})"))
    compressed = [n for n, lv in enumerate(enc.levels) if lv.type.kind == "compressed"]
    pos_width = _storage("indptr", enc.pos_dtype, idtype)
    crd_width = _storage("indices", enc.crd_dtype, idtype)
    for number, level in enumerate(enc.levels):
        name = _DIM_NAMES[level.dim] + {"id": "", "floordiv": "O", "mod": "I"}[level.op]
        size = _level_size(level)
        kind = level.type.kind
        flag = "" if level.type.unique and level.type.ordered else ", sorted=False"
        parent = axes[-1].name if axes else None
        pos = crd = None
        if kind == "compressed":
            pos, crd = f"{handle}_pos{number}", f"{handle}_crd{number}"
            nnz = "nnz" if len(compressed) == 1 else f"nnz{number}"
            line = (f"{name} = T.sparse_variable({parent}, ({size}, {nnz}), ({pos}, {crd}), "
                    f'"{idtype}"{flag}{pos_width}{crd_width})')
        elif kind == "singleton":
            crd = f"{handle}_crd{number}"
            line = (f'{name} = T.sparse_fixed({parent}, ({size}, 1), {crd}, "{idtype}"{flag}'
                    f"{crd_width})")
        elif kind == "structured":
            crd = f"{handle}_crd{number}"
            line = f"{name} = T.dense_fixed({level.type.n}{suffix})"
        else:
            line = f"{name} = T.dense_fixed({size}{suffix})"
        axes.append(LevelAxis(name, name.lower(), level.dim, kind, line, pos, crd, level.factor,
                              level.op))
    return axes


def _storage(role: str, dtype, idtype: str) -> str:
    """The keyword declaring an axis's ``role`` array stored in ``dtype`` (none for
    ``idtype``)."""
    return "" if str(dtype) == idtype else f', {role}_dtype="{dtype}"'


def _level_size(level) -> str:
    if level.op == "id":
        return _DIM_SIZES[level.dim]
    if level.op == "floordiv":
        return _BLOCK_COUNTS[level.dim]
    return str(level.factor)


def _coordinate(levels, dim: int, crd_access: str, idtype: str) -> str:
    """Dimension ``dim``'s coordinate: a level variable, or ``outer * b + inner`` of a block
    (the inner one read from the coordinate buffer for a structured level)."""
    outer = inner = None
    for axis in levels:
        if axis.dim != dim:
            continue
        if axis.op == "floordiv":
            outer = f"{axis.var} * {literal(axis.factor, idtype)}"
        elif axis.kind == "structured":
            inner = f'T.Cast("{idtype}", {crd_access})'
        else:
            inner = axis.var
    return inner if outer is None else f"{outer} + {inner}"


def literal(value: int, idtype: str) -> str:
    """An integer constant of ``idtype`` in TVMScript (``T.int64(2)``: TVM does not widen
    an ``int32`` literal in ``int64`` arithmetic)."""
    return str(value) if idtype == "int32" else f"T.{idtype}({value})"


def _scalars(enc: Encoding) -> tuple:
    names = list(_DIM_SIZES)
    compressed = [n for n, lv in enumerate(enc.levels) if lv.type.kind == "compressed"]
    for level in enc.levels:
        if level.op == "floordiv":
            names.append(_BLOCK_COUNTS[level.dim])
    names += ["nnz"] if len(compressed) == 1 else [f"nnz{n}" for n in compressed]
    return tuple(names)


def _sizes(enc: Encoding, tensor, coordinates: list) -> dict:
    """The value of every scalar :func:`_scalars` names, for ``tensor`` (its levels'
    ``coordinates``)."""
    sizes = {"m": int(tensor.dim_shape[0]), "n": int(tensor.dim_shape[1])}
    compressed = [n for n, lv in enumerate(enc.levels) if lv.type.kind == "compressed"]
    for number, (level, extent) in enumerate(zip(enc.levels, tensor.lvl_shape)):
        if level.op == "floordiv":
            sizes[_BLOCK_COUNTS[level.dim]] = int(extent)
        if number in compressed:
            nnz = "nnz" if len(compressed) == 1 else f"nnz{number}"
            sizes[nnz] = len(coordinates[number])
    return sizes
