"""Golden IR of ``lower_sparse_iter`` and ``lower_sparse_buffer`` for the reference kernels.

The expected modules are the TVMScript text in ``golden/test_lowering_golden/``, compared whole
(``golden`` fixture): a change in block structure, loop extents, index arithmetic, search or
init placement, or the function attributes fails here with a unified diff. After a deliberate
change, ``pytest --update-golden tests/lower`` rewrites the files; read their diff. The text
parses back to the same module (``test_lowered_module_prints_and_parses_back``), so the files
are the modules themselves.
"""

import pytest
import tvm
from golden_text import Golden
from kernel_zoo import CASES

import sparsetir

ITER_KERNELS = ["csrmm", "csrmm_dense_iter", "bsrmm", "ellmm", "sddmm", "fused_sddmm"]
BUFFER_KERNELS = ["csrmm", "bsrmm"]


@pytest.mark.parametrize("name", ITER_KERNELS)
def test_lower_sparse_iter_matches_golden(name, golden):
    golden(sparsetir.lower_sparse_iter(CASES[name].func).script())


@pytest.mark.parametrize("name", BUFFER_KERNELS)
def test_lower_sparse_buffer_matches_golden(name, golden):
    golden(sparsetir.lower_sparse_buffer(sparsetir.lower_sparse_iter(CASES[name].func)).script())


def test_golden_comparison_detects_a_different_kernel(golden):
    """The comparison is not vacuous: SDDMM's text against fused SDDMM's file fails, and the
    failure shows a unified diff of the two."""
    sddmm = sparsetir.lower_sparse_iter(CASES["sddmm"].func).script()
    against_fused = Golden(golden.folder, "test_lower_sparse_iter_matches_golden[fused_sddmm]",
                           "test_lower_sparse_iter_matches_golden", update=False)
    with pytest.raises(pytest.fail.Exception, match=r"(?s)differs from .*fused_sddmm\.txt.*"
                                                    r"\n-.*fused_sddmm0_search0.*\n\+"):
        against_fused(sddmm)


@pytest.mark.parametrize("name", ITER_KERNELS)
def test_lowered_module_prints_and_parses_back(name):
    lowered = sparsetir.lower_sparse_iter(CASES[name].func)
    tvm.ir.assert_structural_equal(lowered, tvm.script.from_source(lowered.script()))


def test_golden_files_are_written_on_update_and_required_otherwise(tmp_path):
    """--update-golden writes the file (whole, newline-terminated); without it a missing
    file fails and names the option; one file cannot be compared twice in a test."""
    Golden(tmp_path, "test_x[a-b]", "test_x", update=True)("T.evaluate(0)")
    assert (tmp_path / "test_x-a-b.txt").read_text() == "T.evaluate(0)\n"
    Golden(tmp_path, "test_x[a-b]", "test_x", update=False)("T.evaluate(0)\n")
    check = Golden(tmp_path, "test_y", "test_y", update=False)
    with pytest.raises(pytest.fail.Exception, match="no golden file .*test_y.txt.*--update-golden"):
        check("text")
    with pytest.raises(ValueError, match="already compared"):
        check("text")
