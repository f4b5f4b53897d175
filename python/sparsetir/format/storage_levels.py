"""MLIR's storage scheme, level by level: building the arrays from entries, and reading them back.

``assemble`` turns entries (their level coordinates, sorted and unique, and values) into the
``positions``/``coordinates`` of every level and the ``values`` array; ``traverse`` walks stored
arrays from the root and gives every stored value's level coordinates, checking the arrays on
the way. Both are vectorised numpy: a level is one pass over its entries.

What each level stores, for ``P`` parent positions:

- ``dense`` (size ``s``): nothing; its positions are ``parent * s + coordinate`` (``P * s``);
- ``compressed``: ``positions`` (``P + 1``, a parent's children are ``positions[p]:positions[p+1]``)
  and ``coordinates`` (one per child); ``loose_compressed``: ``positions`` as ``(lo, hi)`` pairs
  (``2 * P``);
- ``compressed(nonunique)`` followed by ``singleton`` levels: one child per entry of the region
  (COO), the singletons storing one coordinate per parent position;
- ``structured[n, m]``: exactly ``n`` coordinates per parent (``P * n``), sorted; a group with
  fewer nonzeros is padded with the smallest unused coordinates (value 0); zeros never claim a
  slot.

Example
-------
>>> import numpy as np
>>> from sparsetir.format import Encoding
>>> lvl = np.array([[0, 0, 3, 3, 3], [0, 2, 2, 3, 5]])
>>> pos, crd, val = assemble(Encoding.named("CSR"), (4, 8), lvl, np.arange(1., 6.))
>>> pos[1].tolist(), crd[1].tolist(), val.tolist()
([0, 2, 2, 2, 5], [0, 2, 2, 3, 5], [1.0, 2.0, 3.0, 4.0, 5.0])
"""

from __future__ import annotations

import numpy as np

from ..errors import SparseTIRValueError

MAX_POSITIONS = 2**36


def coo_region_end(types, level: int) -> int:
    """The last level of the COO region starting at (loose) compressed ``level``: the
    singleton levels that follow it (all of them: a singleton is followed by singletons only)."""
    end = level
    while end + 1 < len(types) and types[end + 1].kind == "singleton":
        end += 1
    return end


def grow(parents: int, size: int, where: str) -> int:
    """``parents * size`` positions, refused past ``MAX_POSITIONS`` (arrays that large cannot be
    allocated, and their int64 positions would overflow)."""
    total = parents * size
    if total > MAX_POSITIONS:
        raise SparseTIRValueError(f"{where} needs {parents} x {size} = {total} positions, more "
                                  f"than 2**36: store a level this large as compressed, not dense")
    return total


def assemble(enc, lvl_shape, lvl_coords: np.ndarray, values: np.ndarray) -> tuple:
    """``(positions, coordinates, values)`` (lists per level, None where a level stores none)
    of entries at ``lvl_coords`` (int64 ``(lvl_rank, N)``, sorted lexicographically, unique)
    with ``values``; arrays in int64 (the widths are applied by the caller)."""
    types = enc.level_types
    positions, coordinates = [None] * len(types), [None] * len(types)
    pos, parents = np.zeros(lvl_coords.shape[1], np.int64), 1
    level = 0
    while level < len(types):
        kind, crd = types[level], lvl_coords[level]
        if kind.kind == "dense":
            parents = grow(parents, lvl_shape[level], f"level {level} ({kind})")
            pos = pos * lvl_shape[level] + crd
            level += 1
            continue
        if kind.kind == "structured":
            pos, parents, coordinates[level] = _structured(kind, pos, parents, crd)
            level += 1
            continue
        end = coo_region_end(types, level)
        new = np.ones(pos.size, bool)
        if pos.size:
            new[1:] = pos[1:] != pos[:-1]
            for inner, row in enumerate(lvl_coords[level:end + 1], level):
                if inner < end and types[inner].unique:
                    _unique_in_region(types, inner, pos, lvl_coords[level:inner + 1], new)
                new[1:] |= row[1:] != row[:-1]
        children = np.cumsum(new) - 1
        counts = np.bincount(pos[new], minlength=parents)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        positions[level] = np.stack([bounds[:-1], bounds[1:]], 1).ravel() \
            if kind.kind == "loose_compressed" else bounds
        for inner in range(level, end + 1):
            coordinates[inner] = lvl_coords[inner][new]
        pos, parents = children, int(bounds[-1])
        level = end + 1
    stored = np.zeros(parents, values.dtype)
    stored[pos] = values
    return positions, coordinates, stored


