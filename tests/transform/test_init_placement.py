"""Where ``T.init`` lands in Stage II, so that it runs for every output element.

TVM runs a block's init when the block's reduction variables start; under a loop whose extent
comes from ``indptr`` that never happens for an empty row. The numeric tests (outputs filled
with NaN, inputs with empty rows) check the effect; these check the structure.
"""

import tvm_ffi
from kernel_zoo import CASES
from tvm import s_tir, tirx

import sparsetir


def _blocks(name):
    found = []
    func = sparsetir.lower_sparse_iter(CASES[name].func)["main"]
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, found.append), order="pre")
    return {b.name_hint: b for b in found}, [b.name_hint for b in found]


def test_csrmm_init_is_a_block_before_the_data_dependent_reduction():
    blocks, order = _blocks("csrmm")
    assert order == ["root", "csrmm0", "csrmm_init0", "csrmm1"]
    assert blocks["csrmm1"].init is None
    store = blocks["csrmm_init0"].body
    assert isinstance(store, tirx.BufferStore) and store.value.value == 0.0


def test_bsrmm_keeps_a_native_init_above_the_data_dependent_loop():
    blocks, order = _blocks("bsrmm")
    assert order == ["root", "bsrmm0", "bsrmm1"]
    assert blocks["bsrmm0"].init is not None       # its reduction (bj) has a fixed extent
    assert blocks["bsrmm1"].init is None


def test_segment_reduce_init_has_no_loop_of_its_own():
    blocks, order = _blocks("segment_reduce")
    assert order == ["root", "segment_reduce0", "segment_reduce_init", "segment_reduce1"]


def test_init_is_hoisted_when_a_spatial_variable_does_not_index_the_output():
    # rgcn_hetero: relation r is spatial, but Y[i, fo] does not depend on it
    _, order = _blocks("rgcn_hetero_forward")
    assert order.index("rgcn_hetero_forward_init0") < order.index("rgcn_hetero_forward0")
