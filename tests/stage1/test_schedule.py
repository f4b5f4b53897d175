"""``sparsetir.Schedule``: Stage I primitives, their checks, and results after building."""

import numpy as np
import pytest
import tvm
from kernel_zoo import CASES
from zoo_check import check_kernel, zoo_inputs

import sparsetir
from sparsetir import Schedule, SparseScheduleError
from sparsetir.script import tir as T


def _run(func, name, size="small"):
    check_kernel(sparsetir.build(func, "llvm"), func, name, zoo_inputs(name, size))


def test_sparse_fuse_of_sddmm_is_the_hand_written_fused_sddmm():
    sch = Schedule(CASES["sddmm"].func)
    it = sch.get_sparse_iteration("sddmm")
    i, j, _ = sch.get_sp_iters(it)
    sch.sparse_fuse(it, [i, j])
    expected = sparsetir.script.from_source(
        CASES["fused_sddmm"].func.script().replace('"fused_sddmm"', '"sddmm"')
        .replace("def fused_sddmm", "def sddmm"))
    tvm.ir.assert_structural_equal(sch.func, expected)
    _run(sch.func, "sddmm")


def test_sparse_fuse_of_csr2bsr_whose_store_searches_by_the_fused_row():
    """The fused row's position becomes a table; the search of B's block column, which
    depends on that row, reads the table too (it was left with an undefined variable)."""
    sch = Schedule(CASES["csr2bsr"].func)
    i, j = sch.get_sp_iters("csr2bsr")
    sch.sparse_fuse("csr2bsr", [i, j])
    _run(sch.func, "csr2bsr")


@T.prim_func
def scale_csf(a: T.handle, y: T.handle, indptr_j: T.handle, indices_j: T.handle,
              indptr_k: T.handle, indices_k: T.handle, m: T.int32, n: T.int32, p: T.int32,
              nnz_j: T.int32, nnz_k: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz_j), (indptr_j, indices_j), "int32")
    K = T.sparse_variable(J, (p, nnz_k), (indptr_k, indices_k), "int32")
    A = T.match_sparse_buffer(a, (I, J, K), "float64")
    Y = T.match_sparse_buffer(y, (I, J, K), "float64")
    with T.sp_iter([T.fuse(I, J, K)], "SSS", "scale3") as [i, j, k]:
        Y[i, j, k] = A[i, j, k] * T.Cast("float64", i + 1)


def test_fuse_of_three_levels_of_a_csf_tensor():
    """Every nonzero of a CSF tensor (empty slices and fibres included) scaled by its row
    number plus one, over one fused loop: two row searches in a chain."""
    indptr_j = np.int32([0, 2, 2, 5])               # row 1 is empty
    indices_j = np.int32([0, 3, 1, 2, 3])
    indptr_k = np.int32([0, 1, 3, 3, 5, 6])         # fibre (2, 2) is empty
    indices_k = np.int32([4, 0, 2, 1, 3, 0])
    a = np.arange(1, 7, dtype=np.float64)
    rows = np.repeat(np.arange(3), np.diff(indptr_j))
    expected = a * (np.repeat(rows, np.diff(indptr_k)) + 1)
    tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(scale_csf))     # TVM's own checks pass
    y = np.full(6, np.nan)
    sparsetir.build(scale_csf, "llvm")(a, y, indptr_j, indices_j, indptr_k, indices_k,
                                        3, 4, 5, 5, 6)
    np.testing.assert_array_equal(y, expected)


def test_reorder_bsrmm_to_block_rows_first():
    sch = Schedule(CASES["bsrmm"].func)
    it = sch.get_sparse_iteration("bsrmm")
    i, bi, bj, f, j = sch.get_sp_iters(it)
    sch.sparse_reorder(it, [i, j, bi, bj, f])
    assert [v.var.name for v in sch.get_sp_iters(it)] == ["i", "j", "bi", "bj", "f"]
    assert sch.get_sparse_iteration("bsrmm").kinds == "SRSRS"
    _run(sch.func, "bsrmm")


