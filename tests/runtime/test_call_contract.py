"""The call contract of kernels built by ``sparsetir.build``: what a call accepts, refuses,
copies and tells autograd.

Every refusal is an ``ArgumentError`` naming the user's parameter and is raised before compiled
code runs; every accepted call leaves the right answer in the caller's output.
"""

import numpy as np
import pytest
import scipy.sparse
import torch
from csrmm_calls import FEAT, call

import sparsetir
from sparsetir.runtime import ArgumentError


def _offset(array, nbytes):
    """A copy of ``array`` whose data starts ``nbytes`` past a 64-byte boundary."""
    raw = np.zeros(array.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + nbytes
    view = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


def test_element_aligned_arrays_are_passed_without_a_copy(kernel, args):
    # numpy allocates at 16 bytes; these start 4 bytes past a 64-byte boundary
    shifted = {k: _offset(v, 4) for k, v in args.items() if isinstance(v, np.ndarray)}
    for convert in kernel._converters((12, 9, len(args["a"]))):
        value, copy_back = convert(shifted[convert.param.name])
        assert value.data_ptr() == shifted[convert.param.name].ctypes.data
        assert copy_back is None
    np.testing.assert_allclose(call(kernel, shifted | {"m": 12, "n": 9, "nnz": args["nnz"]}),
                               args["expected"], rtol=1e-5, atol=1e-6)


def test_a_transposed_operand_is_refused_and_a_flat_one_accepted(kernel, args):
    with pytest.raises(ArgumentError, match=r"'b'.*shape \(16, 9\).*\(n, 16\) = \(9, 16\)"):
        call(kernel, args, b=np.ascontiguousarray(args["b"].T))
    np.testing.assert_allclose(call(kernel, args, b=args["b"].ravel()), args["expected"],
                               rtol=1e-5, atol=1e-6)


def test_numpy_matrix_arguments(kernel, args):
    out = np.asmatrix(np.full((12, FEAT), np.nan, np.float32))
    call(kernel, args, b=np.asmatrix(args["b"]), c=out)
    np.testing.assert_allclose(np.asarray(out), args["expected"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="argument 'b'"):
        call(kernel, args, b=np.asmatrix(args["b"].reshape(FEAT, 9)))


@pytest.mark.parametrize("alias", ["same", "overlap", "torch"])
def test_an_output_sharing_memory_with_an_input_is_refused(kernel, args, alias):
    if alias == "same":
        big = np.zeros(12 * FEAT, np.float32)
        changes = {"b": big[:9 * FEAT], "c": big}
    elif alias == "overlap":
        big = np.zeros(12 * FEAT + 9 * FEAT - 8, np.float32)
        changes = {"c": big[:12 * FEAT], "b": big[12 * FEAT - 8:]}
    else:
        big = torch.zeros(12 * FEAT + 3)
        changes = {"c": big[:12 * FEAT], "a": big[3:3 + len(args["a"])]}
    with pytest.raises(ArgumentError, match="'c' shares memory with argument"):
        call(kernel, args, **changes)


def test_inputs_may_share_memory_with_each_other(kernel, args):
    """A and B read the same memory: accepted, computed from it, and left unchanged."""
    both = np.random.default_rng(4).standard_normal(max(args["nnz"], 9 * FEAT)).astype(np.float32)
    kept = both.copy()
    a, b = both[:args["nnz"]], both[:9 * FEAT]
    out = call(kernel, args, a=a, b=b)
    matrix = scipy.sparse.csr_matrix((a, args["indices"], args["indptr"]), shape=(12, 9))
    np.testing.assert_allclose(out, matrix @ b.reshape(9, FEAT), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(both, kept)


def test_torch_outputs_bump_the_version_counter(kernel, args):
    b = torch.from_numpy(args["b"]).requires_grad_(False)
    c = torch.zeros(12, FEAT, requires_grad=True)
    saved = c * 1.0                        # a tensor autograd saves for backward ...
    loss = (saved * saved).sum()           # ... (pow saves its input)
    before = saved._version
    with torch.no_grad():
        call(kernel, args, b=b, c=saved)
    assert saved._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_sizes_past_the_int32_index_range_are_refused(kernel, args):
    rows = 2 ** 31 // FEAT + 1             # C would need more than 2^31 elements
    with pytest.raises(ArgumentError, match="'c'.*offsets past int32"):
        call(kernel, args, m=rows)


CSRMM_INT64 = '''
@T.prim_func
def csrmm64(a: T.handle, b: T.handle, c: T.handle, indptr: T.handle, indices: T.handle,
            m: T.int64, n: T.int64, feat_size: T.int64, nnz: T.int64):
    I = T.dense_fixed(m, "int64")
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int64")
    J_detach = T.dense_fixed(n, "int64")
    K = T.dense_fixed(feat_size, "int64")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, K), "float32")
    with T.sp_iter([I, J, K], "SRS", "csrmm") as [i, j, k]:
        with T.init():
            C[i, k] = T.float32(0)
        C[i, k] = C[i, k] + A[i, j] * B[j, k]
'''


def test_int64_kernels_index_with_64_bits(args):
    func = sparsetir.script.from_source(CSRMM_INT64)
    kernel = sparsetir.build(func.specialize({"feat_size": 16}), "llvm")
    c = np.full((12, 16), np.nan, np.float32)
    kernel(args["a"], args["b"], c, args["indptr"].astype(np.int64),
           args["indices"].astype(np.int64), 12, 9, args["nnz"])
    np.testing.assert_allclose(c, args["expected"], rtol=1e-5, atol=1e-6)
    assert "i64" in kernel.inspect_source("ll")
    with pytest.raises(ArgumentError, match="'indptr'.*int32.*int64"):
        kernel(args["a"], args["b"], c, args["indptr"], args["indices"].astype(np.int64),
               12, 9, args["nnz"])
