"""The Kernel call wrapper on a real compiled CSR SpMV: argument kinds, staging and every error case."""
import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T
from tvm.target.codegen import llvm_get_system_cpu

from sparsetir.runtime import (
    ArgumentError,
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    Kernel,
    ScalarParam,
    Signature,
    check_indices,
    evaluate_int,
)
from sparsetir.runtime.acceptance import acceptance
from sparsetir.runtime.arguments import BufferConverter
from sparsetir.runtime import native_call
from sparsetir.runtime.fast_path import FastPath
from sparsetir.backend.target import compile_module, cuda_available


@T.prim_func(s_tir=True)
def spmv(a_indptr: T.handle, a_indices: T.handle, a_data: T.handle, x_h: T.handle, y_h: T.handle,
         m: T.int32, n: T.int32, nnz: T.int32):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    indptr = T.match_buffer(a_indptr, (m + 1,), "int32")
    indices = T.match_buffer(a_indices, (nnz,), "int32")
    data = T.match_buffer(a_data, (nnz,), "float32")
    x = T.match_buffer(x_h, (n,), "float32")
    y = T.match_buffer(y_h, (m,), "float32")
    for i in T.serial(m):
        with T.sblock("row"):
            vi = T.axis.spatial(m, i)
            y[vi] = T.float32(0)
            for j in T.serial(indptr[vi + 1] - indptr[vi]):
                with T.sblock("nz"):
                    vj = T.axis.reduce(indptr[vi + 1] - indptr[vi], j)
                    y[vi] = y[vi] + data[indptr[vi] + vj] * x[indices[indptr[vi] + vj]]


M, N = 7, 9


def spmv_signature(sorted_indices=False):
    m, n, nnz = spmv.params[5:]
    return Signature(
        params=(
            BufferParam("indptr", "int32", m + 1, written=False),
            BufferParam("indices", "int32", nnz, written=False),
            BufferParam("data", "float32", nnz, written=False),
            BufferParam("x", "float32", n, written=False),
            BufferParam("y", "float32", m, written=True),
            ScalarParam("m", m),
            ScalarParam("n", n),
            ScalarParam("nnz", nnz),
        ),
        checks=(
            IndptrCheck("indptr", nnz),
            IndicesCheck("indices", n, indptr="indptr", width=None, sorted=sorted_indices),
        ),
    )


@pytest.fixture(scope="module")
def executable():
    target = tvm.target.Target({"kind": "llvm", "mcpu": llvm_get_system_cpu()})
    return tvm.compile(tvm.IRModule({"main": spmv}), target=target)


@pytest.fixture(scope="module")
def kernel(executable):
    return Kernel(executable, spmv_signature(), alignment=64)  # TVM's default buffers


@pytest.fixture(scope="module")
def sorted_kernel(executable):
    return Kernel(executable, spmv_signature(sorted_indices=True), alignment=64)


def make_matrix(m=M, n=N, seed=0):
    matrix = sp.random(m, n, density=0.4, format="csr", dtype=np.float32, random_state=seed).tolil()
    matrix[min(2, m - 1), :] = 0  # an empty row
    matrix = matrix.tocsr()
    matrix.sort_indices()
    x = np.random.default_rng(seed).random(n, dtype=np.float32)
    return matrix, x


@pytest.fixture
def problem():
    """Fresh numpy arguments (indptr, indices, data, x, y filled with NaN) and the expected y."""
    matrix, x = make_matrix()
    args = [matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32), matrix.data, x,
            np.full(M, np.nan, np.float32)]
    return args, matrix @ x


def scalars(args):
    indptr, indices, _, x, _ = args
    return [len(indptr) - 1, len(x), len(indices)]


def misaligned(array, offset=4):
    """A copy of `array` whose data starts `offset` bytes past a 64-byte boundary."""
    raw = np.zeros(array.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    view = raw[start:start + array.nbytes].view(array.dtype)
    view[:] = array
    assert view.ctypes.data % 64 == offset
    return view


# --- bound kernels ---------------------------------------------------------------------------


def bound_arguments(args):
    indptr, indices, data, _, _ = args
    m, n, nnz = scalars(args)
    return dict(indptr=indptr, indices=indices, data=data, m=m, n=n, nnz=nnz)


def test_bound_kernel(kernel, problem):
    args, expected = problem
    spmv = kernel.bind(**bound_arguments(args))
    assert spmv.parameters == ["x", "y"]
    spmv(args[3], args[4])
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)
    y = torch.full((M,), float("nan"))
    spmv(torch.from_numpy(args[3]), y)          # any array kind for the free arguments
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)
    assert spmv.time(args[3], args[4], number=2, repeat=1) > 0


