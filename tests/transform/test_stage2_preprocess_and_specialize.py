"""Stage II ``extract_preprocess`` / ``remove_preprocess`` (``transform.preprocess``) and
``specialize_buffer`` (``transform.specialize_buffer``): what they refuse, and a specialised
sparse_variable axis read as ``(row, position)``. The SparseTIR tests that use them, with
numbers, are in ``tests/sparsetir_suite``.
"""

import numpy as np
import pytest
import scipy.sparse
from kernel_zoo import CASES

import sparsetir
from sparsetir.transform.preprocess import extract_preprocess, remove_preprocess
from sparsetir.transform.specialize_buffer import specialize_buffer

CSRMM = CASES["csrmm"].func


def test_a_module_without_preprocess_is_refused():
    mod = sparsetir.lower_sparse_iter(CSRMM)
    with pytest.raises(sparsetir.SparseTIRValueError, match="no nest annotated preprocess"):
        extract_preprocess(mod)
    assert remove_preprocess(mod)["main"].params[-1].name == mod["main"].params[-1].name
    with pytest.raises(sparsetir.SparseTIRTypeError, match="takes a SparseFunction"):
        remove_preprocess(mod["main"])


def test_stage1_functions_keep_their_stage1_split():
    assert extract_preprocess(CSRMM).body == []
    assert remove_preprocess(CSRMM).body == CSRMM.body


@pytest.mark.parametrize("args,error,message", [
    (("J_indices", lambda i, j: (j,)), sparsetir.SparseTIRTypeError, "lower_sparse_iter"),
    (("nope", lambda i: (i,)), sparsetir.SparseTIRValueError, r"no buffer 'nope'.*'J_indices'"),
    (("C", lambda i, k: (i,)), sparsetir.SparseTIRValueError, "main writes C"),
    (("J_indices", lambda i, j, k: (i,)), sparsetir.SparseTIRValueError,
     "idx_map takes 3 coordinates"),
    (("J_indices", lambda i, j: (i, j)), sparsetir.SparseTIRValueError, "return one value"),
])
def test_specialize_buffer_refusals(args, error, message):
    target = CSRMM if error is sparsetir.SparseTIRTypeError else \
        sparsetir.lower_sparse_iter(CSRMM)
    with pytest.raises(error, match=message):
        specialize_buffer(target, *args)


def test_sparse_variable_indices_as_row_and_position():
    """Row ``i`` of a matrix whose columns are ``0 .. len_i - 1``: ``J_indices`` is
    ``lambda i, j: (j,)`` (``indptr[i] + j`` read back as ``(i, j)``)."""
    lengths = np.array([0, 3, 1, 5, 0, 2])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([np.arange(k) for k in lengths]).astype(np.int32)
    A = scipy.sparse.csr_matrix((np.arange(1, indices.size + 1, dtype=np.float32), indices,
                                 indptr), shape=(6, 5))
    func = CSRMM.specialize({"feat_size": 4})
    mod = specialize_buffer(sparsetir.lower_sparse_iter(func), "J_indices", lambda i, j: (j,))
    assert "J_indices[" not in mod["main"].script()
    B = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    C = np.full((6, 4), np.nan, np.float32)
    sparsetir.build(mod, "llvm")(A.data, B, C, indptr, indices, 6, 5, A.nnz)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