def test_annotate_reaches_the_first_block():
    sch = Schedule(CASES["csrmm"].func)
    sch.annotate("csrmm", "my_hint", 3)
    stage2 = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(sch.func))
    block = stage2.get(stage2.get_sblock("csrmm0"))
    assert int(block.annotations["my_hint"]) == 3


def test_the_original_function_is_unchanged():
    func = CASES["sddmm"].func
    sch = Schedule(func)
    sch.sparse_fuse("sddmm", ["i", "j"])
    assert not any(v.fused for v in func.body[0].sp_iter_vars)


@pytest.mark.parametrize("primitive,args,message", [
    ("sparse_reorder", (["i", "j"],), "name each of its 3 variables"),
    ("sparse_reorder", (["i", "i", "k"],), "name each of its 3 variables"),
    ("sparse_reorder", (["j", "i", "k"],), "j iterates J, whose parent I is iterated after it"),
    ("sparse_reorder", (["i", "x", "k"],), "x is not a variable of the iteration"),
    ("sparse_fuse", (["i", "k"],), "contiguous"),
    ("sparse_fuse", (["j", "k"],), "without parent"),
    ("sparse_fuse", (["i"],), "at least two"),
    ("annotate", ("", 1), "non-empty string"),
])
def test_bad_arguments_are_refused_by_name(primitive, args, message):
    sch = Schedule(CASES["sddmm"].func)
    before = sch.func
    with pytest.raises(SparseScheduleError, match=message):
        getattr(sch, primitive)("sddmm", *args)
    assert sch.func.same_as(before)


def test_fuse_needs_a_parent_chain():
    sch = Schedule(CASES["csrmm"].func)     # [I, J, K]: K's parent is not J
    sch.sparse_reorder("csrmm", ["i", "k", "j"])
    with pytest.raises(SparseScheduleError, match="contiguous|parent chain|all be spatial"):
        sch.sparse_fuse("csrmm", ["i", "k"])


def test_reorder_cannot_split_a_fused_group():
    """A fused group is one loop: its variables stay together and in order (this used to build
    an iteration the lowering could not read)."""
    sch = Schedule(CASES["fused_sddmm"].func)          # [T.fuse(I, J), K]
    before = sch.func
    with pytest.raises(SparseScheduleError, match=r"sparse_reorder\(fused_sddmm\): .*"
                                                  r"T.fuse\(I, J\) must iterate its axes together"):
        sch.sparse_reorder("fused_sddmm", ["i", "k", "j"])
    assert sch.func.same_as(before)


def test_a_nested_iteration_is_scheduled_in_place():
    """Only the iterations on the way to the one scheduled are rebuilt; the rest is kept."""
    func = CASES["sparse_softmax"].func            # sparse_softmax holds row_max, exp_sum, ...
    sch = Schedule(func)
    sch.annotate("exp_sum", "hint", 1)
    outer, new_outer = func.body[0], sch.func.body[0]
    assert [it.name for it in new_outer.body] == [it.name for it in outer.body]
    assert dict(sch.get_sparse_iteration("exp_sum").annotations) == {"hint": 1}
    assert dict(new_outer.annotations) == dict(outer.annotations)
    changed = [not new.same_as(old) for new, old in zip(new_outer.body, outer.body)]
    assert changed == [it.name == "exp_sum" for it in outer.body]
    for name in ("params", "axes", "buffers"):
        assert all(a.same_as(b) for a, b in zip(getattr(sch.func, name), getattr(func, name)))


def test_unknown_iteration():
    with pytest.raises(SparseScheduleError, match="no sparse iteration 'x'.*csrmm"):
        Schedule(CASES["csrmm"].func).get_sparse_iteration("x")


def _cyclic():
    cycle = []
    cycle.append(cycle)
    return cycle