def test_bound_torch_tensor_given_new_storage_keeps_the_checked_one(kernel, problem):
    args, expected = problem
    fixed = bound_arguments(args)
    indices = torch.from_numpy(fixed["indices"].copy())
    fixed["indices"] = indices
    spmv = kernel.bind(**fixed)
    indices.set_(torch.full((indices.numel(),), 10**8, dtype=torch.int32))  # never checked
    spmv(args[3], args[4])
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_bound_kernel_checks_fixed_arrays_once(kernel, problem):
    args, _ = problem
    args[0][3] = args[0][2] - 1
    with pytest.raises(ArgumentError, match="indptr"):
        kernel.bind(**bound_arguments(args))
    kernel.bind(validate=False, **bound_arguments(args))   # the caller knows


@pytest.mark.parametrize("change, message", [
    (lambda fixed: fixed.update(z=1), "the kernel has no parameter z"),
    (lambda fixed: fixed.pop("m"), "bind m too"),
    (lambda fixed: fixed.pop("indices"), "bind indices too"),
    (lambda fixed: fixed.update(y=np.zeros(M, np.float32)), "the kernel writes y"),
])
def test_bind_refuses(kernel, problem, change, message):
    args, _ = problem
    fixed = bound_arguments(args)
    change(fixed)
    with pytest.raises(ValueError, match=message):
        kernel.bind(**fixed)


def test_bound_kernel_checks_free_arguments(kernel, problem):
    args, _ = problem
    spmv = kernel.bind(**bound_arguments(args))
    with pytest.raises(ArgumentError, match="takes 2 arguments \\(x, y\\), got 1"):
        spmv(args[3])
    with pytest.raises(ArgumentError, match="'x': dtype float64"):
        spmv(args[3].astype(np.float64), args[4])
    with pytest.raises(ArgumentError, match="'y': has 6 elements"):
        spmv(args[3], args[4][:6])


def test_bound_kernel_refuses_output_over_a_bound_input():
    matrix, x = make_matrix(m=N, n=N)
    memory = np.from_dlpack(tvm.runtime.empty((N + matrix.nnz,), "float32", tvm.cpu()))
    data, y = memory[:matrix.nnz], memory[matrix.nnz - 1:]      # y starts on data's last value
    data[:] = matrix.data
    kernel = Kernel(tvm.compile(tvm.IRModule({"main": spmv}), "llvm"), spmv_signature(),
                    alignment=4)
    spmv_bound = kernel.bind(indptr=matrix.indptr.astype(np.int32),
                             indices=matrix.indices.astype(np.int32), data=data,
                             m=N, n=N, nnz=matrix.nnz)
    with pytest.raises(ArgumentError, match="'y' shares memory with argument 'data'"):
        spmv_bound(x, y[:N])


def _variants(x, y):
    """(name, x, y, fast) call variants: ``fast`` says whether the fast path may take them."""
    torch_x, torch_y = torch.from_numpy(x.copy()), torch.full((M,), float("nan"))
    read_only = x.copy()
    read_only.flags.writeable = False
    wide = np.full((M, 2), np.nan, np.float32)
    return [
        ("numpy", x, y, True),
        ("torch", torch_x, torch_y, True),
        ("2-D y", x, np.full((M, 1), np.nan, np.float32), True),
        ("read-only x", read_only, y, False),
        ("strided y", x, wide[:, 0], False),
        ("float64 x", x.astype(np.float64), y, False),
        ("x requires grad", torch_x.clone().requires_grad_(), torch_y, False),
        ("x a Parameter", torch.nn.Parameter(torch_x.clone(), requires_grad=False), torch_y,
         False),
        ("x a list", x.tolist(), y, False),
        ("y 1 short", x, y[:-1], False),
        ("y over x", x, x[:M] if N >= M else y, False),
        ("0-d x", np.array(x[0]), y, False),
        ("0-d y", x, np.array(np.nan, np.float32), False),
        ("y with a stride of 0", x, np.lib.stride_tricks.as_strided(
            np.full(1, np.nan, np.float32), (M,), (0,), writeable=True), False),
    ]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("index", range(14))
