"""A check compiled into a kernel raises ``ArgumentError`` by its error kind, not its text.

The assertions carry the kind ``errors.ARGUMENT_ERROR_KIND``, registered with tvm-ffi, and a
message without any marker; a check inside a parallel loop reports after the loop, so the
kind survives TVM's thread pool (which turns a failed task into a ``RuntimeError``). Calls that
could crash run in a subprocess (``lower/bounds_calls.py``).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tvm
import tvm_ffi
from kernel_zoo import CASES

import sparsetir
from sparsetir.errors import ARGUMENT_ERROR_KIND, ArgumentError

BOUNDS_CALLS = Path(__file__).resolve().parents[1] / "lower" / "bounds_calls.py"


def test_checks_carry_the_argument_error_kind_and_a_plain_message():
    lowered = sparsetir.lower_sparse_iter(CASES["csr2bsr"].func)
    asserts = []
    tvm_ffi.structural_walk(lowered["main"].body, (tvm.tirx.AssertStmt, asserts.append),
                            order="pre")
    assert asserts
    for check in asserts:
        assert check.error_kind.value == ARGUMENT_ERROR_KIND
        assert check.message_parts[0].value.startswith("coordinate ")


def test_the_kind_is_raised_as_argument_error():
    error = tvm_ffi.core.Error(ARGUMENT_ERROR_KIND, "coordinate i of B ...", "").py_error()
    assert type(error) is ArgumentError and str(error) == "coordinate i of B ..."


@pytest.mark.parametrize("scenario, message", [
    ("halves", "coordinate i // 2 of X on axis IX must lie in [0, mx)"),
    ("attached_rows", "coordinate of J used as a row of I_T (T.attach in gather) must lie in "
                      "[0, m_t)"),
])
def test_a_check_in_a_parallel_loop_raises_argument_error_on_several_threads(scenario, message):
    env = dict(os.environ, TVM_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, str(BOUNDS_CALLS), scenario], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == f"refused {message}"
