"""The CSR SpMM ``C = A @ B`` (kernel zoo ``csrmm``) computed through other formats by
``format_decompose``, each with the arguments ``sparsetir.format`` converts a scipy matrix to.

``CASES`` maps a name to a ``Decomposed``: ``build()`` compiles it (once per process, cached),
``arguments(A, B, C)`` lays out a call. Values of new formats filled by an in-kernel preprocess
start as NaN, so a slot it does not fill shows. Kinds:

* ``ell_sparsetir``: SparseTIR's own ELL rule, as SparseTIR's tests write it (no mask, sorted
  axes, ``T.evaluate(0)``), one bucket per width, values filled by the in-kernel preprocess;
  rows may not be longer than the widest bucket (a longer row would repeat a row id);
* ``ell_unsorted``: the same rule with unsorted axes, so rows longer than the widest bucket are
  cut into pieces (the preprocess then scans a row instead of bisecting it);
* ``hyb``: ``sparsetir.ops.hyb.hyb_function`` (the SpMM of ``sparsetir.ops`` decomposed by
  ``transform.hyb.ell_bucket_rule`` over two column partitions, masked), values from
  ``column_part_hyb``, scheduled by ``schedule_hyb_cpu`` and horizontally fused;
* ``bsr``: ``transform.bsr.bsr_rule``, values filled by the in-kernel preprocess;
* ``padded_sparsetir``: SparseTIR's padding rule (chunks of 4 columns, no mask) over ``csr_pad``,
  values by the preprocess; ``padded_masked``: ``padded_rows_rule`` with ``csr_pad``'s values.

Example
-------
>>> # kernel = CASES["bsr"].build(); kernel(*CASES["bsr"].arguments(A, B, C))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from kernel_zoo import CASES as ZOO

import sparsetir
from sparsetir import FormatRewriteRule
from sparsetir.format import column_part_hyb, csr_pad, csr_to_bsr, csr_to_ell, row_tiles
from sparsetir.ops.hyb import HybConfig, hyb_function, schedule_hyb_cpu
from sparsetir.script import tir as T
from sparsetir.stage1.bsr import bsr_rule
from sparsetir.stage1.hyb import padded_rows_rule

FEAT = 4
ELL_WIDTHS = (1, 2, 4, 8)
HYB = HybConfig(2, (1, 2, 4), 4)
BLOCK = 4
CHUNK = 4


@T.prim_func
def ell(a: T.handle, indptr_i: T.handle, indices_i: T.handle, indices_j: T.handle,
        m: T.int32, n: T.int32, num_rows: T.int32, nnz_cols: T.int32) -> None:
    O = T.dense_fixed(1)
    I = T.sparse_variable(O, (m, num_rows), (indptr_i, indices_i))
    J = T.sparse_fixed(I, (n, nnz_cols), indices_j)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    T.evaluate(0)


@T.prim_func
def ell_unsorted(a: T.handle, indptr_i: T.handle, indices_i: T.handle, indices_j: T.handle,
                 m: T.int32, n: T.int32, num_rows: T.int32, nnz_cols: T.int32) -> None:
    O = T.dense_fixed(1)
    I = T.sparse_variable(O, (m, num_rows), (indptr_i, indices_i), "int32", False)
    J = T.sparse_fixed(I, (n, nnz_cols), indices_j, "int32", False)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    T.evaluate(0)


@T.prim_func
def padding(a: T.handle, indptr: T.handle, indices: T.handle, m: T.int32, n: T.int32,
            nnz_chunks: T.int32, pad_size: T.int32) -> None:
    I = T.dense_fixed(m)
    JO = T.dense_variable(I, ((n + pad_size - 1) // pad_size, nnz_chunks), indptr, "int32")
    JI = T.sparse_fixed(JO, (n, pad_size), indices, "int32")
    A = T.match_sparse_buffer(a, (I, JO, JI), "float32")
    T.evaluate(0)


def ell_rules(desc, widths) -> list:
    """SparseTIR's ELL rules (``test_csrmm_ell_rewrite``): one per width, named by it."""
    return [FormatRewriteRule(str(w), desc.specialize({"nnz_cols": w}), ["A"], ["I", "J"],
                              ["O", "I", "J"], {"I": ["O", "I"], "J": ["J"]},
                              lambda i, j: (0, i, j), lambda o, i, j: (i, j)) for w in widths]


def padding_rule(pad: int) -> FormatRewriteRule:
    """SparseTIR's padding rule (``test_csrmm_padding_rewrite``)."""
    return FormatRewriteRule(str(pad), padding.specialize({"pad_size": pad}), ["A"], ["I", "J"],
                             ["I", "JO", "JI"], {"I": ["I"], "J": ["JO", "JI"]},
                             lambda i, j: (i, 0, j), lambda i, jo, ji: (i, ji))


