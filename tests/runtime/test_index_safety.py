"""Inputs that would make a kernel read or write out of bounds are refused, never run.

Each bad call runs in its own process (``bad_calls.py``), so a crash fails its test instead of
the run. Values used as coordinates are checked at the call against their declared domain;
coordinates no declaration pins down (a scalar relation such as ``m_out >= m_in / blk``, two
row pointers that must agree) are checked inside the kernel.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_zoo import CASES

import sparsetir
from sparsetir.errors import ARGUMENT_ERROR_KIND

SCRIPT = Path(__file__).with_name("bad_calls.py")

EXPECTED = {
    "etype_out_of_range": "values 'etype'.*outside the declared domain",
    "etype_negative": "values 'etype'.*-1000000.*outside",
    "bsr_too_few_block_rows": "coordinate i // blk_size of B on axis I_bsr must lie in "
                              r"\[0, m_out\)",
    "bsr_too_few_block_columns": "coordinate j // blk_size of B on axis J_bsr must lie in "
                                 r"\[0, n_out\)",
    "bmm_inconsistent_rows": "coordinate j of X on axis IJ must lie in",
}


@pytest.mark.parametrize("bound", [False, True])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_input_is_refused_with_a_message(case, bound):
    proc = subprocess.run([sys.executable, str(SCRIPT), case] + (["bound"] if bound else []),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{case}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert proc.stdout.startswith("ArgumentError: "), f"{case}: {proc.stdout}"
    assert re.search(EXPECTED[case], proc.stdout), proc.stdout


def test_a_value_used_as_a_coordinate_needs_a_declared_domain():
    text = CASES["rgcn_homo_forward"].func.script()
    undeclared = "\n".join(line for line in text.splitlines()
                           if "assume_buffer_domain" not in line)
    func = sparsetir.script.from_source(undeclared)
    with pytest.raises(sparsetir.LoweringError,
                       match=r"of W on axis R is read from E.*T.assume_buffer_domain\(E, "):
        sparsetir.lower_sparse_iter(func)


def test_coordinates_proven_in_range_get_no_check():
    # csrmm's B[j, k]: j is a column index, validated against n at the call
    lowered = sparsetir.lower_sparse_iter(CASES["csrmm"].func)
    assert ARGUMENT_ERROR_KIND not in lowered.script()
    assert ARGUMENT_ERROR_KIND in sparsetir.lower_sparse_iter(CASES["csr2bsr"].func).script()