def test_fast_path_takes_only_the_common_call(executable, problem, index, native):
    """``call_fast`` runs exactly the common calls, with the general path's answer; every
    other call it leaves untouched for the general path, which then answers or refuses. Both
    fast paths: numpy in C (``native_call``; it also takes read-only inputs, which it never
    needs to export) and the Python one."""
    args, expected = problem
    spmv = Kernel(executable, spmv_signature(), alignment=4).bind(**bound_arguments(args))
    if native and not spmv.native_call:
        pytest.skip("the native call module cannot be built here")
    if not native:
        spmv.native_call = False
    name, x, y, fast = _variants(args[3], args[4])[index]
    fast = fast or (native and name == "read-only x")
    before = _host(y).copy()
    taken = spmv.call_fast((x, y))
    assert taken == fast, name
    if taken:
        np.testing.assert_allclose(_host(y).reshape(-1), expected, rtol=1e-5)
        return
    np.testing.assert_array_equal(_host(y), before)   # nothing ran
    try:
        spmv(x, y)
    except ArgumentError:
        return
    np.testing.assert_allclose(_host(y).reshape(-1), expected, rtol=1e-5)


def _host(array) -> np.ndarray:
    return array.detach().numpy() if isinstance(array, torch.Tensor) else array


def test_native_plans_hold_at_most_eight_free_buffers():
    assert native_call.native_plan(None, [], [None] * (native_call.MAX_SLOTS + 1), []) is None


def _one_row_spmv(executable, declare_x: bool):
    """spmv bound to a 1 x 4 matrix: x has 4 elements (declared as a 2 x 2 array with
    ``declare_x``, else only by length), y one."""
    m, n, nnz = spmv.params[5:]
    params = list(spmv_signature().params)
    if declare_x:
        params[3] = BufferParam("x", "float32", n, written=False, shape=(2, n // 2))
    kernel = Kernel(executable, Signature(tuple(params)), alignment=4)
    return kernel.bind(indptr=np.array([0, 2], np.int32), indices=np.array([0, 3], np.int32),
                       data=np.ones(2, np.float32), m=1, n=4, nnz=2)


@pytest.mark.parametrize("declare_x", [False, True])
@pytest.mark.parametrize("x_shape", [(4,), (2, 2), (4, 1), (1, 4), (2, 2, 1)])
@pytest.mark.parametrize("y_shape", [(1,), (), (1, 1)])
def test_the_three_paths_take_the_same_arguments(executable, declare_x, x_shape, y_shape):
    """C-contiguous, aligned, writable numpy arrays of the right dtype and size: the C fast
    path, the Python fast path and the general path (passing them without a copy) accept
    exactly the same shapes, those their one ``Acceptance`` fits (flat, the declared shape,
    any shape when none is declared)."""
    bound = _one_row_spmv(executable, declare_x)
    if not bound.native_call:
        pytest.skip("the native call module cannot be built here")
    x = np.arange(4, dtype=np.float32).reshape(x_shape)
    y = np.full(y_shape, np.nan, np.float32)
    try:
        general = all(copy_back is None for _, copy_back in
                      (convert(arg) for convert, arg in zip(bound._free, (x, y))))
    except ArgumentError:
        general = False
    # each path asked on its own: internals on purpose, no public call runs only one path
    python = bound._fast.values((x, y)) is not None
    native = bound._fast.native(x, y)
    assert native == python == general == (not declare_x or x.ndim == 1 or x_shape == (2, 2))
    if native:
        assert y.reshape(-1)[0] == 0 + 3


def test_fast_path_declines_what_the_kernel_assumes_aligned(kernel, problem):
    args, expected = problem
    spmv = kernel.bind(**bound_arguments(args))      # compiled for 64-byte aligned buffers
    y = misaligned(args[4], offset=4)
    assert not spmv.call_fast((args[3], y))
    spmv(args[3], y)                                 # staged and copied back
    np.testing.assert_allclose(y, expected, rtol=1e-5)


def test_fast_path_refuses_an_output_over_a_bound_input(executable):
    matrix, x = make_matrix(m=N, n=N)
    memory = np.zeros(N + matrix.nnz, np.float32)
    data, y = memory[:matrix.nnz], memory[matrix.nnz - 1:]      # y starts on data's last value
    data[:] = matrix.data
    spmv_bound = Kernel(executable, spmv_signature(), alignment=4).bind(
        indptr=matrix.indptr.astype(np.int32), indices=matrix.indices.astype(np.int32),
        data=data, m=N, n=N, nnz=matrix.nnz)
    assert not spmv_bound.call_fast((x, y[:N]))
    with pytest.raises(ArgumentError, match="'y' shares memory with argument 'data'"):
        spmv_bound(x, y[:N])
    assert spmv_bound.call_fast((x, memory[:N].copy()))


def test_no_fast_path_for_a_kernel_off_the_cpu(executable, problem):
    args, _ = problem
    spmv = Kernel(executable, spmv_signature(), alignment=4).bind(**bound_arguments(args))
    accepts = [convert.accept for convert in spmv._free]
    assert FastPath(accepts, spmv._values, []).values((args[3], args[4]))
    on_gpu = [dataclasses.replace(accept, device=tvm.cuda(0)) for accept in accepts]
    assert FastPath(on_gpu, spmv._values, []).values((args[3], args[4])) is None


def test_fast_path_bumps_torch_versions(executable, problem):
    args, expected = problem
    spmv = Kernel(executable, spmv_signature(), alignment=4).bind(**bound_arguments(args))
    y = torch.full((M,), float("nan"))
    version = y._version
    assert spmv.call_fast((torch.from_numpy(args[3]), y))
    assert y._version > version
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)


# --- argument kinds ---------------------------------------------------------------------------


def test_numpy_arrays(kernel, problem):
    args, expected = problem
    kernel(*args, *scalars(args))
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)
    assert args[4][2] == 0  # the empty row


