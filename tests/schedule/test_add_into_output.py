"""``schedule.accumulator.add_into_output``: an atomic reduction summed in registers.

On the row-segment SpMM (``ops.kernels.spmm_segments``) after ``cache_write`` and
``decompose_reduction``: the cache starts from zero, its write-back adds into the output and is
the one atomic block, the module passes TVM's checks, and blocks that are not such inits are
refused by name. (What the result computes is checked against scipy, emulated in both thread
orders, in ``test_operator_schedules_cuda.py``.)
"""

from __future__ import annotations

import pytest
import tvm
import tvm_ffi
from tvm import s_tir

import sparsetir
from sparsetir.ir.attrs import ATOMIC_ANNOTATION
from sparsetir.ops.kernels import spmm_segments
from sparsetir.schedule.accumulator import add_into_output


def _decomposed(scope: str = "local", inside_reduction: bool = False):
    """(the module after cache_write + decompose_reduction, the init block's name)."""
    sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(
        spmm_segments.specialize({"feat_size": 8})))
    update = sch.get_sblock("spmm1")
    nonzeros, features = sch.get_loops(update)
    if not inside_reduction:
        sch.reorder(features, nonzeros)       # a feature's sum over the segment's nonzeros
    sch.reverse_compute_at(sch.cache_write(update, 0, scope), features)
    init = sch.decompose_reduction(update, nonzeros)
    return sch.mod, sch.get(init).name_hint


def _blocks(mod) -> dict:
    blocks = {}

    def on_block(block):
        blocks[block.name_hint] = block
    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, on_block), order="pre")
    return blocks


def test_the_write_back_alone_adds_atomically():
    mod, init = _decomposed()
    before = _blocks(mod)
    assert ATOMIC_ANNOTATION in before["spmm0"].annotations    # the iteration's, from Stage I
    after_mod = add_into_output(mod, [init])
    tvm.s_tir.Schedule(after_mod)                               # TVM's own checks pass
    after = _blocks(after_mod)
    assert [name for name, b in after.items() if ATOMIC_ANNOTATION in b.annotations] == \
        ["Y_local"]
    assert float(after[init].body.value) == 0.0
    back = after["Y_local"].body
    assert back.buffer.name == "Y" and back.value.a.source.name == "Y"   # Y = Y + Y_local
    assert back.value.b.source.name == "Y_local"
    assert any(region.source.name == "Y" for region in after["Y_local"].reads)


def test_other_blocks_are_refused():
    mod, _ = _decomposed()
    with pytest.raises(ValueError, match="zero0 is not an init that keeps its cache"):
        add_into_output(mod, ["zero0"])
    with pytest.raises(ValueError, match="no init block named nothing"):
        add_into_output(mod, ["nothing"])


def test_a_cache_other_threads_share_is_refused():
    mod, init = _decomposed("shared")
    with pytest.raises(ValueError, match="in 'shared' memory, not a thread's own"):
        add_into_output(mod, [init])


def test_a_write_back_inside_the_reduction_loop_is_refused():
    """It would add the running sum at every nonzero."""
    mod, init = _decomposed(inside_reduction=True)
    with pytest.raises(ValueError, match="inside the loop of the reduction into its cache"):
        add_into_output(mod, [init])
