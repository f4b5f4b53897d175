"""Seeded synthetic power-law graphs, for benchmarks at sizes the bundled graphs do not reach.

Rows and columns each follow a Zipf-like popularity law over ranks (rank ``k`` has the mass of
``[k, k + 1)`` under a density proportional to ``(x + x0) ** -beta``, ``beta = 1 / (exponent - 1)``,
so degrees have a power-law tail of ``exponent``), ranks given to nodes in random order. The
offset ``x0`` is the smallest that keeps every row and column below an eighth of the nodes. Edges
are (row, column) pairs drawn with the product of the two popularities (a Chung-Lu graph),
duplicates dropped and redrawn until exactly ``num_edges`` remain. A share of the rows
(``empty_fraction``) gets no edges, so some rows are empty. Vectorised: an ogbn-proteins sized
graph (40 M edges) takes about 10 s.

Example
-------
>>> from sparsetir.data import power_law_graph
>>> A = power_law_graph(169_343, 1_166_243, seed=0)     # ogbn-arxiv sized, under a second
>>> A.shape, A.nnz, A.indices.dtype, A.has_sorted_indices
((169343, 169343), 1166243, dtype('int32'), True)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from ..errors import SparseTIRValueError


class _RankLaw:
    """Probabilities over ranks ``0..n-1`` from the density ``(x + x0) ** -beta`` on ``[0, n)``."""

    def __init__(self, n: int, beta: float, cap: float):
        self.n, self.power = n, 1.0 - beta
        low, high = 0.0, float(n) * 1e6  # the largest probability falls as x0 grows
        for _ in range(200):
            self.x0 = (low + high) / 2
            if self.cdf(1.0) > cap:
                low = self.x0
            else:
                high = self.x0
        self.x0 = high

    def _g(self, x):
        return (np.asarray(x, np.float64) + self.x0) ** self.power

    def cdf(self, x):
        """Probability of ``[0, x)``."""
        return (self._g(x) - self._g(0.0)) / (self._g(self.n) - self._g(0.0))

    def probabilities(self) -> np.ndarray:
        """The mass of each rank."""
        return np.diff(self.cdf(np.arange(self.n + 1)))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` ranks drawn independently (inverse transform of uniforms)."""
        g0, gn = self._g(0.0), self._g(self.n)
        x = (g0 + rng.random(size) * (gn - g0)) ** (1.0 / self.power) - self.x0
        return np.minimum(x.astype(np.int64), self.n - 1)  # rounding can reach n


def power_law_graph(num_nodes: int, num_edges: int, seed: int = 0, exponent: float = 2.1,
                    empty_fraction: float = 0.02) -> scipy.sparse.csr_matrix:
    """A directed ``num_nodes`` x ``num_nodes`` graph with ``num_edges`` distinct edges.

    Returned like :func:`sparsetir.data.load_graph`: float32 CSR, every value 1, int32 ``indptr``
    and ``indices``, indices sorted within each row, no duplicate entries. ``exponent`` (above 2)
    is the tail exponent of the row and column degree distributions: smaller is more skewed. The
    same arguments give the same graph.
    """
    n, target = int(num_nodes), int(num_edges)
    if not 0 < target <= n * n // 8:
        raise SparseTIRValueError(f"num_edges must be in 1..{n * n // 8} for {n} nodes, not {target}")
    if exponent <= 2.0:
        raise SparseTIRValueError(f"exponent must be above 2, not {exponent}")
    if not 0.0 <= empty_fraction < 1.0:
        raise SparseTIRValueError(f"empty_fraction must be in [0, 1), not {empty_fraction}")
    rng = np.random.default_rng(seed)
    law = _RankLaw(n, 1.0 / (exponent - 1.0), cap=n / 8 / target)
    row_p = law.probabilities()[rng.permutation(n)]
    row_p[rng.random(n) < empty_fraction] = 0.0
    row_p /= row_p.sum()
    col_of_rank = rng.permutation(n).astype(np.int64)

    keys = np.empty(0, np.int64)  # row * n + column, sorted and distinct
    while len(keys) < target:
        draw = int((target - len(keys)) * 1.05) + 1024
        rows = np.repeat(np.arange(n, dtype=np.int64), rng.multinomial(draw, row_p))
        new = np.sort(rows * n + col_of_rank[law.sample(rng, draw)])
        new = new[np.concatenate([[True], new[1:] != new[:-1]])]
        if len(keys):
            pos = np.minimum(np.searchsorted(keys, new), len(keys) - 1)
            new = new[keys[pos] != new]
        keys = np.sort(np.concatenate([keys, new]), kind="stable")  # merges two sorted runs
    keys = np.delete(keys, rng.choice(len(keys), len(keys) - target, replace=False))

    rows, cols = np.divmod(keys, n)
    indptr = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    data = np.ones(target, np.float32)
    return scipy.sparse.csr_matrix((data, cols.astype(np.int32), indptr), shape=(n, n))
