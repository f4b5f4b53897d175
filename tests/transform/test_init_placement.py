"""Where ``T.init`` lands, so that TVM sees reductions and the init runs for every output.

Stage II keeps ``T.init`` as the native init of the block of the first reduction loop, which
makes that block a reduction block for TVM's checked primitives. ``lower_sparse_buffer`` then
decomposes every reduction whose loops may be empty (an empty row, a zero feature size), so
the init runs before the reduction loop instead of at its first iteration. The numeric tests
(outputs filled with NaN, inputs with empty rows, zero extents) check the effect; these check
the structure.
"""

import pytest
import tvm_ffi
from kernel_zoo import CASES
from tvm import s_tir, tirx

import sparsetir


def _blocks(mod):
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, found.append), order="pre")
    return {b.name_hint: b for b in found}, [b.name_hint for b in found]


def _stage2(name, values=None):
    func = CASES[name].func
    return sparsetir.lower_sparse_iter(func.specialize(values) if values else func)


def test_csrmm_init_is_native_in_stage2_and_hoisted_before_the_row_in_stage3():
    mod = _stage2("csrmm")
    blocks, order = _blocks(mod)
    assert order == ["root", "csrmm0", "csrmm1"]
    assert blocks["csrmm1"].init is not None and blocks["csrmm0"].init is None
    blocks, order = _blocks(sparsetir.lower_sparse_buffer(mod))
    assert order == ["root", "csrmm0", "csrmm1_init", "csrmm1_update"]
    store = blocks["csrmm1_init"].body
    assert isinstance(store, tirx.BufferStore) and store.value.value == 0.0
    assert blocks["csrmm1_update"].init is None


def test_bsrmm_init_sits_in_the_block_of_its_first_reduction():
    blocks, order = _blocks(_stage2("bsrmm"))
    assert order == ["root", "bsrmm0", "bsrmm1"]
    assert blocks["bsrmm0"].init is not None       # bj is bsrmm0's reduction variable
    assert blocks["bsrmm1"].init is None


def test_segment_reduce_init_is_a_block_without_loops_before_the_row():
    _, order = _blocks(sparsetir.lower_sparse_buffer(_stage2("segment_reduce")))
    assert order == ["root", "segment_reduce0", "segment_reduce1_init", "segment_reduce1_update"]


@pytest.mark.parametrize("values,decomposed", [({"col": 4, "blk": 2}, False),
                                               ({"blk": 2}, True), ({"col": 4}, True)])
def test_only_reductions_that_may_be_empty_are_decomposed(values, decomposed):
    # ellmm reduces over j (extent col) and bj (extent blk)
    blocks, _ = _blocks(sparsetir.lower_sparse_buffer(_stage2("ellmm", values)))
    assert ("ellmm0_init" in blocks) == decomposed
    assert ("ellmm0" in blocks) != decomposed


def test_init_of_a_spatial_point_not_in_the_output_runs_per_point():
    # rgcn_hetero: relation r is spatial but Y[i, fo] ignores it; the init is per (fo, r, i)
    blocks, _ = _blocks(_stage2("rgcn_hetero_forward"))
    assert [name for name, b in blocks.items() if b.init is not None] == \
        ["rgcn_hetero_forward2"]
