"""Condensed CSR for tensor cores: per row tile, the columns used, packed into groups."""

from __future__ import annotations

import numpy as np

from .checks import check_csr
from .ell import _check_positive


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

    The columns are checked to be non-negative and, when ``num_cols`` is given, below it.

    Example
    -------
    >>> gi, ti, m = condense([0, 2, 3, 4], [1, 5, 5, 0], 2, 2)
    >>> gi.tolist(), ti.tolist()
    ([0, 1, 2], [[1, 5], [0, 0]])
    >>> m.tolist()
    [[[1, 1], [0, 1]], [[1, 0], [0, 0]]]
    """
    t = _check_positive("tile", tile)
    g = _check_positive("group", group)
    indptr, indices = np.asarray(indptr), np.asarray(indices)
    rows = indptr.size - 1
    if num_cols is None:
        num_cols = int(indices.max()) + 1 if indices.size else 0
    indptr, indices = check_csr(indptr, indices, (rows, num_cols))
    num_tiles = -(-rows // t)
    width = max(int(num_cols), 1)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    keys, entry_key = np.unique((row_of // t) * width + indices, return_inverse=True)
    key_tile, key_col = keys // width, keys % width
    per_tile = np.bincount(key_tile, minlength=num_tiles)
    groups = -(-per_tile // g)
    group_indptr = np.concatenate([[0], np.cumsum(groups)])
    rank = np.arange(keys.size) - (np.cumsum(per_tile) - per_tile)[key_tile]
    key_group = group_indptr[:-1][key_tile] + rank // g
    key_slot = rank % g
    num_groups = int(group_indptr[-1])
    per_group = np.bincount(key_group, minlength=num_groups)
    first = np.cumsum(per_group) - per_group
    src = first[:, None] + np.minimum(np.arange(g), per_group[:, None] - 1)
    mask = np.zeros((num_groups, t, g), np.int8)
    mask[key_group[entry_key], row_of % t, key_slot[entry_key]] = 1
    return group_indptr.astype(idtype), key_col[src].astype(idtype), mask
