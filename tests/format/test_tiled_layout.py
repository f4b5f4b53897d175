"""XLA's tiled layouts (``sparsetir.format.TiledLayout``): the facts of ``xla/tiled_layout.md``,
and SpMM reading its dense operand through a layout (``apply_tiled_layout``).

The expected positions are written by hand from XLA's definition (tiles in row-major order,
elements row-major in each tile, padding to whole tiles), not from our own output.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.errors import ArgumentError, SparseTIRTypeError
from sparsetir.format import TiledLayout, TiledLayoutError, apply_tiled_layout
from sparsetir.format.tiled_layout import COMBINE
from sparsetir.ops.kernels import spmm as csrmm


def positions(layout, shape):
    """The linear index of every element of an array of ``shape``."""
    return layout.linear_index(tuple(np.indices(shape)), shape)


def test_figure_1_element_2_3():
    layout = TiledLayout.parse("F32[3,5]{1,0:T(2,2)}")
    assert layout.shape == (3, 5) and layout.dtype == np.float32
    assert layout.minor_to_major == (1, 0) and layout.tiles == ((2, 2),)
    assert layout.tiled_shape() == (2, 3, 2, 2)
    assert layout.tiled_index((2, 3)) == (1, 1, 0, 1)     # tile (1, 1), in the tile (0, 1)
    assert layout.linear_index((2, 3)) == 17
    assert layout.physical_size() == 24


def test_figure_1_every_element():
    # 2 x 3 tiles of 2 x 2: tile (r, c) starts at 4 * (3 r + c)
    expected = [[0, 1, 4, 5, 8],
                [2, 3, 6, 7, 10],
                [12, 13, 16, 17, 20]]
    layout = TiledLayout.parse("{1,0:T(2,2)}")
    np.testing.assert_array_equal(positions(layout, (3, 5)), expected)
    assert layout.physical_size((3, 5)) == 24


def test_repeated_tiling_figure_2():
    # 2x4 tiles (row-major), in each tile 2x1 sub-tiles (row-major), each sub-tile a column pair
    expected = [[0, 2, 4, 6, 8, 10, 12, 14],
                [1, 3, 5, 7, 9, 11, 13, 15],
                [16, 18, 20, 22, 24, 26, 28, 30],
                [17, 19, 21, 23, 25, 27, 29, 31]]
    layout = TiledLayout.parse("{1,0:T(2,4)(2,1)}")
    np.testing.assert_array_equal(positions(layout, (4, 8)), expected)
    assert layout.tiled_shape((4, 8)) == (2, 2, 1, 4, 2, 1)


def test_second_tile_over_the_tile_grid():
    # xla/tiled_layout.md, alternative 16-bit packing: (6, 5) of an 8x8 array tiled (2,4)(2,1,1,1)
    layout = TiledLayout.parse("{1,0:T(2,4)(2,1,1,1)}")
    assert layout.tiled_index((6, 5), (8, 8)) == (1, 1, 0, 1, 1, 0, 0, 0)
    assert layout.linear_index((6, 5), (8, 8)) == 51


def test_tpu_bf16_tiling_pads_to_whole_tiles():
    layout = TiledLayout.parse("S16[20,300]{1,0:T(8,128)(2,1)}")
    assert layout.physical_size() == 24 * 384
    where = positions(layout, (20, 300))
    assert len(np.unique(where)) == 20 * 300 and where.max() < 24 * 384
    assert where[0, 0] == 0 and where[1, 0] == 1 and where[0, 1] == 2    # rows paired


def test_combining_dimensions_is_the_reshaped_layout():
    combined = TiledLayout.parse("F32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    flat = TiledLayout.parse("F32[112,110]{1,0:T(2,3)}")
    assert combined.tiled_shape() == flat.tiled_shape() == (56, 37, 2, 3)
    assert combined.tiles == ((COMBINE, COMBINE, 2, COMBINE, 3),)
    np.testing.assert_array_equal(positions(combined, (2, 7, 8, 11, 10)),
                                  positions(flat, (112, 110)).reshape(2, 7, 8, 11, 10))
    x = np.random.default_rng(0).random((2, 7, 8, 11, 10)).astype(np.float32)
    np.testing.assert_array_equal(combined.to_physical(x), flat.to_physical(x.reshape(112, 110)))


def test_minor_to_major_orders_the_dimensions():
    shape = (3, 4, 5)
    for order in [(2, 1, 0), (0, 1, 2), (1, 2, 0), (2, 0, 1)]:
        layout = TiledLayout(order)
        physical = np.transpose(np.arange(60).reshape(shape), order[::-1]).ravel()
        # element k (row-major in the logical array) lies where ``physical`` holds k
        where = np.argsort(physical)
        np.testing.assert_array_equal(positions(layout, shape).ravel(), where)
    # column-major 3x5 tiled 2x2: the tiles cover the physical (5, 3) array
    layout = TiledLayout.parse("{0,1:T(2,2)}")
    transposed = TiledLayout.parse("{1,0:T(2,2)}")
    np.testing.assert_array_equal(positions(layout, (3, 5)), positions(transposed, (5, 3)).T)


def test_tile_on_the_minor_dimensions_only():
    layout = TiledLayout.parse("{2,1,0:T(2,2)}")
    # each of the 2 leading slices is a 3x5 array tiled as in figure 1, 24 elements apart
    where = positions(layout, (2, 3, 5))
    np.testing.assert_array_equal(where[1] - where[0], 24)
    np.testing.assert_array_equal(where[0], positions(TiledLayout.parse("{1,0:T(2,2)}"), (3, 5)))


@pytest.mark.parametrize("text", [
    "{1,0:T(2,2)}", "f32[3,5]{1,0:T(2,2)}", "{1,0:T(8,128)(2,1)}", "{0,1}", "{}", "f64[]{}",
    "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}", "bf16[32,256]{1,0:T(8,128)(2,1,1,1)}",
    "s8[0,3]{0,1:T(4)}", "pred[4]{0:T(1024)}"])
def test_text_prints_back(text):
    layout = TiledLayout.parse(text)
    assert str(layout) == text
    assert TiledLayout.parse(str(layout)) == layout


def test_text_in_other_spellings():
    assert TiledLayout.parse(" F32 [3, 5] { 1 , 0 : T( 2, 2 ) } ") == \
        TiledLayout.parse("f32[3,5]{1,0:T(2,2)}")
    assert TiledLayout.parse("{1,0:T(2,2)}") == TiledLayout((1, 0), ((2, 2),))


def test_to_physical_and_back():
    layout = TiledLayout.parse("{1,0:T(2,4)(2,1)}")
    x = np.arange(15, dtype=np.float64).reshape(3, 5) + 1
    flat = layout.to_physical(x, fill=np.nan)
    assert flat.shape == (layout.physical_size((3, 5)),) == (32,) and flat.dtype == np.float64
    assert np.isnan(flat).sum() == 32 - 15                          # the padding
    assert flat[2] == x[0, 1] and flat[1] == x[1, 0] and flat[16] == x[2, 0]
    np.testing.assert_array_equal(layout.from_physical(flat, (3, 5)), x)
    empty = layout.to_physical(np.zeros((0, 5)))
    assert layout.from_physical(empty, (0, 5)).shape == (0, 5)


def test_arrays_of_indices_broadcast():
    layout = TiledLayout.parse("{1,0:T(2,2)}")
    rows = np.array([[0], [2]])
    got = layout.linear_index((rows, np.arange(5)), (3, 5))
    np.testing.assert_array_equal(got, [[0, 1, 4, 5, 8], [12, 13, 16, 17, 20]])


@pytest.mark.parametrize("text, column, words", [
    ("{1,0:T(2,x)}", 10, "tile size"),
    ("F32[3,5]{1,0:T(2,2)", 20, "'}'"),
    ("G32[3]{0}", 1, "element type"),
    ("f32[<=3]{0}", 5, "static array bound"),
    ("{1,0:E(16)}", 6, "only tiles"),
    ("{1,0}x", 6, "end of the layout"),
    ("{1,1}", 2, "not a permutation"),
    ("{0,2}", 2, "not a permutation"),
    ("f32[3]{1,0}", 5, "1 dimensions"),
    ("{1,0:T(0,2)}", 7, "at least 1"),
    ("{1,0:T(2,*)}", 7, "ends in '*'"),
    ("{0:T(2,2)}", 5, "between 1 and 1"),
    ("{1,0:T(2,2)(3,3,3,3,3)}", 12, "tile 1 has 5 sizes"),
    ("{1,0:T()}", 7, "tile 0 has 0 sizes"),
])
def test_bad_text_names_the_column(text, column, words):
    with pytest.raises(TiledLayoutError, match=f"column {column} of ") as err:
        TiledLayout.parse(text)
    assert words in str(err.value)


def test_bad_arguments():
    layout = TiledLayout.parse("F32[3,5]{1,0:T(2,2)}")
    with pytest.raises(SparseTIRTypeError, match="dtype float64.*float32"):
        layout.to_physical(np.zeros((3, 5)))
    with pytest.raises(TiledLayoutError, match=r"not the layout's own \(3, 5\)"):
        layout.to_physical(np.zeros((3, 4), np.float32))
    with pytest.raises(TiledLayoutError, match=r"index entry 1 is outside \[0, 5\)"):
        layout.linear_index((0, 5))
    with pytest.raises(SparseTIRTypeError, match="index entry 0 must hold integers"):
        layout.linear_index((np.array([0.5]), np.array([1])))
    with pytest.raises(TiledLayoutError, match="index has 1 entries"):
        layout.linear_index((1,))
    with pytest.raises(TiledLayoutError, match="1-D array of the 24 physical elements"):
        layout.from_physical(np.zeros(15, np.float32))
    with pytest.raises(TiledLayoutError, match="has no shape: pass shape"):
        TiledLayout.parse("{1,0}").physical_size()
    with pytest.raises(SparseTIRTypeError, match="must be an integer"):
        TiledLayout((1, 0), ((2.5, 2),))
    with pytest.raises(SparseTIRTypeError, match="tiles must be a tuple of tiles"):
        TiledLayout((1, 0), (2, 2))


# -- a kernel's dense operand stored tiled (apply_tiled_layout) --------------------------------

ROWS, COLS, FEAT = 8, 7, 6


@pytest.fixture(scope="module")
def spmm_case():
    """A CSR matrix with empty rows and columns, X, and the lowered CSR SpMM (6 features)."""
    rng = np.random.default_rng(7)
    dense = ((rng.random((ROWS, COLS)) < 0.4) * rng.standard_normal((ROWS, COLS)))
    dense[2] = 0
    dense[:, 3] = 0
    a = scipy.sparse.csr_matrix(dense.astype(np.float32))
    a.indptr, a.indices = a.indptr.astype(np.int32), a.indices.astype(np.int32)
    x = rng.standard_normal((COLS, FEAT)).astype(np.float32)
    return a, x, sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": FEAT}))


def call(kernel, a, flat):
    y = np.full((ROWS, FEAT), np.nan, np.float32)
    kernel(a.data, flat, y, a.indptr, a.indices, ROWS, COLS, a.nnz)
    return y


def schedule_rows(mod):
    """Rows in parallel, features vectorised (examples/spmm_csr.py's schedule)."""
    sch = tvm.s_tir.Schedule(mod)
    (rows,) = sch.get_loops(sch.get_sblock("spmm0"))
    _, feature = sch.get_loops(sch.get_sblock("spmm1"))
    sch.vectorize(sch.split(feature, [None, 2])[1])
    sch.parallel(rows)
    return sch.mod


@pytest.mark.parametrize("text, schedule", [
    ("{1,0:T(2,4)}", None),             # rows and features padded
    ("{0,1:T(4,2)}", None),             # column-major tiles
    ("{1,0:T(4,4)(2,1)}", "after"),     # repeated tiling, scheduled after the layout
    ("{1,0:T(2,4)}", "before"),         # the layout applied to a scheduled module
    ("{1,0}", None),                    # untiled row-major: the plain layout
])
def test_spmm_reads_x_through_its_layout(spmm_case, text, schedule):
    a, x, mod = spmm_case
    layout = TiledLayout.parse(text)
    if schedule == "before":
        mod = schedule_rows(mod)
    tiled = apply_tiled_layout(mod, "x", layout)
    tvm.s_tir.Schedule(tiled)                        # TVM's checks, defaults
    kernel = sparsetir.build(schedule_rows(tiled) if schedule == "after" else tiled, "llvm")
    flat = layout.to_physical(x, fill=np.nan)        # padding never contributes
    assert flat.size == layout.physical_size((COLS, FEAT))
    np.testing.assert_allclose(call(kernel, a, flat), a @ x, rtol=1e-5, atol=1e-5)


def test_layout_with_a_shape_needs_the_static_shape(spmm_case):
    a, x, _ = spmm_case
    layout = TiledLayout.parse(f"F32[{COLS},{FEAT}]{{1,0:T(2,3)}}")
    with pytest.raises(TiledLayoutError, match="specialize the kernel"):
        apply_tiled_layout(spmm_case[2], "x", layout)
    static = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": FEAT, "n": COLS}))
    kernel = sparsetir.build(apply_tiled_layout(static, "X", layout), "llvm")
    y = np.full((ROWS, FEAT), np.nan, np.float32)
    kernel(a.data, layout.to_physical(x, fill=np.nan), y, a.indptr, a.indices, ROWS, a.nnz)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="'x'"):          # the flat length is checked
        kernel(a.data, x.ravel(), y, a.indptr, a.indices, ROWS, a.nnz)


