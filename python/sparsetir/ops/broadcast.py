"""DGL's broadcasting of node and edge features, reduced to the blocks a kernel iterates.

Two operands with trailing feature shapes ``(2, 4)`` and ``(2, 1)`` broadcast to ``(2, 4)``,
as numpy's rules say (a missing leading dimension counts as 1). A kernel needs less than the
shapes: consecutive dimensions where each operand is full or broadcast in the same way merge
into one block (dimensions of size 1 drop out), so the pair above is two blocks: one of size
2 that both have, one of size 4 that only the first has. Each operand then reads a block with
the block's index or not at all.

Example
-------
>>> plan = feature_blocks((2, 4), (2, 1))
>>> plan.shape, plan.sizes, plan.lhs_full, plan.rhs_full
((2, 4), (2, 4), (True, True), (True, False))
>>> feature_blocks((3, 5), (5,)).sizes                # (5,) counts as (1, 5)
(3, 5)
>>> feature_blocks((8,), (8,)).sizes                  # one block when nothing broadcasts
(8,)
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import SparseTIRValueError


class FeatureBlocks(NamedTuple):
    """The broadcast feature shape and its blocks (see the module docstring).

    ``sizes``: each block's length (their product is the broadcast shape's); ``lhs_full`` /
    ``rhs_full``: whether each operand has the block (False: it is broadcast over it).
    """
    shape: tuple
    sizes: tuple
    lhs_full: tuple
    rhs_full: tuple


def broadcast_shape(lhs: tuple, rhs: tuple, names=("lhs_data", "rhs_data")) -> tuple:
    """numpy's broadcast of two feature shapes; a pair that does not broadcast is an error
    naming both operands."""
    width = max(len(lhs), len(rhs))
    left = (1,) * (width - len(lhs)) + tuple(lhs)
    right = (1,) * (width - len(rhs)) + tuple(rhs)
    shape = []
    for a, b in zip(left, right):
        if a != b and 1 not in (a, b):
            raise SparseTIRValueError(
                f"the feature shapes of {names[0]} {tuple(lhs)} and {names[1]} {tuple(rhs)} do "
                "not broadcast (each trailing dimension must be equal or 1)")
        shape.append(b if a == 1 else a)      # 1 against 0 is 0, as in numpy
    return tuple(shape)


def feature_blocks(lhs: tuple, rhs: tuple, names=("lhs_data", "rhs_data")) -> FeatureBlocks:
    """The blocks of ``lhs`` and ``rhs`` broadcast together (``None`` for an absent operand,
    which counts as full wherever the other is)."""
    if lhs is None or rhs is None:
        shape = tuple(rhs if lhs is None else lhs)
        sizes = _merged([(size, True, True) for size in shape])
        return FeatureBlocks(shape, *sizes)
    shape = broadcast_shape(lhs, rhs, names)
    width = len(shape)
    left = (1,) * (width - len(lhs)) + tuple(lhs)
    right = (1,) * (width - len(rhs)) + tuple(rhs)
    dims = [(size, a == size, b == size) for size, a, b in zip(shape, left, right)
            if size != 1]
    return FeatureBlocks(shape, *_merged(dims))


def _merged(dims: list) -> tuple:
    """``(sizes, lhs_full, rhs_full)`` with neighbouring dimensions of one pattern merged."""
    blocks = []
    for size, left, right in dims:
        if blocks and blocks[-1][1:] == [left, right]:
            blocks[-1][0] *= size
        else:
            blocks.append([size, left, right])
    if not blocks:
        return (), (), ()
    sizes, lhs_full, rhs_full = zip(*blocks)
    return tuple(sizes), tuple(lhs_full), tuple(rhs_full)
