"""``lower_sparse_buffer`` flattens buffers and leaves the user's schedule as it was."""

import tvm_ffi
from kernel_zoo import CASES
from tvm import s_tir, tirx

import sparsetir
from sparsetir.ir.attrs import STAGE2_SHAPES_KEY, stage2_shapes


def _scheduled_bsrmm():
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["bsrmm"].func.specialize(
        {"blk": 4, "feat_size": 32})), enable_check=False)
    block = sch.get_sblock("bsrmm0")
    i, bi, bj, f = sch.get_loops(block)
    _, f_inner = sch.split(f, [None, 8])
    sch.vectorize(f_inner)
    sch.unroll(bj)
    sch.parallel(i)
    sch.annotate(block, "user.note", 1)
    return sch.mod


def _schedule_facts(mod):
    """Loops and block annotations, without the root block's record of the Stage II shapes
    (which flattening adds)."""
    loops, blocks = [], []
    tvm_ffi.structural_walk(mod["main"].body, [(tirx.For, loops.append),
                                              (s_tir.SBlock, blocks.append)], order="pre")
    return ([(str(lp.loop_var.name), lp.kind, str(lp.extent)) for lp in loops],
            [(b.name_hint, sorted(k for k in b.annotations.keys() if k != STAGE2_SHAPES_KEY))
             for b in blocks])


def test_schedule_is_untouched_and_buffers_are_flat():
    scheduled = _scheduled_bsrmm()
    flat = sparsetir.lower_sparse_buffer(scheduled)
    assert _schedule_facts(flat) == _schedule_facts(scheduled)
    shapes = {p.name: len(p.shape) for p in flat["main"].params if tirx.is_buffer_var(p)}
    assert shapes == {"A": 1, "B": 1, "C": 1, "J_indptr": 1, "J_indices": 1}
    assert len(scheduled["main"].params[0].shape) == 3          # A was [nnzb, 4, 4]
    recorded = stage2_shapes(flat["main"])
    assert [str(d) for d in recorded["A"]] == ["nnzb", "4", "4"]
    assert recorded["A"][0].same_as(flat["main"].params[-1])    # the parameter nnzb itself


def test_flattening_twice_changes_nothing():
    flat = sparsetir.lower_sparse_buffer(_scheduled_bsrmm())
    assert sparsetir.lower_sparse_buffer(flat)["main"].same_as(flat["main"])