def test_misaligned_numpy_arrays(kernel, problem):
    args, expected = problem
    args = [misaligned(a) for a in args]
    kernel(*args, *scalars(args))
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_strided_output_receives_result(kernel, problem):
    args, expected = problem
    big = np.full(2 * M, np.nan, np.float32)
    args[4] = big[::2]
    kernel(*args, *scalars(args))
    np.testing.assert_allclose(big[::2], expected, rtol=1e-5)
    assert np.isnan(big[1::2]).all()


def test_multidimensional_arrays_are_flattened(kernel, problem):
    args, expected = problem
    args[3] = args[3].reshape(3, 3)
    kernel(*args, M, N, len(args[1]))
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_read_only_input(kernel, problem):
    args, expected = problem
    for array in args[:4]:
        array.flags.writeable = False
    kernel(*args, *scalars(args))
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_read_only_input_is_passed_without_copy():
    convert = BufferConverter(acceptance(BufferParam("x", "float32", M, written=False), 0, {},
                                         tvm.cpu(), 4))
    array = np.arange(2 * M, dtype=np.float32)[1:M + 1]     # 4-byte aligned
    array.flags.writeable = False
    value, copy_back = convert(array)
    assert value.data_ptr() == array.ctypes.data and copy_back is None


def test_torch_tensors(kernel, problem):
    args, expected = problem
    tensors = [torch.from_numpy(a.copy()) for a in args]
    kernel(*tensors, *scalars(args))
    np.testing.assert_allclose(tensors[4].numpy(), expected, rtol=1e-5)


def test_aligned_arrays_are_passed_without_copy():
    convert = BufferConverter(acceptance(BufferParam("y", "float32", M, written=True), 0, {},
                                         tvm.cpu(), 64))
    tensor = torch.zeros(M)
    value, copy_back = convert(tensor)
    assert value is tensor and copy_back is None
    array = np.from_dlpack(tvm.runtime.empty((M,), "float32", tvm.cpu()))  # 64-byte aligned
    value, copy_back = convert(array)
    assert value.data_ptr() == array.ctypes.data and copy_back is None


def test_torch_strided_and_offset_tensors(kernel, problem):
    args, expected = problem
    offset = [torch.cat([torch.zeros(1, dtype=t.dtype), t])[1:] for t in map(torch.from_numpy, args)]
    big = torch.full((2 * M,), float("nan"))
    offset[4] = big[::2]
    kernel(*offset, *scalars(args))
    np.testing.assert_allclose(big[::2].numpy(), expected, rtol=1e-5)
    assert torch.isnan(big[1::2]).all()


def test_tvm_tensors(kernel, problem):
    args, expected = problem
    tensors = [tvm.runtime.tensor(a) for a in args]
    kernel(*tensors, *scalars(args))
    np.testing.assert_allclose(tensors[4].numpy(), expected, rtol=1e-5)