def _unique_in_region(types, level: int, pos, prefix, differs) -> None:
    """In a COO region, unique ``level`` holds each coordinate once per parent: entries that
    ``differ`` in nothing before it must differ in the ``prefix`` rows (through ``level``)."""
    same = ~differs[1:]
    for row in prefix:
        same &= row[1:] == row[:-1]
    if same.any():
        at = int(np.flatnonzero(same)[0]) + 1
        raise SparseTIRValueError(
            f"level {level} ({types[level]}) is unique, but the entries at level coordinates "
            f"{prefix[:, at].tolist()} (parent position {pos[at]}) repeat: each of its "
            "positions has one singleton child; use a nonunique level")


def _structured(kind, pos, parents: int, crd) -> tuple:
    """``(positions, parents, coordinates)`` of a ``structured[n, m]`` level."""
    counts = np.bincount(pos, minlength=parents)
    if counts.size and counts.max() > kind.n:
        group = int(np.argmax(counts > kind.n))
        raise SparseTIRValueError(
            f"{kind} stores at most {kind.n} nonzeros in each group of {kind.m}; group {group} "
            f"(in level order) has {counts[group]}")
    # each group fills its n slots with its nonzeros and its first free columns, which lie
    # below 2 n: a table of that width, not of m (structured[1, 2**32] allocated 8 GiB)
    width = min(kind.m, 2 * kind.n)
    low = crd < width
    used = np.zeros((parents, width), bool)
    used[pos[low], crd[low]] = True
    free_rank = np.cumsum(~used, axis=1)
    free_rows, free_cols = np.nonzero(~used & (free_rank <= (kind.n - counts)[:, None]))
    rows = np.concatenate([pos, free_rows])
    cols = np.concatenate([np.asarray(crd, np.int64), free_cols])
    order = np.lexsort((cols, rows))                  # slots in group order, columns rising
    slot = np.empty(pos.size, np.int64)
    is_nonzero = order < pos.size
    slot[order[is_nonzero]] = np.flatnonzero(is_nonzero) - rows[order[is_nonzero]] * kind.n
    return pos * kind.n + slot, parents * kind.n, cols[order]


def traverse(enc, lvl_shape, positions, coordinates, values_size: int, name: str) -> tuple:
    """``(lvl_coords, slots)``: the level coordinates (int64 ``(lvl_rank, K)``) of every value
    reachable from the root, and the index in ``values`` of each, in the order of the walk.
    The arrays are checked (a ``SparseTIRValueError`` naming ``name``'s level): first that each
    has exactly the length its parent level gives (a ``loose_compressed`` level's coordinates
    may hold unused room), from the lengths alone, before anything is allocated; then on the
    walk that positions rise, and coordinates are in range and ordered."""
    types = enc.level_types
    _check_lengths(enc, lvl_shape, positions, coordinates, values_size, name)
    slots, coords, space = np.zeros(1, np.int64), [], 1
    for level, kind in enumerate(types):
        where = f"{name} level {level} ({kind})"
        size = lvl_shape[level]
        if kind.kind == "dense":
            space = grow(space, size, where)
            parent = np.repeat(np.arange(slots.size), size)
            crd = np.tile(np.arange(size, dtype=np.int64), slots.size)
            slots = slots[parent] * size + crd
        else:
            crd_array = coordinates[level]
            if kind.kind == "singleton":
                parent = np.arange(slots.size)
            elif kind.kind == "structured":
                space = grow(space, kind.n, where)
                parent = np.repeat(np.arange(slots.size), kind.n)
                slots = (slots[:, None] * kind.n + np.arange(kind.n)).ravel()
                _sorted_groups(crd_array[slots].reshape(-1, kind.n), where)
            else:
                parent, slots = _children(kind, positions[level], slots, crd_array.size, where)
                space = crd_array.size
            crd = np.asarray(crd_array, np.int64)[slots]
            bad = np.flatnonzero((crd < 0) | (crd >= size))
            if bad.size:
                raise SparseTIRValueError(f"{where}: coordinate {crd[bad[0]]} is out of range "
                                          f"[0, {size})")
            _ordered(kind, parent, crd, where)
        coords = [column[parent] for column in coords] + [crd]
    if not types:
        return np.zeros((0, 1), np.int64), slots
    return np.stack(coords), slots


