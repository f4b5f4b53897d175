"""``TiledLayout`` and ``apply_tiled_layout`` with padding so large that the physical array
cannot exist or its positions leave int64 / int32: a ``TiledLayoutError`` or the call's
``ArgumentError`` naming the sizes, never numpy's bare ``ValueError``, TVM's internal literal
check, or linear indices that silently wrap around.
"""

import numpy as np
import pytest
import scipy.sparse

import sparsetir
from sparsetir.errors import ArgumentError, SparseTIRTypeError
from sparsetir.format import TiledLayout, TiledLayoutError, apply_tiled_layout
from sparsetir.ops.kernels import spmm as csrmm

HUGE = TiledLayout.parse("{1,0:T(1,4611686018427387904)}")     # 2**62 columns per tile


def test_arrays_of_indices_past_int64_are_refused_not_wrapped():
    rows, cols = np.indices((5, 1))
    assert HUGE.linear_index((4, 0), (5, 1)) == 4 * 2**62       # Python ints stay exact
    with pytest.raises(TiledLayoutError, match=r"in 23058430092136939520 physical elements"
                                                r".*past int64 linear indices"):
        HUGE.linear_index((rows, cols), (5, 1))


def test_padding_past_any_array_is_refused_by_the_layout():
    layout = TiledLayout.parse("{1,0:T(100000000000,100000000000)}")
    assert layout.physical_size((1, 1)) == 10**22
    with pytest.raises(TiledLayoutError, match=r"in 10000000000000000000000 physical elements"
                                               r".*what an array may hold"):
        layout.to_physical(np.zeros((1, 1)))
    with pytest.raises(TiledLayoutError, match="physical elements"):
        layout.from_physical(np.zeros(1), (1, 1))


@pytest.mark.parametrize("text, size", [
    ("{1,0:T(65536,65536)}", 2**32),          # the tile alone holds 2**32 elements
    ("{1,0:T(3000000000,1)}", 6 * 10**9),
])
def test_a_kernel_with_int32_sizes_and_huge_tiles_counts_in_int64(text, size):
    mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 2}))
    kernel = sparsetir.build(apply_tiled_layout(mod, "x", TiledLayout.parse(text)), "llvm")
    a = scipy.sparse.csr_matrix(np.array([[1, 0, 2, 0], [0, 0, 0, 0]], np.float32))
    y = np.full((2, 2), np.nan, np.float32)
    with pytest.raises(ArgumentError, match=f"argument 'x': has 8 elements.* = {size}"):
        kernel(a.data, np.zeros(8, np.float32), y, a.indptr.astype(np.int32),
               a.indices.astype(np.int32), 2, 4, a.nnz)


@pytest.mark.parametrize("text, message", [
    ("{1,0:T(1,4611686018427387905)}", "a size of tile 0 must be at most 4611686018427387904"),
    ("{1,0:T(1,9223372036854775807)}", "must be at most 4611686018427387904"),  # wrapped in TVM
    ("{1,0:T(2²,2)}", "expected ',' or '\\)', found '²'"),
    ("{1,0:T(" + "9" * 5000 + ")}", "a tile size .*of at most 19 digits"),
])
def test_tile_sizes_past_the_kernels_arithmetic_or_not_numbers_are_refused(text, message):
    """A tile of 2**63 - 1 gave a kernel whose tile count wrapped (every call refused with
    a negative size); "²" and a 5000-digit number reached int() (a bare ValueError)."""
    with pytest.raises(TiledLayoutError, match=message):
        TiledLayout.parse(text)


def test_a_tiled_layout_on_an_index_array_is_refused():
    """The call checks index arrays in their logical layout: a tiled one was refused as
    unsorted though valid."""
    mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 2}))
    with pytest.raises(TiledLayoutError, match="'indices' is an index array"):
        apply_tiled_layout(mod, "indices", TiledLayout.parse("{0:T(3)(2)}"))


@pytest.mark.parametrize("fill, message", [(np.nan, "fill nan is not a value of the array's "
                                                    "dtype int8"),
                                           (300, "fill 300 is not"), (1.5, "fill 1.5 is not"),
                                           ("a", "fill must be a number")])
def test_a_padding_fill_the_dtype_cannot_hold_is_refused(fill, message):
    """NaN into an int array was written as INT_MIN; a string raised numpy's ValueError."""
    layout = TiledLayout.parse("{1,0:T(2,3)}")
    with pytest.raises(SparseTIRTypeError, match=message):
        layout.to_physical(np.ones((2, 2), np.int8), fill=fill)
    with pytest.raises(SparseTIRTypeError, match="is not a value of the array's dtype int64"):
        layout.to_physical(np.ones((2, 2), np.int64), fill=float(2**63))   # INT_MIN, rounded
    assert layout.to_physical(np.ones((2, 2), np.int8), fill=-3).tolist() == [1, 1, -3] * 2