def test_different_shapes_with_one_kernel(kernel):
    for m, n, seed in [(M, N, 1), (12, 5, 2), (1, 1, 3)]:
        matrix, x = make_matrix(m, n, seed)
        y = np.full(m, np.nan, np.float32)
        indptr, indices = matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32)
        kernel(indptr, indices, matrix.data, x, y, m, n, matrix.nnz)
        np.testing.assert_allclose(y, matrix @ x, rtol=1e-5)


def test_empty_matrix(kernel):
    indptr, indices, data = np.zeros(4, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
    y = np.full(3, np.nan, np.float32)
    kernel(indptr, indices, data, np.ones(4, np.float32), y, np.int64(3), np.int32(4), 0)
    np.testing.assert_array_equal(y, 0)


def test_strided_tvm_tensor_output(kernel, problem):
    args, expected = problem
    big = np.full(2 * M, np.nan, np.float32)
    args[4] = tvm_ffi.from_dlpack(big[::2])
    kernel(*args, *scalars(args))
    np.testing.assert_allclose(big[::2], expected, rtol=1e-5)


def test_multidimensional_tvm_tensor(kernel, problem):
    args, expected = problem
    args[3] = tvm.runtime.tensor(args[3].reshape(3, 3))
    kernel(*args, M, N, len(args[1]))
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_time_and_source(kernel, problem):
    args, expected = problem
    tensors = [torch.from_numpy(misaligned(a)) for a in args]  # staged; y is copied back
    seconds = kernel.time(*tensors, *scalars(args), number=3, repeat=2)
    assert 0 < seconds < 1
    np.testing.assert_allclose(tensors[4].numpy(), expected, rtol=1e-5)
    assert "define" in kernel.inspect_source("ll")


def test_a_kernel_from_the_disk_cache_says_it_holds_no_source(tmp_path, monkeypatch):
    """inspect_source returned '' for every kernel built with cache=True (loaded from a
    compiled library)."""
    import sparsetir
    from sparsetir.errors import SparseTIRValueError
    from sparsetir.ops.kernels import spmm
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    func = spmm.specialize({"feat_size": 16})
    assert "define" in sparsetir.build(func, "llvm").inspect_source("ll")
    with pytest.raises(SparseTIRValueError, match="holds no 'll' source.*cache=False"):
        sparsetir.build(func, "llvm", cache=True).inspect_source("ll")


@T.prim_func(s_tir=True)
def double_gpu(x_h: T.handle, y_h: T.handle, n: T.int32):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    x = T.match_buffer(x_h, (n,), "float32")
    y = T.match_buffer(y_h, (n,), "float32")
    for i in T.thread_binding(n, "threadIdx.x"):
        with T.sblock("double"):
            vi = T.axis.spatial(n, i)
            y[vi] = x[vi] * T.float32(2)


@pytest.fixture(scope="module")
def cuda_kernel():
    n = double_gpu.params[2]
    signature = Signature((BufferParam("x", "float32", n, False), BufferParam("y", "float32", n, True),
                           ScalarParam("n", n)))
    return Kernel(compile_module(tvm.IRModule({"main": double_gpu}), "cuda"), signature, device="cuda",
                  alignment=64)


@pytest.mark.cuda
def test_cuda_kernel_without_device(cuda_kernel):
    if cuda_available():
        pytest.skip("a CUDA device is present")
    assert "__global__" in cuda_kernel.inspect_source("cuda")
    with pytest.raises(RuntimeError, match="runs on cuda:0, but no such device is available"):
        cuda_kernel(np.ones(4, np.float32), np.zeros(4, np.float32), 4)


@pytest.mark.gpu
def test_cuda_kernel_on_gpu(cuda_kernel):
    x = np.arange(10, dtype=np.float32)
    big = np.full(20, np.nan, np.float32)
    cuda_kernel(x, big[::2], 10)  # numpy: copied to the GPU and back
    np.testing.assert_array_equal(big[::2], 2 * x)
    assert np.isnan(big[1::2]).all()
    y = tvm.runtime.empty((10,), "float32", tvm.cuda(0))
    cuda_kernel(tvm.runtime.tensor(x, device=tvm.cuda(0)), y, 10)
    np.testing.assert_array_equal(y.numpy(), 2 * x)
    with pytest.raises(ArgumentError, match="'x': is on cpu:0, the kernel runs on cuda:0"):
        cuda_kernel(tvm.runtime.tensor(x), y, 10)
    if torch.cuda.is_available():
        xt, yt = torch.arange(10.0, device="cuda"), torch.empty(10, device="cuda")
        cuda_kernel(xt, yt, 10)
        torch.testing.assert_close(yt, 2 * xt)
        with pytest.raises(ArgumentError, match="'y': is on cpu"):
            cuda_kernel(xt, torch.empty(10), 10)


# --- bad arguments ----------------------------------------------------------------------------


def test_wrong_dtype(kernel, problem):
    args, _ = problem
    args[0] = args[0].astype(np.int64)
    with pytest.raises(ArgumentError, match="'indptr'.*int64.*int32"):
        kernel(*args, *scalars(args))


def test_wrong_torch_dtype(kernel, problem):
    args, _ = problem
    tensors = [torch.from_numpy(a) for a in args]
    tensors[2] = tensors[2].double()
    with pytest.raises(ArgumentError, match="'data'.*float64.*float32"):
        kernel(*tensors, *scalars(args))


def test_wrong_length(kernel, problem):
    args, _ = problem
    args[3] = np.zeros(N + 1, np.float32)
    with pytest.raises(ArgumentError, match=f"'x': has {N + 1} elements, the kernel expects n = {N}"):
        kernel(*args, M, N, len(args[1]))


def test_wrong_number_of_arguments(kernel, problem):
    args, _ = problem
    with pytest.raises(ArgumentError, match=r"8 arguments \(indptr, indices, data, x, y, m, n, nnz\), got 7"):
        kernel(*args, M, N)


@pytest.mark.parametrize("value", [7.0, True, np.float32(7), "7", None])
def test_non_integer_scalar(kernel, problem, value):
    args, _ = problem
    with pytest.raises(ArgumentError, match="'m': expected an integer"):
        kernel(*args, value, N, len(args[1]))


def test_scalar_out_of_int32_range(kernel, problem):
    args, _ = problem
    with pytest.raises(ArgumentError, match="'nnz': 4294967296 does not fit in int32"):
        kernel(*args, M, N, 2**32)


@pytest.mark.parametrize("value, message", [
    (None, "'x': expected a numpy array, torch tensor or tvm tensor, got None"),
    ([0.0] * N, "'x': .*got a Python list"),
])
def test_not_an_array(kernel, problem, value, message):
    args, _ = problem
    args[3] = value
    with pytest.raises(ArgumentError, match=message):
        kernel(*args, M, N, len(args[1]))


def test_sparse_torch_tensor(kernel, problem):
    args, _ = problem
    tensors = [torch.from_numpy(a) for a in args]
    tensors[3] = torch.ones(N).to_sparse()
    with pytest.raises(ArgumentError, match="'x': expected a dense tensor, got layout torch.sparse_coo"):
        kernel(*tensors, *scalars(args))


def test_read_only_output(kernel, problem):
    args, _ = problem
    args[4].flags.writeable = False
    with pytest.raises(ArgumentError, match="'y': the kernel writes this buffer, but the array is read-only"):
        kernel(*args, *scalars(args))


def test_wrong_device(kernel, problem):
    args, _ = problem
    tensors = [torch.from_numpy(a) for a in args]
    tensors[3] = torch.empty(N, device="meta")
    with pytest.raises(ArgumentError, match="'x': is on meta, the kernel runs on cpu:0"):
        kernel(*tensors, *scalars(args))


def test_indptr_not_monotone(kernel, problem):
    args, _ = problem
    args[0][3], args[0][4] = args[0][4] + 1, args[0][3]
    message = (rf"indptr 'indptr': indptr is not monotone: indptr\[3\] = {args[0][3]} > "
               rf"indptr\[4\] = {args[0][4]}$")
    with pytest.raises(ArgumentError, match=message):
        kernel(*args, *scalars(args))


def test_indptr_first_entry(kernel, problem):
    args, _ = problem
    args[0][0] = 1
    nnz = len(args[1])
    message = f"indptr 'indptr': indptr must start at 0 and end at nnz = {nnz}, got 1 and {nnz}$"
    with pytest.raises(ArgumentError, match=message):
        kernel(*args, *scalars(args))


def test_indptr_last_entry(kernel, problem):
    args, _ = problem
    nnz = len(args[1])
    args[0][-1] = nnz - 1
    message = (f"indptr 'indptr': indptr must start at 0 and end at nnz = {nnz}, "
               f"got 0 and {nnz - 1}$")
    with pytest.raises(ArgumentError, match=message):
        kernel(*args, *scalars(args))


def test_indices_out_of_range(kernel, problem):
    args, _ = problem
    args[1][5] = N
    message = rf"indices 'indices': indices\[5\] = {N} is out of range \[0, {N}\)$"
    with pytest.raises(ArgumentError, match=message):
        kernel(*args, *scalars(args))


def test_unsorted_indices(sorted_kernel, problem):
    args, _ = problem
    indptr, indices = args[0], args[1]
    row = next(r for r in range(M) if indptr[r + 1] - indptr[r] >= 2)
    start = indptr[row]
    indices[start], indices[start + 1] = indices[start + 1], indices[start]
    message = (f"indices 'indices': indices is not sorted within row {row}: indices.{start + 1}. "
               f"= {indices[start + 1]} follows indices.{start}. = {indices[start]}$")
    with pytest.raises(ArgumentError, match=message):
        sorted_kernel(*args, *scalars(args))


def test_validate_false_skips_index_checks(sorted_kernel, problem):
    args, expected = problem
    indptr, indices, data = args[0], args[1], args[2]
    row = next(r for r in range(M) if indptr[r + 1] - indptr[r] >= 2)
    swap = [indptr[row] + 1, indptr[row]]
    indices[indptr[row]:indptr[row] + 2] = indices[swap]  # unsorted, but the same matrix
    data[indptr[row]:indptr[row] + 2] = data[swap]
    with pytest.raises(ArgumentError, match="'indices'"):
        sorted_kernel(*args, *scalars(args))
    sorted_kernel(*args, *scalars(args), validate=False)
    np.testing.assert_allclose(args[4], expected, rtol=1e-5)


def test_length_dividing_by_zero(executable, problem):
    m, n = spmv.params[5:7]
    params = list(spmv_signature().params)
    params[3] = BufferParam("x", "float32", m // (n - N), written=False)
    kernel = Kernel(executable, Signature(tuple(params)), alignment=64)
    args, _ = problem
    with pytest.raises(ArgumentError, match="'x': its length .* divides by zero"):
        kernel(*args, *scalars(args))


# --- helpers ----------------------------------------------------------------------------------


def test_evaluate_int():
    m, k = tirx.Var("m", "int32"), tirx.Var("k", "int32")
    expr = tirx.Max(tirx.Min((m + 1) * 3 // k, 100), tirx.Cast("int32", tirx.floormod(m, k))) - 2
    assert evaluate_int(expr, {m: 7, k: 5}) == 2
    assert evaluate_int(tirx.truncdiv(m, k), {m: -7, k: 2}) == -3
    assert evaluate_int(tirx.truncmod(m, k), {m: -7, k: 2}) == -1
    assert evaluate_int(12, {}) == 12
    with pytest.raises(ValueError, match="variable k is unbound"):
        evaluate_int(m + k, {m: 1})


def test_check_indices_fixed_width_rows():
    check_indices("cols", np.array([0, 2, 1, 3]), 4, width=2, strictly_increasing=True)
    check_indices("cols", np.array([0, 2, 3, 3]), 4, width=2, strictly_increasing=True)  # pad
    with pytest.raises(ArgumentError, match="indices 'cols': cols is not sorted within row 1"):
        check_indices("cols", np.array([0, 2, 3, 1]), 4, width=2, strictly_increasing=True)


def test_evaluate_int_rejects_non_integer_nodes():
    m = tirx.Var("m", "int32")
    with pytest.raises(TypeError, match="cannot evaluate"):
        evaluate_int(tirx.Select(m > 0, m, 0), {m: 1})


def test_inconsistent_signature():
    m = tirx.Var("m", "int32")
    with pytest.raises(ValueError, match="repeats a parameter name"):
        Signature((ScalarParam("m", m), BufferParam("m", "int32", m, False)))
    with pytest.raises(ValueError, match="'rowptr', which is not a buffer parameter"):
        Signature((BufferParam("cols", "int32", m, False), ScalarParam("m", m)),
                  (IndicesCheck("cols", m, indptr="rowptr", width=None, sorted=False),))
