"""Merge lattices (TACO): which operands drive the loop over one co-iterated index, and its cases.

A merge (``T.union`` / ``T.intersect`` of buffers) is first *simplified* against the operands
that hold every coordinate of the index (a dense level, or an operand whose data is dense): such
an operand makes a union whole (the index is iterated densely) and drops out of an
intersection (it is read at the coordinate the others give), and so does the leaf ``FULL``,
the co-iterated axis named in its own merge for a term without the index (``B(i,j) + 1``:
``T.union(B, J)``). The *points* of the simplified
merge are the sets of sparse operands that can be walked together: ``B and C``, ``B``, ``C``
for a union, ``B and C`` for an intersection; the loop for a point runs while all of its
operands have coordinates left, and its cases are the points below it.

Example
-------
>>> lattice_points(("union", ["B", "C"]))
[('B', 'C'), ('B',), ('C',)]
>>> lattice_points(("union", [("intersect", ["B", "C"]), "D"]))
[('B', 'C', 'D'), ('B', 'C'), ('D',)]
>>> simplify(("union", ["B", FULL]), full=set()) == FULL
True
"""

from __future__ import annotations

FULL = "<full>"
"""The simplified merge of an index iterated densely (every coordinate); as a leaf of a merge,
the co-iterated axis itself (``T.union(B, J)``: a term without the index). No name of a buffer,
which is an identifier."""
EMPTY = "<empty>"
"""The simplified merge of an index with no coordinate (an intersection with an absent operand)."""


def simplify(tree, full: set, absent: set = frozenset()):
    """``tree`` (a leaf name or ``(op, [children])``) with the operands in ``full`` (every
    coordinate) and ``absent`` (no coordinate) folded away: ``FULL``, ``EMPTY``, a leaf or a
    smaller tree."""
    if isinstance(tree, str):
        return EMPTY if tree in absent else FULL if tree in full else tree
    op, children = tree
    kids = [simplify(c, full, absent) for c in children]
    if op == "union":
        if FULL in kids:
            return FULL
        kids = [k for k in kids if k != EMPTY]
        if not kids:
            return EMPTY
    else:
        if EMPTY in kids:
            return EMPTY
        kids = [k for k in kids if k != FULL]
        if not kids:
            return FULL
    return kids[0] if len(kids) == 1 else (op, kids)


def lattice_points(tree) -> list:
    """The lattice points of a simplified merge, largest first: tuples of operand names."""
    if tree in (FULL, EMPTY):
        return []
    if isinstance(tree, str):
        return [(tree,)]
    op, children = tree
    points = [()]
    for child in children:
        below = lattice_points(child)
        crossed = [_join(p, q) for p in points for q in below]
        points = crossed + (points + below if op == "union" and points != [()] else [])
    unique = []
    for point in points:
        if point not in unique:
            unique.append(point)
    return sorted(unique, key=len, reverse=True)


def point_count(tree) -> int:
    """How many points ``lattice_points(tree)`` lists at most, counted without listing them
    (a union of k operands has 2^k - 1).

    Example
    -------
    >>> point_count(("union", ["B", ("intersect", ["C", "D"])]))
    3
    """
    if tree in (FULL, EMPTY):
        return 0
    if isinstance(tree, str):
        return 1
    op, children = tree
    counts = [point_count(child) for child in children]
    product = 1
    for count in counts:
        product *= count + 1 if op == "union" else count
    return product - 1 if op == "union" else product


def sub_points(point: tuple, points: list) -> list:
    """The points of ``points`` whose operands all belong to ``point`` (its cases), largest first."""
    return [q for q in points if set(q) <= set(point)]


def leaves(tree) -> list:
    """The operand names of a merge tree, left to right."""
    if isinstance(tree, str):
        return [] if tree in (FULL, EMPTY) else [tree]
    return [name for child in tree[1] for name in leaves(child)]


def _join(p: tuple, q: tuple) -> tuple:
    return p + tuple(x for x in q if x not in p)
