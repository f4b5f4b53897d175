"""Seeded random inputs for the kernel zoo (importable without sparsetir).

Two layers:

* generic generators of sparse structures (ragged lengths, CSR, CSF levels, ELL, BSR
  patterns, a transposed CSR) that always leave some rows empty, and
* one ``make_<kernel>_inputs(rng, size)`` per kernel of ``tests/kernel_zoo.py``, returning
  EVERY parameter of that kernel by name: flat 1-D numpy arrays (float32 values, int32
  indptr/indices/edge types) and Python ints. Output arrays are included, zero-filled.

Layout conventions are those of the compiled kernels: every buffer is flat, dense axes are
row-major, indptr arrays are int32 with (parent size + 1) entries from 0 to nnz, and indices
are int32, strictly increasing within each row.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import scipy.sparse as sp

SIZES = ("small", "medium")

# Rows of the ``segment_reduce`` kernel may not be longer than the static bound of its
# dense_variable axis.
SEGMENT_MAX_LEN = 100


# --------------------------------------------------------------------------------------
# Generic helpers
# --------------------------------------------------------------------------------------


def case_rng(name: str, size: str) -> np.random.Generator:
    """Return the deterministic random generator used for kernel ``name`` at ``size``."""
    return np.random.default_rng([zlib.crc32(name.encode()), SIZES.index(size)])


def pick(size: str, small, medium):
    """Return ``small`` or ``medium`` according to ``size``."""
    if size == "small":
        return small
    if size == "medium":
        return medium
    raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")


def random_values(rng: np.random.Generator, count: int) -> np.ndarray:
    """Return ``count`` float32 values drawn uniformly from [-1, 1)."""
    return rng.uniform(-1.0, 1.0, size=count).astype(np.float32)


def output_array(count: int) -> np.ndarray:
    """Return a zero-filled float32 output buffer of ``count`` elements."""
    return np.zeros(count, dtype=np.float32)


def indptr_from_lengths(lengths) -> np.ndarray:
    """Return the int32 indptr (leading 0, then running sums) of the given row lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def segment_ids(indptr: np.ndarray) -> np.ndarray:
    """Return, for every position 0..indptr[-1]-1, the row that holds it."""
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))


def choose_empty(rng: np.random.Generator, count: int, fraction: float = 0.2) -> np.ndarray:
    """Choose which of ``count`` rows to leave empty: always the last, plus a random share.

    With a single row nothing is forced empty, so that some row can still hold data.
    """
    if count < 2:
        return np.zeros(0, dtype=np.int64)
    extra = rng.choice(count - 1, size=int(fraction * (count - 1)), replace=False)
    return np.union1d(extra, [count - 1])


def random_lengths(
    rng: np.random.Generator,
    count: int,
    max_len: int,
    empty=None,
    min_len: int = 1,
) -> np.ndarray:
    """Return ``count`` row lengths in [min_len, max_len], with the rows ``empty`` set to 0.

    ``empty=None`` picks the empty rows with :func:`choose_empty`.
    """
    lengths = rng.integers(min_len, max_len + 1, size=count)
    lengths[choose_empty(rng, count) if empty is None else np.asarray(empty, dtype=np.int64)] = 0
    return lengths


def random_ragged(rng: np.random.Generator, count: int, max_len: int, empty=None) -> np.ndarray:
    """Return the indptr of ``count`` random-length rows (a dense_variable axis), some empty."""
    return indptr_from_lengths(random_lengths(rng, count, max_len, empty))


@dataclasses.dataclass(frozen=True)
class Csr:
    """A CSR sparsity pattern (no values): int32 ``indptr`` and row-sorted int32 ``indices``."""

    indptr: np.ndarray
    indices: np.ndarray
    num_cols: int

    @property
    def num_rows(self) -> int:
        """Number of rows (len(indptr) - 1)."""
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(self.indptr[-1])

    def row_ids(self) -> np.ndarray:
        """Return the row of every stored entry."""
        return segment_ids(self.indptr)

    def to_scipy(self, data=None) -> sp.csr_matrix:
        """Return a float64 scipy CSR matrix with this pattern (``data`` defaults to ones)."""
        data = np.ones(self.nnz) if data is None else np.asarray(data, dtype=np.float64)
        return sp.csr_matrix(
            (data, self.indices, self.indptr), shape=(self.num_rows, self.num_cols)
        )


