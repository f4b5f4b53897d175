"""The benchmark's graphs, prepared once per run in the harness's process.

The bundled graphs (``sparsetir.data.graph_names()``), two synthetic power-law graphs at
ogbn sizes (``sparsetir.data.power_law_graph``, seed 0), labelled as such:
``synthetic-arxiv`` (169,343 nodes, 1,166,243 edges, as ogbn-arxiv) and ``synthetic-proteins``
(132,534 nodes, 39,561,252 edges, as ogbn-proteins), and an R-MAT graph of ogbn-arxiv's size
(``sparsetir.data.rmat_graph``, Graph500's parameters, seed 0): ``rmat-arxiv``. Every graph's values are replaced by seeded
uniform values in [0.5, 1.5), so that weighted and unweighted SpMM differ, and the graph is
written to the run's cache folder for the workers (``workload.load``).

Example
-------
>>> labels()
['citeseer', 'cora', 'pubmed', 'facebook', 'email-enron', 'synthetic-arxiv', 'rmat-arxiv']
>>> A = prepare("synthetic-arxiv", cache)      # generated, about a second
>>> A.nnz
1166243
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse
from sparsetir.data import graph_names, load_graph, power_law_graph, rmat_graph

import workload

SYNTHETIC = {"synthetic-arxiv": (power_law_graph, 169_343, 1_166_243),
             "rmat-arxiv": (rmat_graph, 169_343, 1_166_243),
             "synthetic-proteins": (power_law_graph, 132_534, 39_561_252)}


def labels(large: bool = False) -> list:
    """Every graph label, smallest first (``large``: with synthetic-proteins)."""
    return graph_names() + ["synthetic-arxiv", "rmat-arxiv"] \
        + (["synthetic-proteins"] if large else [])


def prepare(label: str, cache: Path) -> scipy.sparse.csr_matrix:
    """Graph ``label`` with the benchmark's values, also written where ``workload.load`` reads."""
    if label in SYNTHETIC:
        generate, nodes, edges = SYNTHETIC[label]
        A = generate(nodes, edges, seed=0)
    else:
        A = load_graph(label)
    A.data = np.random.default_rng(0).uniform(0.5, 1.5, A.nnz).astype(np.float32)
    scipy.sparse.save_npz(workload.graph_path(label, cache), A, compressed=False)
    return A
