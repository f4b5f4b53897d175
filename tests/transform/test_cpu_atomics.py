"""``"atomic"`` on the CPU: a CSC SpMV (columns outer, ``"RS"``, atomic adds) runs its column
loop in parallel and right, with eight threads adding into the same rows; the atomic adds of
every supported dtype add right; other dtypes are refused by name."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import ir as I
from tvm.script import tirx as T

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.errors import AtomicBlockError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csc_spmv_calls import csc_spmv  # noqa: E402  pylint: disable=wrong-import-position

CALLS = Path(__file__).resolve().parent / "csc_spmv_calls.py"

# pylint: disable=missing-class-docstring,missing-function-docstring,invalid-name


def test_the_column_loop_is_parallel_and_its_adds_call_the_atomic_helper():
    flat = lower_to_stage3(csc_spmv, "llvm")
    tvm.s_tir.Schedule(flat)                                    # TVM's checks accept it
    zero, spmv = flat["main"].body.block.body.seq
    assert zero.kind == tirx.ForKind.PARALLEL and spmv.kind == tirx.ForKind.PARALLEL
    calls = []
    tvm_ffi.structural_walk(spmv, (tvm.ir.Call, lambda c: calls.append(str(c.args[0].value))
                                   if c.op.name == "tirx.call_extern" else None), order="pre")
    assert calls == ["sparsetir_atomic_add_float32"]
    stores = []
    tvm_ffi.structural_walk(spmv, (tirx.BufferStore, stores.append), order="pre")
    assert stores == []                                         # no plain add into Y is left


def test_csc_spmv_is_right_with_eight_threads_adding_into_the_same_rows():
    env = dict(os.environ, TVM_NUM_THREADS="8")
    proc = subprocess.run([sys.executable, str(CALLS)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    errors = [float(line.split()[1]) for line in proc.stdout.splitlines()
              if line.startswith("max_error")]
    assert len(errors) == 2
    assert errors[0] < 1e-5                     # random matrix with empty rows and columns
    assert errors[1] == 0.0                     # 200000 exact adds of 1 into each of 3 rows


def scatter(dtype: str):
    """``y[rows[i]] += a[i]`` for 64 values into 4 outputs, atomic, as a Stage II module."""

    @I.ir_module
    class Scatter:
        @T.prim_func(s_tir=True)
        def main(rows: T.Buffer((64,), "int32"), a: T.Buffer((64,), dtype),
                 y: T.Buffer((4,), dtype)):
            for i in range(64):
                with T.sblock("scatter"):
                    vi = T.axis.spatial(64, i)
                    T.reads(y[rows[vi]], rows[vi], a[vi])
                    T.writes(y[rows[vi]])
                    T.sblock_attr({"atomic": True})
                    y[rows[vi]] = y[rows[vi]] + a[vi]

    return Scatter


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_each_atomic_add_adds(dtype):
    kernel = sparsetir.build(scatter(dtype), "llvm", schedule="none")
    rows = np.arange(64, dtype=np.int32) % 3                   # output 3 gets nothing
    a = (np.arange(64) - 20).astype(dtype)
    y = np.array([5, -7, 11, 13], dtype)
    expected = y.copy()
    np.add.at(expected, rows, a)
    kernel(rows, a, y)
    np.testing.assert_array_equal(y, expected)


def test_an_atomic_add_of_another_dtype_is_refused_by_name():
    with pytest.raises(AtomicBlockError, match=r"buffer y is float16: atomic adds on the CPU "
                                               r"exist for float32, float64, int32, int64 only"):
        sparsetir.build(scatter("float16"), "llvm", schedule="none")