@pytest.mark.parametrize("value,named", [
    (object(), "the value of type object"), (None, "the value of type NoneType"),
    ({1, 2}, "the value of type set"), (1 + 2j, "the value of type complex"),
    (np.array([1, 2]), "the value of type ndarray"),
    (2 ** 70, r"the value \d+ \(int past 64 bits\)"),
    ([1, object()], r"the value\[1\] of type object"),
    ({"a": {"b": b"x"}}, r"the value\['a'\]\['b'\] of type bytes"),
    ({(1, 2): 3}, r"the key \(1, 2\) of the value \(type tuple\)"),
    (_cyclic(), r"the value(\[0\])+ \(lists or dicts nested more than 32 deep, or cyclic\)"),
])
def test_annotate_refuses_what_a_block_annotation_cannot_hold(value, named):
    """Refused when annotated, naming the key and the type, not later inside build."""
    sch = Schedule(CASES["csrmm"].func)
    before = sch.func
    with pytest.raises(TypeError, match=rf"annotate\(csrmm, 'hint'\): .*cannot hold {named}"):
        sch.annotate("csrmm", "hint", value)
    assert sch.func.same_as(before)


def test_annotate_keeps_what_tvm_holds_and_builds():
    values = {"flag": True, "n": np.int64(3), "x": np.float32(1.5), "s": "text",
              "e": tvm.tirx.const(2, "int32"), "nested": {"a": [1, 2.5, "b"], 3: (True,)}}
    sch = Schedule(CASES["csrmm"].func)
    for key, value in values.items():
        sch.annotate("csrmm", key, value)
    stage2 = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(sch.func))
    block = stage2.get(stage2.get_sblock("csrmm0"))
    assert int(block.annotations["n"]) == 3 and float(block.annotations["x"]) == 1.5
    sparsetir.build(sch.func.specialize({"feat_size": 4}), "llvm")


@pytest.mark.parametrize("mask", ["all", "none", 0, 15, np.int64(3)])
def test_debug_mask_of_sparsetir_is_accepted(mask):
    sch = Schedule(CASES["csrmm"].func, debug_mask=mask)
    assert sch.func.same_as(CASES["csrmm"].func)


@pytest.mark.parametrize("mask", ["some", -1, True, 1.5, None])
def test_unknown_debug_mask_is_refused_by_name(mask):
    with pytest.raises(ValueError, match=r"debug_mask must be one of 'none', 'all' or a "
                                         r"non-negative int, got"):
        Schedule(CASES["csrmm"].func, debug_mask=mask)


def test_handle_follows_the_iteration_through_primitives():
    """SparseTIR's random variable: get_sparse_iteration's handle stays valid after annotate,
    sparse_reorder and sparse_fuse; sch.get gives the iteration as it is now, and the handle
    reads its attributes from there (so callers that used the iteration itself still work)."""
    func = CASES["sddmm"].func
    sch = Schedule(func)
    rv = sch.get_sparse_iteration("sddmm")
    assert sch.get(rv).same_as(func.body[0]) and rv.name == "sddmm"
    sch.annotate(rv, "guard", True)
    assert sch.get(rv).annotations["guard"] and rv.annotations["guard"]
    sch.sparse_reorder(rv, ["i", "j", "k"])
    i, j, _ = sch.get_sp_iters(rv)
    sch.sparse_fuse(rv, [i, j])
    now = sch.get(rv)
    assert now.same_as(sch.func.body[0]) and not now.same_as(func.body[0])
    assert now.sp_iter_vars[0].fused is not None and rv.kinds == "SSR"
    assert rv.annotations["guard"]
    assert repr(rv) == "SparseIterationRV('sddmm')"


def test_a_handle_or_iteration_is_found_by_name():
    """As before handles existed: an iteration (or a handle) names the iteration of this
    schedule with its name, whichever schedule it came from."""
    func = CASES["csrmm"].func
    sch = Schedule(func)
    sch.annotate(Schedule(func).get_sparse_iteration("csrmm"), "k", 1)
    sch.annotate(func.body[0], "k2", 2)
    assert dict(sch.get("csrmm").annotations) == {"k": 1, "k2": 2}


def test_get_of_something_else_is_refused():
    with pytest.raises(SparseScheduleError, match="expected a sparse iteration, its handle or "
                                                  "its name, got 3"):
        Schedule(CASES["csrmm"].func).get(3)
