"""Real graphs bundled with sparsetir (see README.md here for their sources), and
:func:`power_law_graph` and :func:`rmat_graph` (``synthetic.py``), seeded synthetic graphs of any size.

Example
-------
>>> from sparsetir.data import load_graph, graph_names
>>> A = load_graph("cora")          # scipy.sparse.csr_matrix, float32 ones, int32 indices
>>> A.shape, A.nnz
((2708, 2708), 10556)
>>> from sparsetir.data import power_law_graph
>>> power_law_graph(169_343, 1_166_243, seed=0).nnz     # ogbn-arxiv sized
1166243
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse

from .synthetic import power_law_graph, rmat_graph  # noqa: F401  (re-exported)

DATA_DIR = Path(__file__).resolve().parent


def graph_names() -> list:
    """Names of the bundled graphs, smallest first."""
    info = json.loads((DATA_DIR / "graphs.json").read_text())
    return sorted(info, key=lambda name: info[name]["nnz"])


def load_graph(name: str) -> scipy.sparse.csr_matrix:
    """The adjacency matrix of graph ``name`` as float32 CSR with int32 index arrays."""
    path = DATA_DIR / f"{name}.npz"
    if not path.exists():
        raise KeyError(f"no bundled graph {name!r}; available: {graph_names()}")
    z = np.load(path)
    indptr = z["indptr"].astype(np.int32)
    indices = z["indices"].astype(np.int32)
    data = np.ones(len(indices), np.float32)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in z["shape"]))
