"""The CPU hyb kernel runs row tile ``t`` of every bucket in one thread and adds into ``Y``
without atomics, so it is right only when each row is in one tile, the same in every bucket.
A per-bucket ``tile_ptr`` that gives one row to two tiles passed validation and raced (223 of
300 calls wrong with two threads): ``HybLayout.arguments`` now refuses it by name
(``check_tiles``), and valid tilings still give scipy's answer."""

import numpy as np
import pytest

from sparsetir import ArgumentError
from sparsetir.format import row_tiles
from sparsetir.ops import SparseMatrix
from sparsetir.ops.hyb import HybConfig, HybLayout, check_tiles, hyb_kernel
from sparse_inputs import skewed_csr

CONFIG = HybConfig(2, (1, 2, 4), 8)


@pytest.fixture(scope="module")
def setup():
    A = skewed_csr(300, 80, seed=1, density=0.04)     # empty rows, a row longer than 4
    M = SparseMatrix(A)
    kernel, func = hyb_kernel(CONFIG, 16)
    X = np.random.default_rng(0).standard_normal((80, 16)).astype(np.float32)
    return A, M, kernel, func, X


def _layout(M):
    return HybLayout.of(M, CONFIG.parts, CONFIG.widths, CONFIG.tiles)


def _run(setup, layout):
    A, M, kernel, func, X = setup
    Y = np.full((A.shape[0], 16), np.nan, np.float32)
    kernel(*layout.arguments(func.params, M, X, Y))
    return Y, A @ X


def test_a_tiling_that_shares_rows_between_threads_is_refused(setup):
    """Partition 0 all in tile 0 and partition 1 all in the last tile: two threads add into
    every row at once. 300 calls: before, most were wrong; now the first is refused."""
    M = setup[1]
    layout = _layout(M)
    for name in CONFIG.rule_names():
        n = layout.arrays["nrows_" + name]
        cut = n if name.startswith("p0") else 0
        layout.arrays["tile_ptr_" + name] = np.array([0] + [cut] * (CONFIG.tiles - 1) + [n],
                                                     np.int32)
    with pytest.raises(ValueError, match=r"tile_ptr_p\db\d puts row \d+ in tile \d, but tile "
                                         r"\d writes that row too"):
        for _ in range(300):
            Y, expected = _run(setup, layout)
            np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)


def test_the_kernel_itself_refuses_such_a_tiling(setup):
    """The same tiling passed straight to the kernel of ``hyb_kernel`` (not through
    ``HybLayout.arguments``): the kernel's own argument check refuses it, before anything
    runs, and a bound kernel refuses it at ``bind``."""
    A, M, kernel, func, X = setup
    layout = _layout(M)
    for name in CONFIG.rule_names():
        n = layout.arrays["nrows_" + name]
        cut = n if name.startswith("p0") else 0
        layout.arrays["tile_ptr_" + name] = np.array([0] + [cut] * (CONFIG.tiles - 1) + [n],
                                                     np.int32)
    Y = np.full((A.shape[0], 16), np.nan, np.float32)
    values = dict(layout.arrays, a=M.data, x=X, y=Y, indptr=M.indptr, indices=M.indices,
                  m=A.shape[0], n=A.shape[1], nnz=M.nnz)
    with pytest.raises(ArgumentError, match=r"tile_ptr_p\db\d puts row \d+ in tile"):
        kernel(*[values[p.name] for p in func.params])
    assert np.isnan(Y).all()                        # refused before the kernel ran
    fixed = {p.name: values[p.name] for p in func.params if p.name not in ("x", "y")}
    with pytest.raises(ArgumentError, match="writes that row too"):
        kernel.bind(**fixed)
    good = dict(values, **_layout(M).arrays)
    kernel(*[good[p.name] for p in func.params])
    np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)


def test_a_long_rows_pieces_split_over_tiles_are_refused():
    """Within one bucket: the pieces of row 7 (longer than the widest bucket) in two tiles."""
    config = HybConfig(1, (2,), 2)
    arrays = {"rows_p0b0": np.array([3, 7, 7, 7]), "tile_ptr_p0b0": np.array([0, 2, 4])}
    with pytest.raises(ValueError, match="tile_ptr_p0b0 puts row 7 in tile"):
        check_tiles(config, arrays, 10)
    arrays["tile_ptr_p0b0"] = np.array([0, 1, 4])
    check_tiles(config, arrays, 10)


@pytest.mark.parametrize("tile_ptr, message", [
    ([0, 4], "no row tiling of 2 tiles: indptr has 2 entries"),
    ([0, 3, 2], "no row tiling of 2 tiles: indptr must start at 0 and end"),
    ([0, 5, 4], "indptr is not monotone"), ([0.0, 1.0, 4.0], "must hold integers")])
def test_tile_pointers_that_are_no_tiling_are_refused(tile_ptr, message):
    arrays = {"rows_p0b0": np.array([3, 7, 7, 7]), "tile_ptr_p0b0": np.array(tile_ptr)}
    with pytest.raises(ValueError, match=message):
        check_tiles(HybConfig(1, (2,), 2), arrays, 10)


def test_valid_tilings_give_scipys_answer(setup):
    """HybLayout.of's balanced tiles, and tiles of 38 rows cut by row_tiles in every bucket
    (some tiles then empty in some buckets)."""
    M = setup[1]
    Y, expected = _run(setup, _layout(M))
    np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)
    layout = _layout(M)
    for name in CONFIG.rule_names():
        layout.arrays["tile_ptr_" + name] = row_tiles(layout.arrays["rows_" + name],
                                                      M.shape[0], 38)
    Y, expected = _run(setup, layout)
    np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)
