"""Condensed CSR for tensor cores: per row tile, the columns used, packed into groups."""

from __future__ import annotations

import numpy as np

from .checks import as_index, check_csr, check_size, count, index_array, index_type


def condense(indptr, indices, tile, group, num_cols=None, idtype=np.int32) -> tuple:
    """``(group_indptr, tile_indices, mask)``: the CSR matrix cut into tiles of ``tile`` rows,
    each tile's distinct columns (ascending) packed ``group`` at a time into dense
    ``tile x group`` blocks, as SparseTIR's ``condense``.

    * ``group_indptr`` (idtype, ``ceil(rows / tile) + 1``): row tile ``i`` owns groups
      ``group_indptr[i]:group_indptr[i + 1]`` (``ceil(distinct columns / group)`` of them;
      none for an empty tile).
    * ``tile_indices`` (idtype, ``(groups, group)``): the column of each slot of a group. The
      unused slots of a tile's last group repeat that group's last column (SparseTIR writes
      0 there); ``mask`` marks them out either way.
    * ``mask`` (int8, ``(groups, tile, group)``): ``mask[k, r, s]`` is 1 when row
      ``tile * i + r`` (``k`` a group of tile ``i``) has a nonzero in column
      ``tile_indices[k, s]``.

    The columns are checked to be non-negative and, when ``num_cols`` is given, below it;
    the other inputs, and the size of ``mask`` (under 2**40 elements), as
    ``sparsetir.format.checks`` says.

    Example
    -------
    >>> gi, ti, m = condense([0, 2, 3, 4], [1, 5, 5, 0], 2, 2)
    >>> gi.tolist(), ti.tolist()
    ([0, 1, 2], [[1, 5], [0, 0]])
    >>> m.tolist()
    [[[1, 1], [0, 1]], [[1, 0], [0, 0]]]
    """
    idtype = index_type(idtype)
    t = count("tile", tile, dimension=True)
    g = count("group", group, dimension=True)
    indptr, indices = index_array("indptr", indptr), index_array("indices", indices)
    if num_cols is None:
        num_cols = int(indices.max()) + 1 if indices.size else 0
    indptr, indices = check_csr(indptr, indices, (max(indptr.size - 1, 0), num_cols),
                                ("len(indptr) - 1", "num_cols"))
    rows = indptr.size - 1
    num_tiles = -(-rows // t)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    # the distinct (tile, column) pairs, sorted: pairs, not a product that may overflow
    tile_of = row_of // t
    order = np.lexsort((indices, tile_of))
    sorted_tile, sorted_col = tile_of[order], indices[order]
    new = np.ones(order.size, bool)
    new[1:] = (sorted_tile[1:] != sorted_tile[:-1]) | (sorted_col[1:] != sorted_col[:-1])
    entry_key = np.empty(order.size, np.int64)
    entry_key[order] = np.cumsum(new) - 1
    key_tile, key_col = sorted_tile[new], sorted_col[new]
    per_tile = np.bincount(key_tile, minlength=num_tiles)
    groups = -(-per_tile // g)
    group_indptr = np.concatenate([[0], np.cumsum(groups)])
    rank = np.arange(key_col.size) - (np.cumsum(per_tile) - per_tile)[key_tile]
    key_group = group_indptr[:-1][key_tile] + rank // g
    key_slot = rank % g
    num_groups = int(group_indptr[-1])
    check_size(f"tile = {t}, group = {g}: {num_groups} groups of tile x group",
               num_groups * t * g)
    per_group = np.bincount(key_group, minlength=num_groups)
    first = np.cumsum(per_group) - per_group
    src = first[:, None] + np.minimum(np.arange(g), per_group[:, None] - 1)
    mask = np.zeros((num_groups, t, g), np.int8)
    mask[key_group[entry_key], row_of % t, key_slot[entry_key]] = 1
    return (as_index(group_indptr, idtype, "the group count of indices"),
            as_index(key_col[src], idtype, "the column ids in indices"), mask)
