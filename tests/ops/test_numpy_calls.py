"""The short path of repeated numpy calls (``ops.numpy_calls``): after a first call prepares
it, ``spmm``/``sddmm`` on numpy arrays skip the general path, stay equal to scipy into outputs
that held garbage, and hand every other call (other dtypes, layouts, shapes, torch) back to
the general path, which copies or refuses it as on a first call."""

import array
import copy

import numpy as np
import pytest

import sparsetir.ops as ops
from sparsetir import ArgumentError
from sparsetir.errors import SparseTIRError
from sparsetir.ops import alignment, operators
from sparsetir.ops.line_copy import copy_lines
from sparsetir.schedule.operators import prefetch_distance
from operator_calls import FEAT, M_ROWS, N_COLS, call, expected, nan_out, operands
from sparse_inputs import skewed_csr


def matrix():
    return skewed_csr(M_ROWS, N_COLS, seed=3, density=0.1)       # rows 4 and 89 empty


@pytest.fixture
def general_path(monkeypatch):
    """Count the calls that reach the general path's prepared call."""
    reached = []
    prepared = operators._call_prepared          # pylint: disable=protected-access

    def counted(*args):
        reached.append(args[1][0])
        return prepared(*args)

    monkeypatch.setattr(operators, "_call_prepared", counted)
    return reached


@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted", "sddmm"])
@pytest.mark.parametrize("given_out", [True, False])
def test_repeated_calls_take_the_short_path_and_equal_scipy(op, given_out, general_path):
    A = matrix()
    M = ops.SparseMatrix(A)
    X, Y = operands(op)
    call(M, op, X, Y)                                  # the first call prepares
    assert general_path == [op]
    for seed in (1, 2):                                # new values, same shapes
        X, Y = operands(op, seed)
        out = nan_out(A, op) if given_out else None
        result = call(M, op, X, Y, out)
        assert result is out if given_out else isinstance(result, np.ndarray)
        np.testing.assert_allclose(result, expected(A, op, X, Y), rtol=1e-5, atol=1e-5)
    assert len(general_path) == 1                      # the later calls never reached it


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_what_the_short_path_declines_is_copied_or_refused_as_before(op, general_path):
    A = matrix()
    M = ops.SparseMatrix(A)
    X, Y = operands(op)
    call(M, op, X, Y)
    fortran = np.asfortranarray(X)
    raw = np.empty(X.nbytes + 1, np.uint8)              # float32s one byte off alignment
    unaligned = np.ndarray(X.shape, np.float32, buffer=raw, offset=1)
    unaligned[:] = X
    for other, general in ((fortran, True), (X[:, :], False), (unaligned, None)):
        reached = len(general_path)
        np.testing.assert_allclose(call(M, op, other, Y, nan_out(A, op)),
                                   expected(A, op, X, Y), rtol=1e-5, atol=1e-5)
        if general is not None:          # (the unaligned X: general, or copied when gathered)
            assert (len(general_path) > reached) == general
    with pytest.raises(TypeError, match="float32"):
        call(M, op, X.astype(np.float64), Y)
    flat = np.full(nan_out(A, op).size, np.nan, np.float32)
    if op == "spmm":
        with pytest.raises(ValueError, match="shape"):  # as many elements, another shape
            call(M, op, X, Y, flat)
    frozen = nan_out(A, op)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        call(M, op, X, Y, frozen)


def test_an_output_over_an_operand_is_refused_on_the_short_path_too():
    square = ops.SparseMatrix(skewed_csr(N_COLS, N_COLS, seed=4, density=0.1))
    X = operands("spmm")[0]
    ops.spmm(square, X)
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'X'"):
        ops.spmm(square, X, out=X)


