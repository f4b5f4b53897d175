"""Graphs for the GPU runner, with numpy alone: the bundled real graphs and seeded synthetic ones.

A graph is a square CSR pattern (int32 ``indptr``/``indices``, columns sorted in each row, no
duplicates). Synthetic graphs are Chung-Lu graphs with power-law expected degrees, symmetrised,
self-loops removed, made from a seed derived from the name, so every machine builds the same
pattern (numpy keeps ``Generator`` streams stable across versions; the runner's CSV records
``nnz``, which would show a difference).

Example
-------
>>> g = load("cora", "data")                     # doctest: +SKIP
>>> g.rows, g.nnz
(2708, 10556)
>>> g = load("synthetic-arxiv", "data")          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path

import numpy as np

# name -> (rows, sampled edges before symmetrising, power-law exponent of the degrees)
SYNTHETIC = {
    "synthetic-arxiv": (169_343, 600_000, 2.1),         # ogbn-arxiv's node count, 1.0M nonzeros
    "synthetic-proteins": (132_534, 20_000_000, 2.5),  # ogbn-proteins' scale, 37.6M nonzeros
}


@dataclasses.dataclass(frozen=True)
class Graph:
    """A square sparse pattern in CSR form."""

    name: str
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator seeded by the graph's name and ``purpose`` (same values everywhere)."""
        return np.random.default_rng(zlib.crc32(f"{self.name}/{purpose}".encode()))


def load(name: str, data_dir) -> Graph:
    """Graph ``name``: a bundled ``<data_dir>/<name>.npz`` or one of :data:`SYNTHETIC`."""
    if name in SYNTHETIC:
        return chung_lu(name, *SYNTHETIC[name])
    path = Path(data_dir) / f"{name}.npz"
    if not path.exists():
        raise KeyError(f"no graph {name!r}: neither {path} nor one of {sorted(SYNTHETIC)}")
    with np.load(path) as z:
        return Graph(name, z["indptr"].astype(np.int32), z["indices"].astype(np.int32))


def bundled(data_dir) -> list:
    """Names of the graphs stored in ``data_dir``, sorted."""
    return sorted(path.stem for path in Path(data_dir).glob("*.npz"))


def chung_lu(name: str, rows: int, edges: int, exponent: float) -> Graph:
    """A symmetric Chung-Lu graph: ``edges`` endpoint pairs drawn with power-law weights.

    Example
    -------
    >>> g = chung_lu("tiny", 100, 300, 2.1)
    >>> (g.indices[g.indptr[0]:g.indptr[1]] != 0).all()      # no self-loop
    True
    """
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    weights = np.arange(1, rows + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0))
    cumulative = np.cumsum(weights / weights.sum())
    src = np.searchsorted(cumulative, rng.random(edges), side="right").clip(max=rows - 1)
    dst = np.searchsorted(cumulative, rng.random(edges), side="right").clip(max=rows - 1)
    relabel = rng.permutation(rows)                   # spread hubs over the rows
    src, dst = relabel[src], relabel[dst]
    keep = src != dst
    keys = np.concatenate([src[keep] * rows + dst[keep], dst[keep] * rows + src[keep]])
    keys.sort()                                       # by row, then column (np.unique is slower)
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    row, col = keys // rows, keys % rows
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=rows), out=indptr[1:])
    return Graph(name, indptr.astype(np.int32), col.astype(np.int32))
