"""``sparsetir.ir.structural_equal`` / ``assert_structural_equal``: names ignored, short diffs."""

import pytest
import tvm
from kernel_zoo import CASES

import sparsetir
from sparsetir.ir import assert_structural_equal, equality, replace, structural_equal


def _fused_sddmm_by_schedule():
    sch = sparsetir.Schedule(CASES["sddmm"].func)
    sch.sparse_fuse("sddmm", ["i", "j"])
    return sch.func


def test_functions_differing_only_in_name_are_equal():
    func = CASES["csrmm"].func
    renamed = replace(func, name="expected_csrmm")
    assert structural_equal(func, renamed)
    assert_structural_equal(func, renamed)
    tvm.ir.assert_structural_equal(func, renamed)        # TVM's own assertion agrees


def test_mismatch_shows_the_path_and_a_short_diff():
    """The zoo's fused_sddmm names its iteration fused_sddmm, sparse_fuse keeps sddmm."""
    with pytest.raises(ValueError) as failure:
        assert_structural_equal(_fused_sddmm_by_schedule(), CASES["fused_sddmm"].func)
    message = str(failure.value)
    assert message.startswith("structural mismatch at lhs <root>.body[0].name")
    assert '-    with T.sp_iter([T.fuse(I, J), K], "SSR", "sddmm") as [i, j, k]:' in message
    assert '+    with T.sp_iter([T.fuse(I, J), K], "SSR", "fused_sddmm") as [i, j, k]:' in message
    assert "def " not in message         # the function names take no part
    assert len(message) < 2000


def test_long_diffs_are_cut(monkeypatch):
    monkeypatch.setattr(equality, "MAX_DIFF_LINES", 6)
    with pytest.raises(ValueError, match=r"\n\.\.\. \(\d+ more diff lines\)$") as failure:
        assert_structural_equal(CASES["csrmm"].func, CASES["rgcn_hetero_forward"].func)
    assert len(str(failure.value).splitlines()) == 6 + 2


def test_map_free_vars_matches_undefined_variables():
    a, b = tvm.tirx.Var("a", "int32"), tvm.tirx.Var("b", "int32")
    assert not structural_equal(a + 1, b + 1)
    assert structural_equal(a + 1, b + 1, map_free_vars=True)
    with pytest.raises(ValueError, match="structural mismatch"):
        assert_structural_equal(a + 1, b + 1)
    assert_structural_equal(a + 1, b + 1, True)