@dataclass(frozen=True)
class Decomposed:
    """A decomposed kernel: ``func`` (Stage I, specialised), how to build it, and the
    arrays of its new formats from a scipy CSR matrix (``new_arrays(A)`` -> name: value)."""

    name: str
    func: object
    new_arrays: Callable
    compile: Callable

    def build(self):
        return _built(self.name)

    def arguments(self, A, B, C) -> list:
        m, n = A.shape
        values = dict(a=A.data, b=B, c=C, x=B, y=C, indptr=A.indptr, indices=A.indices, m=m,
                      n=n, nnz=A.nnz, **self.new_arrays(A))
        return [values[p.name] for p in self.func.params]


def _decomposed(rules, preprocess: bool = True):
    func = sparsetir.format_decompose(ZOO["csrmm"].func, rules)
    if not preprocess:
        func = sparsetir.remove_preprocess(func)
    return func.specialize({"feat_size": FEAT})


def _nan(size) -> np.ndarray:
    return np.full(size, np.nan, np.float32)


def _ell_arrays(A, widths=ELL_WIDTHS) -> dict:
    out = {}
    for w, bucket in zip(widths, csr_to_ell(A.indptr, A.indices, None, A.shape, list(widths))):
        rows = bucket.row_indices.size
        out.update({f"a_{w}": _nan(rows * w), f"indptr_i_{w}": np.array([0, rows], np.int32),
                    f"indices_i_{w}": bucket.row_indices, f"indices_j_{w}": bucket.col_indices,
                    f"m_{w}": A.shape[0], f"n_{w}": A.shape[1], f"num_rows_{w}": rows})
    return out


def _hyb_arrays(A) -> dict:
    m, n = A.shape
    tile_rows = max(1, -(-m // HYB.tiles))      # tile t owns the same rows in every bucket
    parts = column_part_hyb(m, n, A.indptr, A.indices, HYB.parts, list(HYB.widths), A.data)
    out = {}
    for name, bucket in zip(HYB.rule_names(), [b for part in parts for b in part]):
        tile_ptr = row_tiles(bucket.row_indices, m, tile_rows)
        tile_ptr = np.concatenate([tile_ptr, np.full(HYB.tiles + 1 - tile_ptr.size,
                                                     tile_ptr[-1], tile_ptr.dtype)])
        out.update({f"a_{name}": bucket.data, f"tile_ptr_{name}": tile_ptr,
                    f"rows_{name}": bucket.row_indices, f"cols_{name}": bucket.col_indices,
                    f"mask_{name}": bucket.mask, f"nrows_{name}": bucket.row_indices.size})
    return out


def _bsr_arrays(A) -> dict:
    indptr, indices, data = csr_to_bsr(A.indptr, A.indices, A.data, A.shape, BLOCK)
    return dict(a_bsr=_nan(data.size), indptr_bsr=indptr, indices_bsr=indices,
                mb_bsr=indptr.size - 1, nb_bsr=-(-A.shape[1] // BLOCK), nnzb_bsr=indices.size)


def _padded_arrays(A) -> dict:
    indptr, indices, _, _ = csr_pad(A.indptr, A.indices, None, A.shape, CHUNK)
    chunks = indptr // CHUNK
    return {f"a_{CHUNK}": _nan(indices.size), f"indptr_{CHUNK}": chunks.astype(np.int32),
            f"indices_{CHUNK}": indices, f"m_{CHUNK}": A.shape[0], f"n_{CHUNK}": A.shape[1],
            f"nnz_chunks_{CHUNK}": int(chunks[-1])}


def _masked_arrays(A) -> dict:
    indptr, indices, mask, data = csr_pad(A.indptr, A.indices, A.data, A.shape, CHUNK)
    return dict(a_pad=data, indptr_pad=indptr, indices_pad=indices, mask_pad=mask,
                nnz_pad=indices.size)


def _default_build(func):
    return sparsetir.build(func, "llvm")


def _hyb_build(func):
    mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(func), HYB)
    return sparsetir.build(mod, "llvm", schedule="none", horizontal_fuse=True)


def _cases() -> dict:
    cases = [
        Decomposed("ell_sparsetir", _decomposed(ell_rules(ell, ELL_WIDTHS)), _ell_arrays,
                   _default_build),
        Decomposed("ell_unsorted", _decomposed(ell_rules(ell_unsorted, ELL_WIDTHS)),
                   _ell_arrays, _default_build),
        Decomposed("hyb", hyb_function(HYB, FEAT), _hyb_arrays, _hyb_build),
        Decomposed("bsr", _decomposed([bsr_rule("bsr", BLOCK)]), _bsr_arrays, _default_build),
        Decomposed("padded_sparsetir", _decomposed([padding_rule(CHUNK)]), _padded_arrays,
                   _default_build),
        Decomposed("padded_masked", _decomposed([padded_rows_rule("pad")], preprocess=False),
                   _masked_arrays, _default_build),
    ]
    return {case.name: case for case in cases}


CASES = _cases()


@functools.lru_cache(maxsize=None)
def _built(name: str):
    case = CASES[name]
    return case.compile(case.func)
