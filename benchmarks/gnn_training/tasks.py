"""The GNN benchmark's inputs: graphs, and the seeded features, labels and relations on them.

Graphs: the bundled cora, citeseer and pubmed, and ``synthetic-arxiv`` (``graphs.py``'s seeded
power-law graph of ogbn-arxiv's size). Each is made symmetric (``A | A.T``, as DGL and PyG
users do with citation graphs) with its self-loops removed, in CSR with sorted columns; the
models that want self-loops (GCN, GAT) get ``A + I``. ``prepare`` does this once in the
harness's process and writes the result to the run's cache folder; ``load`` reads it back in a
worker.

None of these graphs comes with features or labels here, so every ``Task`` has synthetic ones,
from a seed: standard normal features at the dataset's published width (cora 1433, citeseer
3703, pubmed 500, ogbn-arxiv 128), uniform labels over its published class count (7, 6, 3, 40),
and, for RGCN, a relation per edge drawn uniformly from ``NUM_RELATIONS`` (a synthetic
relational graph on the same edges), with each edge's normaliser ``1 / |N_r(v)|`` (the number
of ``v``'s in-edges with the edge's relation ``r``: RGCN's mean per relation).

Convention (DGL's, and sparsetir's): row ``v`` of the CSR matrix lists the sources ``u`` of the
edges into ``v``; edge ``e`` is the ``e``-th stored entry, so edge data are in CSR order.

Example
-------
>>> A = prepare("cora", cache)            # symmetric, no self-loops; written to cache
>>> task = make_task("cora", load("cora", cache), self_loops=True)
>>> task.features.shape, task.num_classes, task.adjacency.nnz
((2708, 1433), 7, 13264)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse

# Published feature width and class count of each dataset; synthetic-arxiv has ogbn-arxiv's.
DATASETS = {"cora": (1433, 7), "citeseer": (3703, 6), "pubmed": (500, 3),
            "synthetic-arxiv": (128, 40)}
NUM_RELATIONS = 6
SEED = 0


def labels() -> list:
    """Every graph the GNN benchmark knows, smallest first."""
    return list(DATASETS)


def symmetric_without_loops(A: scipy.sparse.spmatrix) -> scipy.sparse.csr_matrix:
    """The pattern of ``A | A.T`` without its diagonal: float32 ones, int32 sorted CSR."""
    pattern = (abs(A) + abs(A.T)).tocsr()
    pattern.setdiag(0)
    pattern.eliminate_zeros()
    pattern.sum_duplicates()
    pattern.sort_indices()
    out = scipy.sparse.csr_matrix((np.ones(pattern.nnz, np.float32),
                                   pattern.indices.astype(np.int32),
                                   pattern.indptr.astype(np.int32)), shape=pattern.shape)
    out.has_sorted_indices = True
    return out


def with_self_loops(A: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
    """``A + I`` for a matrix with no diagonal entries, as sorted int32 CSR of ones."""
    B = (A + scipy.sparse.identity(A.shape[0], np.float32, format="csr")).tocsr()
    B.sort_indices()
    return scipy.sparse.csr_matrix((np.ones(B.nnz, np.float32), B.indices.astype(np.int32),
                                    B.indptr.astype(np.int32)), shape=B.shape)


def graph_path(label: str, cache: Path) -> Path:
    return cache / f"gnn-{label}.npz"


def prepare(label: str, cache: Path) -> scipy.sparse.csr_matrix:
    """Graph ``label``, symmetric and without self-loops, also written where ``load`` reads."""
    from sparsetir.data import load_graph

    import graphs

    if label in graphs.SYNTHETIC:
        generate, nodes, edges = graphs.SYNTHETIC[label]
        A = generate(nodes, edges, seed=SEED)
    else:
        A = load_graph(label)
    A = symmetric_without_loops(A)
    scipy.sparse.save_npz(graph_path(label, cache), A, compressed=False)
    return A


def load(label: str, cache: Path) -> scipy.sparse.csr_matrix:
    """The graph ``prepare`` wrote for ``label``."""
    A = scipy.sparse.load_npz(graph_path(label, cache)).tocsr()
    return scipy.sparse.csr_matrix((A.data.astype(np.float32), A.indices.astype(np.int32),
                                    A.indptr.astype(np.int32)), shape=A.shape)


@dataclass
class Task:
    """One graph with its synthetic features, labels and relations (see the module docstring).

    ``adjacency``: CSR (num_nodes x num_nodes), rows are destinations; ``rows``: each edge's
    destination (CSR order); ``etypes``: each edge's relation; ``relation_norm``: each edge's
    ``1 / |N_r(v)|``.
    """

    graph: str
    adjacency: scipy.sparse.csr_matrix
    features: np.ndarray
    labels: np.ndarray
    num_classes: int
    etypes: np.ndarray
    relation_norm: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.adjacency.shape[0]

    @property
    def rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64),
                         np.diff(self.adjacency.indptr))


def relation_norm(A: scipy.sparse.csr_matrix, etypes: np.ndarray) -> np.ndarray:
    """Per edge ``1 / |N_r(v)|``: one over the count of edges into the edge's destination ``v``
    with the edge's relation ``r`` (float64, CSR order; each framework casts it to its dtype)."""
    rows = np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr))
    key = rows * NUM_RELATIONS + etypes
    counts = np.bincount(key, minlength=A.shape[0] * NUM_RELATIONS)
    return 1.0 / counts[key]


def make_task(label: str, A: scipy.sparse.csr_matrix, self_loops: bool, seed: int = SEED) -> Task:
    """The seeded task on graph ``label`` (``A`` from ``load``), on ``A + I`` if ``self_loops``."""
    width, classes = DATASETS[label]
    return seeded_task(label, A, width, classes, self_loops, seed)


def seeded_task(label: str, A: scipy.sparse.csr_matrix, width: int, classes: int,
                self_loops: bool, seed: int = SEED) -> Task:
    """A task on any symmetric loop-free ``A``: ``width`` seeded features per node, labels among
    ``classes``, a relation per edge (see the module docstring)."""
    if self_loops:
        A = with_self_loops(A)
    n = A.shape[0]
    features = np.random.default_rng([seed, 1]).standard_normal((n, width), np.float32)
    targets = np.random.default_rng([seed, 2]).integers(0, classes, n).astype(np.int64)
    etypes = np.random.default_rng([seed, 3]).integers(0, NUM_RELATIONS, A.nnz).astype(np.int64)
    return Task(label, A, features, targets, classes, etypes, relation_norm(A, etypes))
