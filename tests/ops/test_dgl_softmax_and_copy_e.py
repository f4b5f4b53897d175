"""DGL 1.1.3's ``edge_softmax`` options (``norm_by="src"``, ``eids``), ``segment_softmax`` and
the ``copy_e`` reducers, against DGL itself on a multigraph with empty rows (and a source with
no out-edge): values and gradients in float64, and the refusals of bad arguments by name."""

import dgl
import numpy as np
import pytest
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError

from test_multigraph import NODES, assert_same, leaves, pair  # noqa: F401  (fixture)


def dgl_without_inf(result):
    """dgl.ops leaves -inf at destinations without in-edges; its update_all, like us, gives 0."""
    return result.masked_fill(result.isinf(), 0)


@pytest.mark.parametrize("norm_by", ["dst", "src"])
@pytest.mark.parametrize("eids", [None, "unsorted", "repeated"])
def test_edge_softmax_norm_by_and_eids_match_dgl(pair, norm_by, eids):  # noqa: F811
    M, g = pair
    ids = {None: None, "unsorted": np.random.default_rng(4).permutation(M.nnz)[:M.nnz - 5],
           "repeated": np.array([3, 0, 3, 7, M.nnz - 1, 7])}[eids]
    (logits,) = leaves((M.nnz if ids is None else ids.size, 2, 1))
    ours = ops.edge_softmax(M, logits, None if ids is None else torch.from_numpy(ids),
                            norm_by=norm_by)
    theirs = dgl.ops.edge_softmax(g, logits, dgl.base.ALL if ids is None
                                  else torch.from_numpy(ids), norm_by=norm_by)
    assert_same(ours, theirs, [logits])


def test_edge_softmax_options_in_numpy(pair):  # noqa: F811
    M, g = pair
    logits = np.random.default_rng(5).standard_normal((M.nnz, 3))
    np.testing.assert_allclose(ops.edge_softmax(M, logits, "__ALL__", "src"),
                               dgl.ops.edge_softmax(g, torch.from_numpy(logits),
                                                    norm_by="src").numpy(), rtol=1e-12)
    ids = [4, 1]
    np.testing.assert_allclose(ops.edge_softmax(M, logits[ids], ids),
                               dgl.ops.edge_softmax(g, torch.from_numpy(logits[ids]),
                                                    torch.tensor(ids)).numpy(), rtol=1e-12)


def test_segment_softmax_matches_dgl():
    seglen = torch.tensor([3, 0, 1, 4, 0, 2])
    (value,) = leaves((10, 2, 3))
    assert_same(ops.segment_softmax(seglen, value), dgl.ops.segment_softmax(seglen, value),
                [value])
    np.testing.assert_allclose(ops.segment_softmax(seglen.numpy(), value.detach().numpy()),
                               dgl.ops.segment_softmax(seglen, value.detach()).numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_copy_e_reducers_match_dgl(pair, reducer):  # noqa: F811
    M, g = pair
    (e,) = leaves((M.nnz, 4))
    name = f"copy_e_{reducer}"
    assert_same(getattr(ops, name)(M, e), dgl_without_inf(getattr(dgl.ops, name)(g, e)), [e])


def test_copy_e_matches_dgl(pair):  # noqa: F811
    """Each edge's own data (DGL's ``copy_e``, the one name of ``dgl.ops`` that was missing),
    in M's edge order, its gradient passed straight through."""
    M, g = pair
    (e,) = leaves((M.nnz, 4))
    assert_same(ops.copy_e(M, e), dgl.ops.copy_e(g, e), [e])
    dgl_ops = [n for n in dir(dgl.ops) if not n.startswith("_")
               and callable(getattr(dgl.ops, n))]              # not its submodules
    assert [n for n in dgl_ops if not hasattr(ops, n)] == []


@pytest.mark.parametrize("call, error, message", [
    (lambda M, x: ops.edge_softmax(M, x, norm_by="both"), SparseTIRValueError,
     "norm_by must be one of dst, src"),
    (lambda M, x: ops.edge_softmax(M, x[:2], [0, M.nnz]), SparseTIRValueError,
     r"eids holds ids outside \[0, "),
    (lambda M, x: ops.edge_softmax(M, x, [0, 1]), SparseTIRValueError,
     "logits must have 2 rows"),
    (lambda M, x: ops.edge_softmax(M, x[:2], [0.0, 1.0]), SparseTIRTypeError,
     "eids must be a 1-D array of integer edge ids"),
    (lambda M, x: ops.segment_softmax([2, -1], x[:1]), SparseTIRValueError,
     "seglen has a negative length"),
])
def test_bad_arguments_are_refused_by_name(pair, call, error, message):  # noqa: F811
    M = pair[0]
    with pytest.raises(error, match=message):
        call(M, torch.ones(M.nnz, 1, dtype=torch.float64))
