"""numpy/scipy references of the kernel zoo (importable without sparsetir).

Every ``*_reference(inputs)`` takes the dict built by the matching ``make_*_inputs`` of
``sparse_inputs`` and returns ``{output name: flat float64 array}``, computed in float64 with
vectorised numpy/scipy operations (never by walking the iteration like the kernel does; the
loop-by-loop versions live in ``test_kernel_zoo_references.py``). References never read the
contents of output arrays, only their parameters' structure arrays and sizes.

``REFERENCE_SPECS`` ties each kernel name to its inputs, reference, outputs and tolerance;
``tests/kernel_zoo.py`` adds the TVMScript functions to build its ``CASES`` table.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import scipy.sparse as sp

import sparse_inputs as si

# Tolerances. The references sum float32 inputs in float64; a kernel accumulates in float32
# in its own order. For n terms of magnitude <= 1 the float32 error grows like
# sqrt(n) * 6e-8 * |partial sums| (n * 6e-8 * sum|t| at worst). Our longest sums (rgcn: ~12
# edges x 16 features, hyper_gnn: two levels of neighbours, segment rows of up to 60) give at
# most ~6e-6 absolute in the loop-by-loop float32 versions of test_kernel_zoo_references.py,
# so reductions use rtol = atol = 1e-4: over 10x margin for other summation orders, and far
# below the O(0.1..1) error of a wrong index, a dropped term or a missing init. Element-wise
# kernels (one float32 rounding), csr2bsr (a copy) and softmax (exp and one division per
# entry, results in (0, 1]) keep 1e-5. Those loop versions must meet these on both sizes.
REDUCTION_TOL = 1e-4
ELEMENTWISE_TOL = 1e-5


@dataclasses.dataclass(frozen=True)
class RefSpec:
    """Everything about a kernel test case except the kernel itself."""

    make_inputs: Callable  # (rng, size) -> dict of every kernel parameter
    reference: Callable  # (inputs) -> {output name: flat expected array}
    outputs: tuple
    rtol: float = REDUCTION_TOL
    atol: float = REDUCTION_TOL


# --------------------------------------------------------------------------------------
# Shared building blocks
# --------------------------------------------------------------------------------------


def _f64(array) -> np.ndarray:
    """Return ``array`` as float64."""
    return np.asarray(array, dtype=np.float64)


def _csr(inputs: dict, values: str, shape, indptr: str = "indptr", indices: str = "indices"):
    """Return the scipy float64 CSR matrix stored under the given parameter names."""
    return sp.csr_matrix(
        (_f64(inputs[values]), inputs[indices], inputs[indptr]), shape=shape
    )


def _segment_sum(values, indptr) -> np.ndarray:
    """Return the sum of ``values`` over each segment of ``indptr`` (0 for empty ones)."""
    return np.bincount(si.segment_ids(indptr), weights=_f64(values), minlength=len(indptr) - 1)


def _bsr_times_dense(a, indptr, indices, num_block_rows, num_block_cols, blk, b, feat):
    """Return the flat (rows*blk, feat) product of a BSR matrix with a dense matrix."""
    bsr = sp.bsr_matrix(
        (_f64(a).reshape(-1, blk, blk), indices, indptr),
        shape=(num_block_rows * blk, num_block_cols * blk),
    )
    return (bsr @ _f64(b).reshape(num_block_cols * blk, feat)).ravel()


def _edge_messages(w, x, etype, src, num_rels, feat) -> np.ndarray:
    """Return, per edge, W[etype] @ X[src] as an (edges, feat) float64 array."""
    w = _f64(w).reshape(num_rels, feat, feat)
    x = _f64(x).reshape(-1, feat)
    xw = np.einsum("rof,nf->rno", w, x)  # every node under every relation
    return xw[etype, src]


# --------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------


def csrmm_reference(inp: dict) -> dict:
    """C = A @ B with A an m x n CSR matrix (csrmm and csrmm_dense_iter)."""
    a = _csr(inp, "a", (inp["m"], inp["n"]))
    b = _f64(inp["b"]).reshape(inp["n"], inp["feat_size"])
    return {"c": (a @ b).ravel()}


def row_sum_reference(inp: dict) -> dict:
    """B[i] = sum of the stored values of row i (segment_reduce and csr_reduce)."""
    return {"b": _segment_sum(inp["a"], inp["indptr"])}


def bsrmm_reference(inp: dict) -> dict:
    """C = A @ B with A in BSR (block rows nb, block columns mb, blocks blk x blk)."""
    c = _bsr_times_dense(inp["a"], inp["indptr"], inp["indices"], inp["nb"], inp["mb"],
                         inp["blk"], inp["b"], inp["feat_size"])
    return {"c": c}


def ellmm_reference(inp: dict) -> dict:
    """C = A @ B with A in blocked ELL: ``col`` blocks per block row, i.e. BSR of fixed width."""
    nb, col = inp["nb"], inp["col"]
    indptr = np.arange(0, nb * col + 1, col)
    c = _bsr_times_dense(inp["a"], indptr, inp["indices"], nb, inp["mb"], inp["blk"],
                         inp["b"], inp["feat_size"])
    return {"c": c}


def csr_element_wise_reference(inp: dict) -> dict:
    """B = 2.5 * A on A's pattern."""
    return {"b": 2.5 * _f64(inp["a"])}


