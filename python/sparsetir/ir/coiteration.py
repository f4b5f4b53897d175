"""Co-iteration: an index walked over the sorted coordinates of several sparse operands.

``T.coiterate(J, T.union(B, C))`` in a ``T.sp_iter`` iterates the *coordinates* of the dense
axis ``J`` that are stored in ``B`` or in ``C`` (``T.intersect``: in both), instead of every
coordinate of ``J``. The body reads and writes buffers at coordinates, exactly as it would over
the dense ``J`` (``A[i, j] = B[i, j] + C[i, j]``; an absent element reads 0). The operands of a
merge are the sparse buffers whose levels the index walks and the dense buffers it reads at the
same coordinate (a dense operand holds every coordinate, so a union with one is the whole axis).
The co-iterated axis itself may be an operand of its merge: every coordinate, as a term that
does not depend on the index adds (``T.coiterate(J, T.union(T.intersect(C, E), J))`` for
``C*E + 1``): the walk is whole, and the body is still computed as the merge says, a product of
``C``'s absent entry being no term at all (``C*E + 1`` is 1 there, even where ``E`` is NaN).
A sparse output written at a co-iterated coordinate is *assembled*: its index arrays are outputs
holding exactly the coordinates the merge visits (lowering: ``lower/coiterate/``).

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ir.axis import dense_fixed, sparse_variable
>>> from sparsetir.ir.buffer import SparseBuffer
>>> m, n, nnz = (tirx.Var(s, "int32") for s in ("m", "n", "nnz"))
>>> I, J = dense_fixed("I", m), dense_fixed("J", n)
>>> JB = sparse_variable("JB", I, n, nnz, tirx.Var("bp", "handle"), tirx.Var("bi", "handle"))
>>> B = SparseBuffer.create("B", [I, JB], "float64", handle=tirx.Var("b", "handle"))
>>> c = SparseBuffer.create("c", [J], "float64", handle=tirx.Var("c", "handle"))
>>> CoiteratedAxis(axis=J, merge=Merge(op="intersect", operands=[B, c])).script()
'T.coiterate(J, T.intersect(B, c))'
>>> CoiteratedAxis(axis=J, merge=Merge(op="union", operands=[B, J])).script()
'T.coiterate(J, T.union(B, J))'
"""

from __future__ import annotations

import tvm_ffi

from .axis import Axis
from .buffer import SparseBuffer
from .node import node
from ..errors import SparseTIRTypeError, SparseTIRValueError

MERGE_OPS = ("union", "intersect")


@node("sparsetir.Merge")
class Merge(tvm_ffi.Object):
    """``T.union(...)`` / ``T.intersect(...)`` of sparse buffers, nested merges and the
    co-iterated axis (every coordinate).

    Attributes
    ----------
    op : str
        ``"union"`` or ``"intersect"``.
    operands : list
        ``SparseBuffer``s, ``Merge``s and the co-iterated ``Axis``, at least one.
    """

    op: str
    operands: list

    def __post_init__(self):
        """Refuse an unknown operation, no operands, or an operand that is no buffer, merge or
        axis."""
        if self.op not in MERGE_OPS:
            raise SparseTIRValueError(f"merge: unknown operation {self.op!r}; expected one of "
                                      f"{', '.join(MERGE_OPS)}")
        if len(self.operands) == 0:
            raise SparseTIRValueError(f"T.{self.op}() needs at least one operand")
        for n, operand in enumerate(self.operands):
            if not isinstance(operand, (SparseBuffer, Merge, Axis)):
                raise SparseTIRTypeError(f"T.{self.op}: operand {n} is {type(operand).__name__}, "
                                         "not a sparse buffer, a merge or the co-iterated axis")

    @property
    def buffers(self) -> list:
        """The buffers of the merge, left to right, each once."""
        return self._leaves(SparseBuffer)

    @property
    def axes(self) -> list:
        """The axes among the operands, nested merges' included, each once."""
        return self._leaves(Axis)

    def _leaves(self, kind) -> list:
        found = []
        for operand in self.operands:
            for leaf in (operand._leaves(kind) if isinstance(operand, Merge) else [operand]):
                if isinstance(leaf, kind) and not any(leaf.same_as(b) for b in found):
                    found.append(leaf)
        return found

    def rebuilt(self, buffer_of, axis_of) -> "Merge":
        """This merge over the buffers ``buffer_of(buf)`` and the axes ``axis_of(axis)`` give
        (``ir/substitute.py``)."""
        return Merge(op=self.op, operands=[
            o.rebuilt(buffer_of, axis_of) if isinstance(o, Merge)
            else axis_of(o) if isinstance(o, Axis) else buffer_of(o) for o in self.operands])

    def script(self) -> str:
        """The TVMScript text, e.g. ``T.union(B, T.intersect(C, D))``."""
        inner = ", ".join(o.script() if isinstance(o, Merge) else o.name for o in self.operands)
        return f"T.{self.op}({inner})"


@node("sparsetir.CoiteratedAxis")
class CoiteratedAxis(tvm_ffi.Object):
    """``T.coiterate(J, merge)``: the coordinates of the dense axis ``J`` that ``merge`` holds.

    Attributes
    ----------
    axis : Axis
        A ``dense_fixed`` axis: the coordinate range of the index.
    merge : Merge
        Which operands' coordinates are visited.
    """

    axis: Axis
    merge: Merge

    def __post_init__(self):
        """Refuse an axis that is not dense_fixed (co-iteration walks coordinates, not rows),
        and a merge naming another axis."""
        if not isinstance(self.axis, Axis) or self.axis.kind != "dense_fixed":
            name = getattr(self.axis, "name", repr(self.axis))
            raise SparseTIRValueError(f"T.coiterate({name}, ...): the co-iterated axis must be a "
                                      "dense_fixed axis (the coordinate range of the index)")
        if not isinstance(self.merge, Merge):
            raise SparseTIRTypeError(f"T.coiterate({self.axis.name}, ...): expected T.union(...) or "
                                     f"T.intersect(...), got {type(self.merge).__name__}")
        for axis in self.merge.axes:
            if not axis.same_as(self.axis):
                raise SparseTIRValueError(
                    f"T.coiterate({self.axis.name}, {self.merge.script()}): the merge names axis "
                    f"{axis.name}; the only axis a merge may name is the co-iterated one (every "
                    "coordinate of it)")

    @property
    def name(self) -> str:
        """The co-iterated axis's name."""
        return self.axis.name

    def script(self) -> str:
        """The TVMScript text, e.g. ``T.coiterate(J, T.union(B, C))``."""
        return f"T.coiterate({self.axis.name}, {self.merge.script()})"
