"""``sparsetir.data``'s seeded synthetic graphs: R-MAT and power-law."""

import hashlib

import numpy as np
import pytest

from sparsetir.data import power_law_graph, rmat_graph
from sparsetir.errors import SparseTIRValueError


def _digest(A) -> str:
    return hashlib.sha256(A.indptr.tobytes() + A.indices.tobytes()).hexdigest()[:16]


def test_rmat_graph_has_the_asked_size_and_form():
    A = rmat_graph(3000, 24000, seed=1)
    assert A.shape == (3000, 3000) and A.nnz == 24000
    assert A.indptr.dtype == A.indices.dtype == np.int32 and A.data.dtype == np.float32
    assert A.has_sorted_indices and (A.data == 1).all()
    keys = np.repeat(np.arange(3000), np.diff(A.indptr)) * 3000 + A.indices
    assert np.unique(keys).size == A.nnz                       # distinct edges
    assert not A.diagonal().any()                              # no self-loops


def test_rmat_graph_is_seeded_and_skewed():
    A, B, C = rmat_graph(4096, 40000, seed=5), rmat_graph(4096, 40000, seed=5), \
        rmat_graph(4096, 40000, seed=6)
    assert _digest(A) == _digest(B) != _digest(C)
    degrees = np.diff(A.indptr)
    assert degrees.max() > 20 * degrees.mean()                 # a heavy head, as R-MAT has
    uniform = rmat_graph(4096, 40000, seed=5, probabilities=(0.25, 0.25, 0.25))
    assert np.diff(uniform.indptr).max() < 4 * degrees.mean()  # Erdos-Renyi-like


@pytest.mark.parametrize("args", [(1, 1), (100, 0), (100, 5000), (100, 10, 0, (0.6, 0.3, 0.3)),
                                  (100, 10, 0, (-0.1, 0.3, 0.3))])
def test_rmat_graph_refuses_bad_sizes_and_probabilities(args):
    with pytest.raises(SparseTIRValueError):
        rmat_graph(*args)


def test_power_law_graph_is_unchanged():
    # the digest of this graph before rmat_graph shared its edge drawing
    assert _digest(power_law_graph(5000, 40000, seed=3)) == "3494dfe339faad77"