def hyper_gnn_reference(inp: dict) -> dict:
    """Y = H @ (H^T @ X), H from (indptr, indices) and H^T from (indptr_T, indices_T)."""
    n, m = inp["n"], inp["m"]
    ones = np.ones(inp["nnz"])
    h = sp.csr_matrix((ones, inp["indices"], inp["indptr"]), shape=(n, m))
    h_t = sp.csr_matrix((ones, inp["indices_T"], inp["indptr_T"]), shape=(m, n))
    x = _f64(inp["x"]).reshape(n, inp["feat_size"])
    return {"y": (h @ (h_t @ x)).ravel()}


def bmm_reference(inp: dict) -> dict:
    """Z_b = X_b @ Y_b for every batch b of ragged row-major dense matrices."""
    ni, nj, nk = (np.diff(inp[f"indptr_{axis}"]) for axis in "ijk")
    x_parts = np.split(_f64(inp["x"]), np.cumsum(ni * nj)[:-1])
    y_parts = np.split(_f64(inp["y"]), np.cumsum(nj * nk)[:-1])
    z = [xb.reshape(i, j) @ yb.reshape(j, k)
         for xb, yb, i, j, k in zip(x_parts, y_parts, ni, nj, nk)]
    return {"z": np.concatenate([zb.ravel() for zb in z])}


def sddmm_reference(inp: dict) -> dict:
    """C[i, j] = A[i, :] . B[j, :] for every stored (i, j) (sddmm and fused_sddmm)."""
    feat = inp["feat_size"]
    a = _f64(inp["a"]).reshape(inp["m"], feat)
    b = _f64(inp["b"]).reshape(inp["n"], feat)
    rows = si.segment_ids(inp["indptr"])
    return {"c": np.einsum("ef,ef->e", a[rows], b[inp["indices"]])}


def square_sum_reference(inp: dict) -> dict:
    """B[i] = sum of A over all (j, k) fibres of row i of a CSF tensor."""
    per_fibre = _segment_sum(inp["a"], inp["indptr_k"])
    return {"b": _segment_sum(per_fibre, inp["indptr_j"])}


def square_sum_two_k_reference(inp: dict) -> dict:
    """B[i] = sum over K1's stored (i, j, k) of A[i, j, k] where A is stored on K0 (else 0)."""
    fibres = inp["nnz_j"]
    a_on_k0 = _csr(inp, "a", (fibres, inp["N2"]), "indptr_k0", "indices_k0")
    picked = np.asarray(a_on_k0[si.segment_ids(inp["indptr_k1"]), inp["indices_k1"]]).ravel()
    per_fibre = _segment_sum(picked, inp["indptr_k1"])
    return {"b": _segment_sum(per_fibre, inp["indptr_j"])}


def fused_reduction_4d_2d_reference(inp: dict) -> dict:
    """Y[i, j] = sum over k, l of X[i, j, k, l] (Y on the J positions)."""
    per_k = _segment_sum(inp["x"], inp["indptr_l"])
    return {"y": _segment_sum(per_k, inp["indptr_k"])}


def fused_reduction_4d_3d_reference(inp: dict) -> dict:
    """Y[i, j, k] = sum over l of X[i, j, k, l] (Y on the K positions)."""
    return {"y": _segment_sum(inp["x"], inp["indptr_l"])}


def rgcn_homo_forward_reference(inp: dict) -> dict:
    """Y[i] = sum over edges (i, j) of W[etype] @ X[j]."""
    msg = _edge_messages(inp["w"], inp["x"], inp["etype"], inp["indices"], inp["r"],
                         inp["feat_size"])
    gather = sp.csr_matrix(
        (np.ones(inp["nnz"]), np.arange(inp["nnz"]), inp["indptr"]), shape=(inp["m"], inp["nnz"])
    )
    return {"y": (gather @ msg).ravel()}