def test_an_off_boundary_gathered_operand_is_copied_at_every_call(monkeypatch):
    """Where vector registers are whole lines (AVX-512; the rule decides as there, the kernels
    compile for this CPU), SDDMM's gathered Y off a line is copied onto one at every call."""
    monkeypatch.setattr(alignment, "vectors_are_lines", lambda: True)
    made = []
    monkeypatch.setattr(alignment, "copy_lines",
                        lambda source, target: made.append(source.size) or copy_lines(source,
                                                                                       target))
    A = skewed_csr(M_ROWS, N_COLS, seed=5, density=0.5)     # ~45 gathers a row: copies pay
    M = ops.SparseMatrix(A)
    buffer = np.empty(N_COLS * FEAT + 32, np.float32)
    start = (-buffer.ctypes.data % 64 + 16) // 4
    X = buffer[start:start + N_COLS * FEAT].reshape(N_COLS, FEAT)
    U = np.random.default_rng(9).standard_normal((M_ROWS, FEAT)).astype(np.float32)
    coo = A.tocoo()
    for seed in range(3):
        X[:] = np.random.default_rng(seed).standard_normal(X.shape)
        out = np.full(A.nnz, np.nan, np.float32)
        ops.sddmm(M, U, X, out=out)                 # X is SDDMM's gathered Y here
        np.testing.assert_allclose(out, np.einsum("ij,ij->i", U[coo.row], X[coo.col]),
                                   rtol=1e-5, atol=1e-5)
    assert made == [X.size] * 3
    made.clear()
    for _ in range(3):                              # SpMM never copies X (realigns or not)
        ops.spmm(M, X, out=np.full((M_ROWS, FEAT), np.nan, np.float32))
    assert made == []


def test_the_short_path_runs_the_code_a_kernel_takes_later():
    A = matrix()
    M = ops.SparseMatrix(A)
    X = operands("spmm")[0]
    ops.spmm(M, X)
    bound = M.numpy_calls[("spmm", np.ndarray, X.dtype, X.shape)].bound
    kernel = bound.kernel
    before = copy.copy(kernel)
    prefetch = 16 if prefetch_distance(N_COLS, FEAT) != 16 else 8     # not the default's
    other = operators._kernel("spmm", FEAT, prefetch=prefetch)  # pylint: disable=protected-access
    assert other is not kernel
    try:
        kernel.take_code(other)
        out = np.full((M_ROWS, FEAT), np.nan, np.float32)
        ops.spmm(M, X, out=out)
        assert bound._code is other._function       # pylint: disable=protected-access
        np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
    finally:
        kernel.take_code(before)


@pytest.mark.filterwarnings("ignore:the matrix subclass")
def test_operands_that_are_not_exactly_arrays_work_before_and_after_a_prepared_call():
    A = matrix()
    M = ops.SparseMatrix(A)
    X, _ = operands("spmm")
    rows = np.random.default_rng(7).standard_normal((M_ROWS, FEAT)).astype(np.float32)
    for _ in range(2):                   # the first call prepares the array call
        np.testing.assert_allclose(ops.spmm(M, np.asmatrix(X)), A @ X, rtol=1e-5, atol=1e-5)
        vector = array.array("f", X[:, 0])                  # float32, and no .shape
        np.testing.assert_allclose(ops.spmm(M, vector), A @ X[:, 0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ops.spmm(M, X), A @ X, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ops.sddmm(M, rows, np.asmatrix(X)),
                                   expected(A, "sddmm", rows, X), rtol=1e-5, atol=1e-5)
        ops.sddmm(M, rows, X)


def test_a_call_counts_once_for_huge_pages_taken_or_declined(monkeypatch):
    from sparsetir.ops import huge_pages, numpy_calls
    counted = []
    monkeypatch.setattr(huge_pages, "back_with_huge_pages", lambda address, nbytes: nbytes)
    for module in (operators, numpy_calls):
        monkeypatch.setattr(module, "note_gathered", counted.append)
    n = huge_pages.MIN_BYTES // 4 // 64                  # X of MIN_BYTES: counted
    A = skewed_csr(8, n, seed=6, density=0.0005)
    M = ops.SparseMatrix(A)
    X = np.random.default_rng(8).standard_normal((n, 64)).astype(np.float32)
    ops.spmm(M, X)                                       # prepares
    wide = np.full((8, 128), np.nan, np.float32)
    for out, path in ((None, "short"), (wide[:, ::2], "declined"), (None, "short")):
        before = len(counted)
        result = ops.spmm(M, X, out=out)
        np.testing.assert_allclose(result, A @ X, rtol=1e-4, atol=1e-4)
        assert len(counted) == before + 1, path
        assert all(x is X for x in counted)


def test_nothing_runs_on_the_short_path_while_torch_traces(monkeypatch):
    from sparsetir.ops import numpy_calls
    A = matrix()
    M = ops.SparseMatrix(A)
    X, _ = operands("spmm")
    ops.spmm(M, X)
    out = nan_out(A, "spmm")
    monkeypatch.setattr(numpy_calls, "tracing", lambda: True)
    assert numpy_calls.run(M.numpy_calls, "spmm", (X,), out) is None
    assert np.isnan(out).all()
    monkeypatch.setattr(numpy_calls, "tracing", lambda: False)
    assert numpy_calls.run(M.numpy_calls, "spmm", (X,), out) is out
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)


