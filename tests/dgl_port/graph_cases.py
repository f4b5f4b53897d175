"""DGL 1.1.3's test graphs (its ``tests/utils/graph_cases.py``), by the labels its tests select
them with: ``get_cases(labels, exclude)`` gives every graph carrying one of ``labels`` and none
of ``exclude``, in a fixed order (DGL's comes from a set).

Example
-------
>>> [g.num_edges() for g in get_cases(["clique"])]
[9]
"""

import dgl
import numpy as np
import scipy.sparse
import torch

_SRC = [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 6, 6, 7, 8, 9]
_DST = [4, 5, 1, 2, 4, 7, 9, 8, 6, 4, 1, 0, 1, 0, 2, 3, 5]


def _with_features(g, edge_name, edge_feature):
    g.ndata["h"] = torch.randn(g.num_nodes(), 2)
    g.edata[edge_name] = edge_feature(g.num_edges())
    return g


def _batched():
    pieces = [([0, 1, 2], [1, 2, 3]), ([1, 1], [2, 0]), ([0], [1])]
    return dgl.batch([dgl.add_self_loop(dgl.graph(edges)) for edges in pieces])


def _block_of_hetero():
    return dgl.to_block(dgl.heterograph({
        ("user", "plays", "game"): ([0, 1, 2], [1, 1, 0]),
        ("user", "likes", "game"): ([1, 2, 3], [0, 0, 2]),
        ("store", "sells", "game"): ([0, 1, 1], [0, 1, 2])}))


_CASES = [
    (("bipartite", "zero-degree"),
     lambda: dgl.heterograph({("_U", "_E", "_V"): ([0, 0, 0, 2, 2, 3], [0, 1, 4, 1, 4, 3])})),
    (("bipartite",),
     lambda: dgl.heterograph({("_U", "_E", "_V"): ([0, 0, 0, 0, 1, 1, 1, 1],
                                                   [0, 1, 2, 3, 0, 1, 2, 3])})),
    (("homo",), lambda: dgl.graph((_SRC, _DST))),
    (("homo", "zero-degree", "homo-zero-degree"),
     lambda: dgl.graph(([0, 0, 0, 2, 2, 3], [0, 1, 4, 1, 4, 3]))),
    (("homo", "has_feature"),
     lambda: _with_features(dgl.graph((_SRC, _DST)), "w", lambda n: torch.randn(n, 3))),
    (("homo", "has_scalar_e_feature"),
     lambda: _with_features(dgl.graph((_SRC, _DST)), "scalar_w", lambda n: torch.randn(n).abs())),
    (("homo", "row_sorted"), lambda: dgl.graph((_SRC, _DST), row_sorted=True)),
    (("homo", "row_sorted", "col_sorted"),
     lambda: dgl.graph((_SRC, [1, 4, 5, 2, 4, 7, 8, 9, 1, 4, 6, 0, 0, 1, 2, 3, 5]),
                       row_sorted=True, col_sorted=True)),
    (("batched", "homo"), _batched),
    (("block", "bipartite", "block-bipartite"),
     lambda: dgl.to_block(dgl.graph(([2, 3, 4], [5, 6, 7]), num_nodes=100))),
    (("block",), _block_of_hetero),
    (("clique",), lambda: dgl.graph(([0, 0, 0, 1, 1, 1, 2, 2, 2], [0, 1, 2, 0, 1, 2, 0, 1, 2]))),
]


def get_cases(labels, exclude=()):
    """The graphs with one of ``labels`` and none of ``exclude``, freshly built."""
    return [make() for case_labels, make in _CASES
            if set(case_labels) & set(labels) and not set(case_labels) & set(exclude)]


def random_scipy_graph(nodes=100, density=0.1):
    """``dgl.from_scipy(scipy.sparse.random(...))``, as DGL's RelGraphConv tests make it."""
    return dgl.from_scipy(scipy.sparse.random(nodes, nodes, density=density,
                                              random_state=np.random.default_rng(0)))
