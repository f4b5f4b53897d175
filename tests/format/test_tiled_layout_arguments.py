"""A parameter ``apply_tiled_layout`` stored in a tiled layout takes only its flat physical
array (F9): the logical N-D array with as many elements used to run with its elements in the
wrong places."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tvm

import sparsetir
from sparsetir.format import TiledLayout, apply_tiled_layout
from sparsetir.ir import attrs
from sparsetir.ops.kernels import spmm as csrmm

LAYOUT = TiledLayout.parse("{1,0:T(2,2)}")
A = sp.csr_matrix(np.array([[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]], np.float32))
X = np.arange(8, dtype=np.float32).reshape(4, 2)        # 8 elements: the physical size too


@pytest.fixture(scope="module")
def tiled():
    mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 2}))
    return apply_tiled_layout(mod, "x", LAYOUT)


@pytest.fixture(scope="module")
def kernel(tiled):
    return sparsetir.build(tiled, "llvm")


def _call(kernel, x):
    y = np.full((3, 2), np.nan, np.float32)
    kernel(A.data, x, y, A.indptr.astype(np.int32), A.indices.astype(np.int32), 3, 4, A.nnz)
    return y


def test_the_layout_is_recorded(tiled):
    assert attrs.tiled_layouts(tiled["main"]) == {"X": str(LAYOUT)}
    assert TiledLayout.parse(attrs.tiled_layouts(tiled["main"])["X"]) == LAYOUT


def test_a_tiled_parameter_refuses_the_untiled_array(kernel):
    assert LAYOUT.physical_size((4, 2)) == X.size
    with pytest.raises(sparsetir.ArgumentError,
                       match=r"argument 'x': has shape \(4, 2\), but the kernel stores it in the "
                             r"tiled layout .*pass layout.to_physical\(x\)"):
        _call(kernel, X)


@pytest.mark.parametrize("wrap", [np.asarray, tvm.runtime.tensor], ids=["numpy", "tvm"])
def test_any_n_d_array_of_the_physical_size_is_refused(kernel, wrap):
    physical = LAYOUT.to_physical(X)
    with pytest.raises(sparsetir.ArgumentError, match="to_physical"):
        _call(kernel, wrap(physical.reshape(2, 4)))


def test_the_physical_array_computes_the_product(kernel):
    np.testing.assert_allclose(_call(kernel, LAYOUT.to_physical(X)), A @ X)