def test_a_vector_operand_takes_the_short_path_too(general_path):
    A = matrix()
    M = ops.SparseMatrix(A)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(N_COLS).astype(np.float32)
        out = np.full(M_ROWS, np.nan, np.float32)
        assert ops.spmm(M, x, out=out) is out
        np.testing.assert_allclose(out, A @ x, rtol=1e-5, atol=1e-5)
    assert general_path == ["spmm"]
    with pytest.raises(ValueError, match="shape"):
        ops.spmm(M, x, out=np.empty((M_ROWS, 1), np.float32))   # as many elements


@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted", "sddmm"])
def test_torch_tensors_take_the_short_path_too(op, general_path):
    torch = pytest.importorskip("torch")
    A = matrix()
    M = ops.SparseMatrix(A)
    X, Y = operands(op)
    as_torch = (torch.from_numpy(X), None if Y is None else torch.from_numpy(Y))
    call(M, op, *as_torch)                             # the first call prepares
    assert len(general_path) == 1
    for seed, given_out in ((1, True), (2, False)):
        X, Y = operands(op, seed)
        out = torch.from_numpy(nan_out(A, op)) if given_out else None
        version = None if out is None else out._version
        result = call(M, op, torch.from_numpy(X), None if Y is None else torch.from_numpy(Y),
                      out)
        assert type(result) is torch.Tensor and result.dtype == torch.float32
        assert result is out if given_out else True
        if given_out:
            assert out._version > version           # autograd learns that out changed
        np.testing.assert_allclose(result.numpy(), expected(A, op, X, Y), rtol=1e-5, atol=1e-5)
    assert len(general_path) == 1                      # the later calls never reached it
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)           # the result is float32 whatever torch's
    try:                                             # default dtype, made on the short path
        result = call(M, op, *as_torch)
    finally:
        torch.set_default_dtype(default)
    assert result.dtype == torch.float32 and len(general_path) == 1


def test_what_the_torch_short_path_leaves_to_the_general_path(general_path):
    torch = pytest.importorskip("torch")
    A = matrix()
    M = ops.SparseMatrix(A)
    X = torch.from_numpy(operands("spmm")[0])
    ops.spmm(M, X)
    reference = expected(A, "spmm", X.numpy(), None)
    grad_x = X.clone().requires_grad_()                # autograd: the gradient is kept
    result = ops.spmm(M, grad_x)
    assert result.requires_grad
    result.sum().backward()
    np.testing.assert_allclose(grad_x.grad.numpy(),
                               np.repeat(A.sum(axis=0).reshape(-1, 1), FEAT, axis=1),
                               rtol=1e-5, atol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast: a bfloat16 result
        assert ops.spmm(M, X).dtype == torch.bfloat16
    mixed = np.full((M_ROWS, FEAT), np.nan, np.float32)  # a numpy out for a torch X
    np.testing.assert_allclose(ops.spmm(M, X, out=mixed), reference, rtol=1e-5, atol=1e-5)
    tracked = torch.full((M_ROWS, FEAT), float("nan"), requires_grad=True)
    with pytest.raises(SparseTIRError, match="grad"):
        ops.spmm(M, X, out=tracked)
    square = ops.SparseMatrix(skewed_csr(N_COLS, N_COLS, seed=4, density=0.1))
    ops.spmm(square, X)
    with pytest.raises(ArgumentError, match="shares memory"):
        ops.spmm(square, X, out=X)


def test_torch_compile_traces_a_matrix_whose_torch_calls_are_prepared():
    torch = pytest.importorskip("torch")
    A = matrix()
    M = ops.SparseMatrix(A)
    X = torch.from_numpy(operands("spmm")[0])
    ops.spmm(M, X)                                     # prepared for eager calls
    compiled = torch.compile(lambda x: ops.spmm(M, x) * 2, backend="eager", fullgraph=True)
    np.testing.assert_allclose(compiled(X).numpy(), 2 * expected(A, "spmm", X.numpy(), None),
                               rtol=1e-5, atol=1e-5)