def random_csr(
    rng: np.random.Generator,
    num_rows: int,
    num_cols: int,
    max_row_len: int,
    empty_rows=None,
    columns=None,
) -> Csr:
    """Return a random CSR pattern with some empty rows and sorted, distinct column indices.

    ``columns`` restricts the column pool (default: all ``num_cols`` columns), which leaves
    the other columns empty; ``empty_rows`` forces those rows empty (default: chosen by
    :func:`choose_empty`).
    """
    pool = np.arange(num_cols) if columns is None else np.asarray(columns)
    lengths = random_lengths(rng, num_rows, min(max_row_len, len(pool)), empty_rows)
    rows = [np.sort(rng.choice(pool, size=n, replace=False)) for n in lengths]
    indices = np.concatenate(rows) if rows else np.zeros(0)
    return Csr(indptr_from_lengths(lengths), indices.astype(np.int32), num_cols)


def columns_with_gaps(rng: np.random.Generator, num_cols: int, fraction: float = 0.2) -> np.ndarray:
    """Return a sorted subset of range(num_cols) that misses the last column and a random share."""
    return np.setdiff1d(np.arange(num_cols), choose_empty(rng, num_cols, fraction))


def transpose(csr: Csr) -> Csr:
    """Return the pattern of the transpose of ``csr`` (rows sorted)."""
    t = csr.to_scipy().T.tocsr()
    t.sort_indices()
    return Csr(t.indptr.astype(np.int32), t.indices.astype(np.int32), csr.num_rows)


def random_csf(rng: np.random.Generator, dims, max_lens) -> list:
    """Return the sparse levels of a random CSF tensor with a dense first dimension.

    ``dims = (d0, d1, ..., dk)`` and ``max_lens`` has one bound per sparse level; level ``l``
    is a :class:`Csr` whose rows are the stored entries of level ``l - 1`` (or the ``d0``
    dense rows for the first level), so every level contains empty fibres.
    """
    levels, parents = [], dims[0]
    for cols, max_len in zip(dims[1:], max_lens):
        level = random_csr(rng, parents, cols, max_len)
        levels.append(level)
        parents = level.nnz
    return levels


def random_ell_indices(rng: np.random.Generator, num_rows: int, num_cols: int, width: int) -> np.ndarray:
    """Return ELL column indices: ``width`` sorted distinct columns per row, flattened."""
    rows = [np.sort(rng.choice(num_cols, size=width, replace=False)) for _ in range(num_rows)]
    return np.concatenate(rows).astype(np.int32)