def rgcn_hetero_forward_reference(inp: dict) -> dict:
    """Y[i] = sum over relations r and edges (i, j) of r of A[r, i, j] * W[r] @ X[j]."""
    pair = si.segment_ids(inp["indptr_j"])  # (relation, destination) slot of every edge
    rel = si.segment_ids(inp["indptr_i"])[pair]
    dst = inp["indices_i"][pair]
    msg = _edge_messages(inp["w"], inp["x"], rel, inp["indices_j"], inp["num_rels"],
                         inp["feat_size"])
    y = np.zeros((inp["m"], inp["feat_size"]))
    np.add.at(y, dst, _f64(inp["a"])[:, None] * msg)
    return {"y": y.ravel()}


def sparse_softmax_reference(inp: dict) -> dict:
    """B[i, j] = exp(A[i, j] - max_i) / sum_j exp(A[i, j] - max_i) over each row's entries."""
    a, indptr = _f64(inp["a"]), inp["indptr"]
    rows = si.segment_ids(indptr)
    row_max = np.full(len(indptr) - 1, -np.inf)
    np.maximum.at(row_max, rows, a)
    e = np.exp(a - row_max[rows])
    return {"b": e / _segment_sum(e, indptr)[rows]}


def csr2bsr_reference(inp: dict) -> dict:
    """The blocks of A selected by the given BSR pattern, zeros where A has no entry."""
    blk, m_out, n_out = inp["blk_size"], inp["m_out"], inp["n_out"]
    dense = _csr(inp, "a", (inp["m_in"], inp["n_in"]), "indptr_in", "indices_in").toarray()
    blocks = dense.reshape(m_out, blk, n_out, blk).transpose(0, 2, 1, 3)
    block_rows = si.segment_ids(inp["indptr_out"])
    return {"b": blocks[block_rows, inp["indices_out"]].ravel()}


def _spec(make_inputs, reference, *outputs, tol=REDUCTION_TOL) -> RefSpec:
    """Return a RefSpec with rtol = atol = ``tol``."""
    return RefSpec(make_inputs, reference, tuple(outputs), rtol=tol, atol=tol)


REFERENCE_SPECS: dict = {
    "csrmm": _spec(si.make_csrmm_inputs, csrmm_reference, "c"),
    "csrmm_dense_iter": _spec(si.make_csrmm_inputs, csrmm_reference, "c"),
    "segment_reduce": _spec(si.make_segment_reduce_inputs, row_sum_reference, "b"),
    "csr_reduce": _spec(si.make_csr_reduce_inputs, row_sum_reference, "b"),
    "bsrmm": _spec(si.make_bsrmm_inputs, bsrmm_reference, "c"),
    "ellmm": _spec(si.make_ellmm_inputs, ellmm_reference, "c"),
    "csr_element_wise": _spec(si.make_csr_element_wise_inputs, csr_element_wise_reference, "b",
                              tol=ELEMENTWISE_TOL),
    "hyper_gnn": _spec(si.make_hyper_gnn_inputs, hyper_gnn_reference, "y"),
    "bmm": _spec(si.make_bmm_inputs, bmm_reference, "z"),
    "sddmm": _spec(si.make_sddmm_inputs, sddmm_reference, "c"),
    "fused_sddmm": _spec(si.make_sddmm_inputs, sddmm_reference, "c"),
    "square_sum": _spec(si.make_square_sum_inputs, square_sum_reference, "b"),
    "square_sum_two_K": _spec(si.make_square_sum_two_k_inputs, square_sum_two_k_reference, "b"),
    "fused_reduction_4d_2d": _spec(si.make_fused_reduction_4d_2d_inputs,
                                   fused_reduction_4d_2d_reference, "y"),
    "fused_reduction_4d_3d": _spec(si.make_fused_reduction_4d_3d_inputs,
                                   fused_reduction_4d_3d_reference, "y"),
    "rgcn_homo_forward": _spec(si.make_rgcn_homo_forward_inputs, rgcn_homo_forward_reference,
                               "y"),
    "rgcn_hetero_forward": _spec(si.make_rgcn_hetero_forward_inputs,
                                 rgcn_hetero_forward_reference, "y"),
    "sparse_softmax": _spec(si.make_sparse_softmax_inputs, sparse_softmax_reference, "b",
                            tol=ELEMENTWISE_TOL),
    "csr2bsr": _spec(si.make_csr2bsr_inputs, csr2bsr_reference, "b", tol=ELEMENTWISE_TOL),
}