def _check_lengths(enc, lvl_shape, positions, coordinates, values_size: int, name: str) -> None:
    """Every array has the length its parent level gives, checked from the lengths alone
    (Python ints) before the walk allocates anything: a dense 2**31 x 2**31 tensor given 4
    values is refused for its values' length, not by a 2**62-element allocation."""
    space = 1
    for level, kind in enumerate(enc.level_types):
        where = f"{name} level {level} ({kind})"
        if kind.kind == "dense":
            space *= lvl_shape[level]
        elif kind.kind == "singleton":
            _length(coordinates[level].size, space, where, "coordinates",
                    "one per parent position")
        elif kind.kind == "structured":
            space *= kind.n
            _length(coordinates[level].size, space, where, "coordinates",
                    f"{kind.n} per parent position")
        else:
            loose = kind.kind == "loose_compressed"
            _length(positions[level].size, 2 * space if loose else space + 1, where,
                    "positions", "a (lo, hi) pair per parent position" if loose
                    else "one more than the parent positions")
            space = coordinates[level].size
    _length(values_size, space, f"{name} values", "values", "one per position of the last level")


def _length(size: int, expected: int, where: str, what: str, rule: str) -> None:
    """An array of ``size`` elements has exactly ``expected``."""
    if size != expected:
        raise SparseTIRValueError(f"{where}: {what} has {size} elements, expected {expected} "
                                  f"({rule})")


def _children(kind, positions, slots, crd_size: int, where: str) -> tuple:
    """``(parent, child slots)`` of a (loose) compressed level under parent ``slots``
    (``positions`` of the length ``_check_lengths`` checked)."""
    pos = np.asarray(positions, np.int64)
    if kind.kind == "loose_compressed":
        lo_hi = pos.reshape(-1, 2)
        lo, hi = lo_hi[slots, 0], lo_hi[slots, 1]
    else:
        if pos[0] != 0:
            raise SparseTIRValueError(f"{where}: positions[0] is {pos[0]}, expected 0")
        if (np.diff(pos) < 0).any():
            at = int(np.flatnonzero(np.diff(pos) < 0)[0])
            raise SparseTIRValueError(f"{where}: positions fall at parent {at} ({pos[at]} then "
                                      f"{pos[at + 1]})")
        _length(crd_size, int(pos[-1]), where, "coordinates", "positions[-1] of them")
        lo, hi = pos[slots], pos[slots + 1]
    if (hi < lo).any():
        first = int(np.flatnonzero(hi < lo)[0])
        raise SparseTIRValueError(f"{where}: positions fall at parent {slots[first]} "
                                  f"({lo[first]} then {hi[first]})")
    if hi.size and (lo.min() < 0 or hi.max() > crd_size):
        reach = int(hi.max()) if hi.max() > crd_size else int(lo.min())
        raise SparseTIRValueError(f"{where}: positions reach {reach}, outside the {crd_size} "
                                  "coordinates")
    if kind.kind == "loose_compressed":
        _disjoint(slots, lo, hi, where)
    counts = hi - lo
    parent = np.repeat(np.arange(slots.size), counts)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return parent, starts + np.arange(parent.size)


def _disjoint(slots, lo, hi, where: str) -> None:
    """A loose level's ``[lo, hi)`` segments share no coordinate: each stored value has one
    parent (an overlap would put one value in two places)."""
    used = np.flatnonzero(hi > lo)
    order = used[np.argsort(lo[used], kind="stable")]
    overlap = np.flatnonzero(lo[order][1:] < hi[order][:-1])
    if overlap.size:
        a, b = order[overlap[0]], order[overlap[0] + 1]
        raise SparseTIRValueError(f"{where}: the segments of parents {slots[a]} "
                                  f"[{lo[a]}, {hi[a]}) and {slots[b]} [{lo[b]}, {hi[b]}) "
                                  "overlap: a stored value belongs to one parent")


def _ordered(kind, parent, crd, where: str) -> None:
    """An ordered level's coordinates rise within each parent (strictly when unique)."""
    if not kind.ordered or crd.size < 2:
        return
    same = parent[1:] == parent[:-1]
    falls = same & ((crd[1:] <= crd[:-1]) if kind.unique else (crd[1:] < crd[:-1]))
    if falls.any():
        at = int(np.flatnonzero(falls)[0])
        what = "repeat" if crd[at] == crd[at + 1] else "fall"
        raise SparseTIRValueError(f"{where}: coordinates {what} ({crd[at]} then "
                                  f"{crd[at + 1]}) under one parent; the level is ordered"
                                  f"{' and unique' if kind.unique else ''}")


def _sorted_groups(groups, where: str) -> None:
    """A structured level's groups hold distinct rising coordinates."""
    if groups is not None and groups.shape[1] > 1 and (np.diff(groups, axis=1) <= 0).any():
        group = int(np.flatnonzero((np.diff(groups, axis=1) <= 0).any(axis=1))[0])
        raise SparseTIRValueError(f"{where}: group {group} has coordinates "
                                  f"{groups[group].tolist()}, expected distinct and rising")
