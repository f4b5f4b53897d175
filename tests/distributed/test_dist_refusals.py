"""In this process, as a group of one (gloo): float64 results against scipy, and every bad
argument of the distributed API refused by name."""

import numpy as np
import pytest
import torch
import torch.distributed as dist

from dist_graphs import small_graph
from sparsetir import nn
from sparsetir.distributed import DistSparseMatrix, dist_sddmm, dist_spmm, partition
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError


def test_needs_an_initialised_group():
    if dist.is_initialized():
        pytest.skip("a group is up in this process")
    with pytest.raises(SparseTIRValueError, match="init_process_group"):
        DistSparseMatrix(partition(small_graph(), 1)[0])


def test_float64_matches_scipy(group_of_one):
    A = small_graph(dtype=np.float64)
    DM = DistSparseMatrix(partition(A, 1)[0])
    X = np.random.default_rng(0).standard_normal((A.shape[0], 5))
    for strategy in ("broadcast", "halo"):
        got = dist_spmm(DM, torch.from_numpy(X), strategy)
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), A @ X, rtol=1e-12)
        rows, cols = A.nonzero()          # CSR order: the local edge order of one part
        np.testing.assert_allclose(dist_sddmm(DM, torch.from_numpy(X), torch.from_numpy(X),
                                              strategy).numpy(),
                                   np.einsum("ij,ij->i", X[rows], X[cols]), rtol=1e-12)


def test_refusals_name_the_argument(group_of_one):
    A = small_graph()
    part = partition(A, 1)[0]
    DM = DistSparseMatrix(part)
    X = torch.zeros(A.shape[0], 4)
    with pytest.raises(SparseTIRValueError, match="strategy"):
        dist_spmm(DM, X, "ring")
    with pytest.raises(SparseTIRValueError, match="strategy"):
        DistSparseMatrix(part, strategy="ring")
    with pytest.raises(SparseTIRValueError, match="X_local has shape"):
        dist_spmm(DM, X[:-1])
    with pytest.raises(SparseTIRTypeError, match="X_local is float64"):
        dist_spmm(DM, X.double())
    with pytest.raises(SparseTIRTypeError, match="X_local must be a torch tensor"):
        dist_spmm(DM, X.numpy())
    with pytest.raises(SparseTIRTypeError, match="DM must be"):
        dist_spmm(A, X)
    with pytest.raises(SparseTIRValueError, match="Y_local has shape"):
        dist_sddmm(DM, X, X[:3])
    with pytest.raises(SparseTIRValueError, match="features"):
        dist_sddmm(DM, X, torch.zeros(A.shape[0], 3))
    with pytest.raises(SparseTIRValueError, match="values must be"):
        DistSparseMatrix(part, values=torch.ones(3))
    with pytest.raises(SparseTIRTypeError, match="values are torch.float64"):
        DistSparseMatrix(part, values=torch.ones(part.nnz, dtype=torch.float64))
    with pytest.raises(SparseTIRTypeError, match="values are torch.int32"):
        DistSparseMatrix(part, values=torch.ones(part.nnz, dtype=torch.int32))
    with pytest.raises(SparseTIRValueError, match="part 0 of 2"):
        DistSparseMatrix(partition(A, 2)[0])
    with pytest.raises(SparseTIRTypeError, match="part must be"):
        DistSparseMatrix(A)
    with pytest.raises(SparseTIRValueError, match="edge_weight has shape"):
        nn.GraphConv(4, 2, allow_zero_in_degree=True)(DM, X, edge_weight=torch.ones(3))
    with pytest.raises(SparseTIRValueError, match="no in-edge"):
        nn.GraphConv(4, 2)(DM, X)                 # rows 3 and 7 are empty