def test_the_access_is_the_layouts_index_map(spmm_case):
    mod = spmm_case[2]
    tiled = apply_tiled_layout(mod, "x", TiledLayout.parse("{1,0:T(2,4)}"))

    def x_loads(module):
        found = []
        tvm_ffi.structural_walk(module["main"].body, (tvm.ir.TensorLoad, lambda load: found.append(
            load) if load.source.name == "X" else None), order="pre")
        return found

    row, col = x_loads(mod)[0].indices
    (position,) = x_loads(tiled)[0].indices
    padded_cols = 8                       # 6 features padded to whole tiles of 4
    expected = (tirx.floordiv(row, 2) * (2 * padded_cols) + tirx.floordiv(col, 4) * 8
                + tirx.floormod(row, 2) * 4 + tirx.floormod(col, 4))
    analyzer = tvm.sym.Analyzer()
    tvm.ir.assert_structural_equal(position, analyzer.simplify(expected))
    (x_param,) = [p for p in tiled["main"].params if tirx.is_buffer_var(p) and p.name == "X"]
    assert len(x_param.shape) == 1


def test_bad_layouts_for_a_kernel(spmm_case):
    mod = spmm_case[2]
    with pytest.raises(TiledLayoutError, match="'z' is not a buffer parameter"):
        apply_tiled_layout(mod, "z", TiledLayout.parse("{1,0}"))
    with pytest.raises(TiledLayoutError, match="has 2 dimensions"):
        apply_tiled_layout(mod, "x", TiledLayout.parse("{2,1,0}"))
    with pytest.raises(TiledLayoutError, match="holds float32"):
        apply_tiled_layout(mod, "x", TiledLayout.parse(f"F64[{COLS},{FEAT}]{{1,0}}"))
    with pytest.raises(SparseTIRTypeError, match="must be a TiledLayout"):
        apply_tiled_layout(mod, "x", "{1,0}")