def bsr_pattern(csr: Csr, blk: int) -> Csr:
    """Return the block pattern of ``csr`` in (blk x blk) blocks, computed by scipy.

    scipy's ``tobsr`` does not sort block indices, so they are sorted here.
    """
    bsr = csr.to_scipy().tobsr((blk, blk))
    bsr.sort_indices()
    return Csr(bsr.indptr.astype(np.int32), bsr.indices.astype(np.int32), csr.num_cols // blk)


# --------------------------------------------------------------------------------------
# Per-kernel inputs: each returns every kernel parameter by name.
# --------------------------------------------------------------------------------------


def _csr_matrix_dims(size: str) -> dict:
    """Shape of the CSR operand and feature width shared by the SpMM/SDDMM kernels."""
    return pick(
        size,
        dict(m=20, n=16, feat_size=8, max_row_len=6),
        dict(m=200, n=150, feat_size=32, max_row_len=24),
    )


def _csr_params(csr: Csr) -> dict:
    """Parameters naming a single CSR axis: indptr, indices and nnz."""
    return dict(indptr=csr.indptr, indices=csr.indices, nnz=csr.nnz)


def make_csrmm_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of csrmm / csrmm_dense_iter: C[m, f] = A[m, n] (CSR) @ B[n, f]."""
    d = _csr_matrix_dims(size)
    csr = random_csr(rng, d["m"], d["n"], d["max_row_len"])
    return dict(
        a=random_values(rng, csr.nnz),
        b=random_values(rng, d["n"] * d["feat_size"]),
        c=output_array(d["m"] * d["feat_size"]),
        m=d["m"], n=d["n"], feat_size=d["feat_size"],
        **_csr_params(csr),
    )


def make_sddmm_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of sddmm / fused_sddmm: C[i, j] = A[i, :] . B[j, :] on a CSR pattern."""
    d = _csr_matrix_dims(size)
    csr = random_csr(rng, d["m"], d["n"], d["max_row_len"])
    return dict(
        a=random_values(rng, d["m"] * d["feat_size"]),
        b=random_values(rng, d["n"] * d["feat_size"]),
        c=output_array(csr.nnz),
        m=d["m"], n=d["n"], feat_size=d["feat_size"],
        **_csr_params(csr),
    )


def make_segment_reduce_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of segment_reduce: ragged rows (no indices) of at most SEGMENT_MAX_LEN values."""
    n, max_len = pick(size, (24, 8), (250, 60))
    assert max_len <= SEGMENT_MAX_LEN
    indptr = random_ragged(rng, n, max_len)
    nnz = int(indptr[-1])
    return dict(a=random_values(rng, nnz), b=output_array(n), indptr=indptr, n=n, nnz=nnz)


def make_csr_reduce_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of csr_reduce: row sums of an n x m CSR matrix."""
    n, m, max_len = pick(size, (20, 30, 8), (200, 300, 40))
    csr = random_csr(rng, n, m, max_len)
    return dict(a=random_values(rng, csr.nnz), b=output_array(n), n=n, m=m, **_csr_params(csr))


def make_csr_element_wise_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of csr_element_wise: B = 2.5 * A on an m x n CSR pattern."""
    m, n, max_len = pick(size, (20, 24, 8), (250, 200, 30))
    csr = random_csr(rng, m, n, max_len)
    return dict(
        a=random_values(rng, csr.nnz), b=output_array(csr.nnz), m=m, n=n, **_csr_params(csr)
    )


def make_sparse_softmax_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of sparse_softmax: a square n x n CSR matrix; values spread over [-4, 4)."""
    n, max_len = pick(size, (20, 8), (200, 40))
    csr = random_csr(rng, n, n, max_len)
    return dict(
        a=4 * random_values(rng, csr.nnz), b=output_array(csr.nnz), n=n, **_csr_params(csr)
    )


def make_bsrmm_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of bsrmm: C[nb*blk, f] = A (BSR, nnzb blocks of blk x blk) @ B[mb*blk, f]."""
    nb, mb, blk, feat, max_len = pick(size, (6, 5, 2, 8, 3), (60, 50, 4, 16, 8))
    blocks = random_csr(rng, nb, mb, max_len)
    return dict(
        a=random_values(rng, blocks.nnz * blk * blk),
        b=random_values(rng, mb * blk * feat),
        c=output_array(nb * blk * feat),
        indptr=blocks.indptr, indices=blocks.indices,
        nb=nb, mb=mb, nnzb=blocks.nnz, blk=blk, feat_size=feat,
    )


def make_ellmm_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of ellmm: blocked ELL (``col`` blocks per block row) times a dense matrix.

    ELL rows cannot be empty, so the blocks of some rows (the last one included) hold only
    zeros, as padding rows do.
    """
    nb, mb, col, blk, feat = pick(size, (8, 6, 3, 2, 8), (64, 48, 6, 4, 16))
    values = random_values(rng, nb * col * blk * blk).reshape(nb, col * blk * blk)
    values[choose_empty(rng, nb)] = 0
    return dict(
        a=values.ravel(),
        b=random_values(rng, mb * blk * feat),
        c=output_array(nb * blk * feat),
        indices=random_ell_indices(rng, nb, mb, col),
        nb=nb, mb=mb, feat_size=feat, col=col, blk=blk,
    )


def make_hyper_gnn_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of hyper_gnn: incidence H (n vertices x m hyperedges) as CSR and as CSR of H^T.

    Some vertices belong to no hyperedge and some hyperedges are empty.
    """
    n, m, feat, max_len = pick(size, (20, 12, 8, 4), (200, 120, 16, 6))
    h = random_csr(rng, n, m, max_len, columns=columns_with_gaps(rng, m))
    h_t = transpose(h)
    return dict(
        x=random_values(rng, n * feat),
        y=output_array(n * feat),
        indptr=h.indptr, indices=h.indices,
        indptr_T=h_t.indptr, indices_T=h_t.indices,
        n=n, m=m, nnz=h.nnz, feat_size=feat,
    )


def make_bmm_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of bmm: Z_b = X_b @ Y_b for ragged dense X_b (ni x nj) and Y_b (nj x nk).

    Batch 0 has no rows (ni = 0), batch 1 an empty inner dimension (nj = 0, so Z_1 is all
    zeros), batch 2 no output columns (nk = 0); the other batches are random.
    """
    batch, max_len = pick(size, (6, 6), (12, 24))
    dims = rng.integers(1, max_len + 1, size=(3, batch))
    dims[0, 0] = dims[1, 1] = dims[2, 2] = 0
    ni, nj, nk = dims
    rows = dict(i=ni, j=nj, k=nk, ij=np.repeat(nj, ni), jk=np.repeat(nk, nj), ik=np.repeat(nk, ni))
    indptrs = {f"indptr_{key}": indptr_from_lengths(lengths) for key, lengths in rows.items()}
    counts = {f"nnz_{key}": int(lengths.sum()) for key, lengths in rows.items()}
    return dict(
        x=random_values(rng, counts["nnz_ij"]),
        y=random_values(rng, counts["nnz_jk"]),
        z=output_array(counts["nnz_ik"]),
        batch_size=batch, max_len=int(dims.max()),
        **indptrs, **counts,
    )


def _csf_params(levels, suffixes) -> dict:
    """indptr_/indices_/nnz_ parameters of CSF levels, named with the given suffixes."""
    params = {}
    for level, suffix in zip(levels, suffixes):
        params.update({f"indptr_{suffix}": level.indptr, f"indices_{suffix}": level.indices,
                       f"nnz_{suffix}": level.nnz})
    return params


def _square_sum_dims(size: str):
    """(M, N1, N2) and the per-level maximum fibre lengths of the square_sum tensors."""
    return pick(size, ((12, 10, 8), (4, 4)), ((120, 60, 40), (8, 8)))


def make_square_sum_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of square_sum: a 3-D CSF tensor A (dense I, sparse J, sparse K)."""
    dims, max_lens = _square_sum_dims(size)
    j_level, k_level = random_csf(rng, dims, max_lens)
    return dict(
        a=random_values(rng, k_level.nnz), b=output_array(dims[0]),
        M=dims[0], N1=dims[1], N2=dims[2],
        **_csf_params([j_level, k_level], ["j", "k"]),
    )


def make_square_sum_two_k_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of square_sum_two_K: A stored on (I, J, K0), summed over a different K1.

    K1 is drawn independently of K0 over the same fibres, with a narrow N2 so that some of
    its coordinates are present in K0 (hits) and others are not (misses, read as 0).
    """
    dims, max_lens = _square_sum_dims(size)
    j_level, k0_level = random_csf(rng, dims, max_lens)
    k1_level = random_csr(rng, j_level.nnz, dims[2], max_lens[1])
    return dict(
        a=random_values(rng, k0_level.nnz), b=output_array(dims[0]),
        M=dims[0], N1=dims[1], N2=dims[2],
        **_csf_params([j_level, k0_level, k1_level], ["j", "k0", "k1"]),
    )


def _make_ragged_4d_inputs(rng: np.random.Generator, size: str, out_level: str) -> dict:
    """Inputs of the fused 4-D reductions: X on (I, J, K, L), all but I ragged.

    ``out_level`` ("j" or "k") is the level whose positions index the output Y.
    """
    n, max_len = pick(size, (10, 4), (100, 5))
    indptr_j = random_ragged(rng, n, max_len)
    indptr_k = random_ragged(rng, int(indptr_j[-1]), max_len)
    indptr_l = random_ragged(rng, int(indptr_k[-1]), max_len)
    counts = dict(nnz_j=int(indptr_j[-1]), nnz_k=int(indptr_k[-1]), nnz_l=int(indptr_l[-1]))
    return dict(
        x=random_values(rng, counts["nnz_l"]), y=output_array(counts[f"nnz_{out_level}"]),
        indptr_j=indptr_j, indptr_k=indptr_k, indptr_l=indptr_l, n=n, **counts,
    )


def make_fused_reduction_4d_2d_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of fused_reduction_4d_2d (Y over the (I, J) positions)."""
    return _make_ragged_4d_inputs(rng, size, "j")


def make_fused_reduction_4d_3d_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of fused_reduction_4d_3d (Y over the (I, J, K) positions)."""
    return _make_ragged_4d_inputs(rng, size, "k")


def make_rgcn_homo_forward_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of rgcn_homo_forward: a CSR graph with an int32 relation type per edge."""
    m, n, r, feat, max_len = pick(size, (20, 16, 3, 8, 6), (200, 150, 4, 16, 12))
    csr = random_csr(rng, m, n, max_len)
    return dict(
        etype=rng.integers(0, r, size=csr.nnz).astype(np.int32),
        w=random_values(rng, r * feat * feat),
        x=random_values(rng, n * feat),
        y=output_array(m * feat),
        m=m, n=n, r=r, feat_size=feat, **_csr_params(csr),
    )


def make_rgcn_hetero_forward_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of rgcn_hetero_forward: per relation, a CSR of destination -> source edges.

    Every destination node belongs to exactly ONE relation (some relations, the last one
    included, have none). The kernel's iteration "SSSRR" over (F_out, R, I, J, F_in) makes
    (relation, destination) a spatial point whose T.init resets Y[dst, :], so a node shared
    by two relations would keep only the last relation's sum, and a node in no relation
    would never be written. With a partition, that reading and the plain sum over relations
    agree on every entry of Y.
    """
    m, n, rels, feat, max_len = pick(size, (20, 16, 4, 8, 5), (200, 150, 5, 16, 10))
    used = np.setdiff1d(np.arange(rels), choose_empty(rng, rels, 0.0))
    owner = rng.choice(used, size=m)
    dst = [np.flatnonzero(owner == r) for r in range(rels)]
    edges = random_csr(rng, m, n, max_len)  # rows: (relation, destination) pairs, in order
    return dict(
        a=random_values(rng, edges.nnz),
        w=random_values(rng, rels * feat * feat),
        x=random_values(rng, n * feat),
        y=output_array(m * feat),
        indptr_i=indptr_from_lengths([len(d) for d in dst]),
        indices_i=np.concatenate(dst).astype(np.int32),
        indptr_j=edges.indptr, indices_j=edges.indices,
        m=m, n=n, num_rels=rels, feat_size=feat, nnz_i=m, nnz_j=edges.nnz,
    )


def make_csr2bsr_inputs(rng: np.random.Generator, size: str) -> dict:
    """Inputs of csr2bsr: a CSR matrix and the BSR block pattern scipy derives from it.

    All rows of some block rows are empty, so the BSR pattern has empty block rows too.
    """
    m_out, n_out, blk, max_len = pick(size, (8, 6, 2, 4), (50, 40, 4, 10))
    empty_block_rows = choose_empty(rng, m_out)
    empty_rows = (empty_block_rows[:, None] * blk + np.arange(blk)).ravel()
    empty_rows = np.union1d(empty_rows, choose_empty(rng, m_out * blk))
    csr = random_csr(rng, m_out * blk, n_out * blk, max_len, empty_rows=empty_rows)
    blocks = bsr_pattern(csr, blk)
    return dict(
        a=random_values(rng, csr.nnz),
        b=output_array(blocks.nnz * blk * blk),
        indptr_in=csr.indptr, indices_in=csr.indices,
        indptr_out=blocks.indptr, indices_out=blocks.indices,
        m_in=m_out * blk, n_in=n_out * blk, m_out=m_out, n_out=n_out,
        nnz_in=csr.nnz, nnz_out=blocks.nnz, blk_size=blk,
    )


def skewed_csr(rows: int, cols: int, seed: int = 0, density: float = 0.05):
    """A float32 scipy CSR matrix with two empty rows (row 4 and the last), one full row (row 7,
    longer than any ELL bucket) and the rest short and random."""
    import scipy.sparse  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(rows, cols, density=density, format="lil", dtype=np.float32,
                            random_state=seed)
    A[4, :] = 0
    A[rows - 1, :] = 0
    A[7, :] = rng.standard_normal(cols).astype(np.float32)
    return A.tocsr()
