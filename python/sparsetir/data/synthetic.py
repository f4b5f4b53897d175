"""Seeded synthetic graphs, for benchmarks at sizes the bundled graphs do not reach: power-law
graphs (:func:`power_law_graph`) and R-MAT graphs (:func:`rmat_graph`).

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
>>> from sparsetir.data import rmat_graph
>>> rmat_graph(169_343, 1_166_243, seed=0).nnz        # Graph500's R-MAT, same size
1166243
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


STALLED_BATCHES = 3
"""Batches in a row that add under 1% of the missing edges before ``_distinct_edges`` gives up."""


def _distinct_edges(draw, n: int, target: int, rng) -> np.ndarray:
    """``target`` distinct keys ``row * n + column``, sorted, from batches ``draw(count)`` of
    keys (duplicates and keys already drawn are dropped, batches drawn until enough remain;
    the surplus is removed at random). Raises when ``STALLED_BATCHES`` batches in a row add
    almost nothing: the distribution cannot give that many distinct edges in reasonable time."""
    keys = np.empty(0, np.int64)  # sorted and distinct
    stalled = 0
    while len(keys) < target:
        missing = target - len(keys)
        new = np.unique(draw(int(missing * 1.05) + 1024))
        if len(keys) and new.size:
            pos = np.minimum(np.searchsorted(keys, new), len(keys) - 1)
            new = new[keys[pos] != new]
        stalled = stalled + 1 if new.size < max(1, missing // 100) else 0
        if stalled == STALLED_BATCHES:
            raise SparseTIRValueError(
                f"these probabilities give {len(keys)} distinct edges of the {target} asked for "
                f"{n} nodes, and almost no new ones: ask for fewer edges or spread the "
                "probabilities")
        keys = np.sort(np.concatenate([keys, new]), kind="stable")  # merges two sorted runs
    return np.delete(keys, rng.choice(len(keys), len(keys) - target, replace=False))


def _count(name: str, value, least: int) -> int:
    """``value`` as an int of at least ``least``, or a ``SparseTIRValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise SparseTIRValueError(f"{name} must be an integer of at least {least}, "
                                  f"got {value!r}")
    return int(value)


def _csr_of_keys(keys: np.ndarray, n: int) -> scipy.sparse.csr_matrix:
    """The n x n float32 CSR matrix (values 1, int32 indices) of sorted distinct ``keys``."""
    rows, cols = np.divmod(keys, n)
    indptr = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    data = np.ones(keys.size, np.float32)
    return scipy.sparse.csr_matrix((data, cols.astype(np.int32), indptr), shape=(n, n))


GRAPH500_RMAT = (0.57, 0.19, 0.19)
"""Graph500's R-MAT quadrant probabilities ``(a, b, c)``; ``d = 1 - a - b - c``."""


def rmat_graph(num_nodes: int, num_edges: int, seed: int = 0,
               probabilities: tuple = GRAPH500_RMAT) -> scipy.sparse.csr_matrix:
    """A directed R-MAT graph (Chakrabarti et al., as Graph500 generates it) with ``num_nodes``
    nodes and ``num_edges`` distinct edges, no self-loops, node ids randomly permuted.

    Each edge picks one quadrant of the adjacency matrix per bit of ``2**ceil(log2(num_nodes))``
    with ``probabilities`` ``(a, b, c)`` for top-left, top-right, bottom-left (``d`` the rest);
    edges landing outside ``num_nodes`` or on the diagonal are drawn again, as are duplicates.
    Degrees are skewed in both rows and columns, and the dense corner gives the graph a
    community structure a Chung-Lu graph lacks. Returned as :func:`power_law_graph` returns.
    The same arguments give the same graph.
    """
    n, target = _count("num_nodes", num_nodes, 3), _count("num_edges", num_edges, 1)
    if target > n * n // 8:
        raise SparseTIRValueError(f"num_edges must be at most {n * n // 8} (an eighth of all "
                                  f"pairs) for {n} nodes, not {target}")
    a, b, c = (float(p) for p in probabilities)
    if not (np.isfinite([a, b, c]).all() and min(a, b, c) >= 0 and a + b + c <= 1) \
            or b + c == 0:
        raise SparseTIRValueError(f"probabilities (a, b, c) must be finite, non-negative, with "
                                  f"a sum of at most 1 and b + c above 0 (else every edge is "
                                  f"on the diagonal), not {probabilities}")
    rng = np.random.default_rng(seed)
    scale = max(1, int(np.ceil(np.log2(n))))
    label = rng.permutation(n).astype(np.int64)

    def draw(count: int) -> np.ndarray:
        rows = np.zeros(count, np.int64)
        cols = np.zeros(count, np.int64)
        for _ in range(scale):
            u = rng.random(count)
            right = ((u >= a) & (u < a + b)) | (u >= a + b + c)
            down = u >= a + b
            rows = 2 * rows + down
            cols = 2 * cols + right
        kept = (rows < n) & (cols < n) & (rows != cols)
        return label[rows[kept]] * n + label[cols[kept]]
    return _csr_of_keys(_distinct_edges(draw, n, target, rng), n)


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

    def draw(count: int) -> np.ndarray:
        rows = np.repeat(np.arange(n, dtype=np.int64), rng.multinomial(count, row_p))
        return rows * n + col_of_rank[law.sample(rng, count)]
    return _csr_of_keys(_distinct_edges(draw, n, target, rng), n)
