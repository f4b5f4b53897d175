"""Every index the lowering emits is proven in range or checked before it is read, on one
thread too: scalars that disagree with the arrays (``csr2bsr`` with too small an ``m_out``)
give an ``ArgumentError`` naming the parameter, never an out-of-bounds access. Each call runs
in a subprocess (``bounds_calls.py``) with ``TVM_NUM_THREADS=1``, since it could crash."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tvm
from kernel_zoo import CASES

import sparsetir

DRIVER = Path(__file__).with_name("bounds_calls.py")


@pytest.mark.parametrize("scenario, message", [
    # the block row i // blk_size selects J_bsr's row before any block is looked up
    ("csr2bsr", r"coordinate i // blk_size of B on axis I_bsr must lie in \[0, m_out\)"),
    # an init writes before its reduction runs (and every row is empty here)
    ("init_at_coordinate", r"coordinate i // 2 of C on axis IC must lie in \[0, mc\)"),
    # T.attach takes J's coordinate as a row of I_T, which indexes indptr_t
    ("attached_rows", r"coordinate of J used as a row of I_T .* must lie in \[0, m_t\)"),
    # a check in a parallel loop that fails on one thread (TVM drops that error)
    ("halves", r"coordinate i // 2 of X on axis IX must lie in \[0, mx\)"),
])
def test_inconsistent_scalars_are_refused_by_name(scenario, message):
    env = dict(os.environ, TVM_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(DRIVER), scenario], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    outcome = proc.stdout.strip().splitlines()[-1]
    assert outcome.startswith("refused"), outcome
    assert re.search(message, outcome), outcome


def test_a_search_checks_the_row_it_searches_first():
    """csr2bsr's lookup of block column j // blk_size reads J_bsr_indptr[i // blk_size]: the
    search block asserts the block row in range before that read (the compute block's check
    would come too late, the search runs before it)."""
    sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["csr2bsr"].func))
    search = sch.get(sch.get_sblock("csr2bsr1_search0"))
    first = search.body.seq[0]
    assert isinstance(first, tvm.tirx.AssertStmt)
    assert "[0, m_out)" in first.message_parts[0].value
