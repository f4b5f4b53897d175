"""``Kernel.bind`` keeps private copies of the arrays it fixes (the ones it checked), so the
caller changing them afterwards changes no answer and reads nothing out of bounds; arrays over
immutable memory (``SparseMatrix``'s) are used as they are.

The mutation runs in a subprocess: before the copies the kernel read the changed indices and
crashed.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from csrmm_calls import make_args

from sparsetir.runtime.arguments import sealed

from sparsetir.runtime import ArgumentError

TESTS = Path(__file__).resolve().parents[1]

MUTATE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import numpy as np, torch
    from csrmm_calls import NAMES, build_kernel, make_args
    kernel, args = build_kernel(), make_args()
    fixed = {{k: args[k] for k in ("a", "indptr", "indices", "m", "n", "nnz")}}
    fixed["indptr"] = torch.from_numpy(fixed["indptr"].copy())        # torch and numpy
    bound = kernel.bind(**fixed)
    fixed["indices"][:] = 10 ** 8              # the caller's arrays change after the bind
    fixed["indptr"][1:] = 10 ** 8
    fixed["a"][:] = np.nan
    for out in (np.full((12, 16), np.nan, np.float32),            # native fast path
                torch.full((12, 16), float("nan")),                 # Python fast path
                np.full((12, 32), np.nan, np.float32)[:, ::2]):     # general path (strided)
        bound(args["b"], out)
        print(float(np.abs(np.asarray(out) - args["expected"]).max()))
""")


def test_changing_a_bound_array_changes_nothing():
    proc = subprocess.run([sys.executable, "-c", MUTATE.format(tests=str(TESTS))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
    errors = [float(line) for line in proc.stdout.split()]
    assert len(errors) == 3 and max(errors) < 1e-5, proc.stdout


def _fixed(args):
    return {k: args[k] for k in ("a", "indptr", "indices", "m", "n", "nnz")}


def test_only_sealed_arrays_are_not_copied(kernel):
    """Arrays over sparsetir's sealed memory (``SparseMatrix`` keeps its arrays so) are bound
    as they are; writable arrays and read-only ones over plain ``bytes`` are copied, since
    ``torch.from_numpy`` writes into those despite the read-only flag."""
    args = make_args()
    fixed = _fixed(args) | {k: sealed(args[k], args[k].dtype) for k in ("a", "indptr", "indices")}
    bound = kernel.bind(**fixed)
    params = [p.name for p in kernel.signature.params]
    for name in ("a", "indptr", "indices"):
        assert bound._values[params.index(name)].data_ptr() == fixed[name].ctypes.data
    for array in (lambda a: a, lambda a: np.frombuffer(a.tobytes(), a.dtype)):
        given = _fixed(args) | {"indices": array(args["indices"])}
        copied = kernel.bind(**given)
        assert copied._values[params.index("indices")].data_ptr() != given["indices"].ctypes.data
    out = np.full((12, 16), np.nan, np.float32)
    bound(args["b"], out)
    np.testing.assert_allclose(out, args["expected"], rtol=1e-5, atol=1e-6)


def test_outputs_over_the_callers_bound_arrays_are_still_refused(kernel):
    args = make_args()
    nnz = args["nnz"]
    memory = np.zeros(nnz + 12 * 16 + 9 * 16, np.float32)
    data, out = memory[:nnz], memory[nnz - 1:nnz - 1 + 12 * 16].reshape(12, 16)
    data[:] = args["a"]
    other = memory[nnz + 12 * 16:]
    bound = kernel.bind(**(_fixed(args) | {"a": data})).protect(other=other)
    with pytest.raises(ArgumentError, match="'c' shares memory with argument 'a'"):
        bound(args["b"], out)                  # out starts on data's last value
    with pytest.raises(ArgumentError, match="'c' shares memory with argument 'other'"):
        bound(args["b"], memory[-12 * 16:].reshape(12, 16))
    fresh = np.full((12, 16), np.nan, np.float32)
    bound(args["b"], fresh)
    np.testing.assert_allclose(fresh, args["expected"], rtol=1e-5, atol=1e-6)


def test_bind_checks_the_copy_and_takes_grad_tensors_under_no_grad(kernel):
    args = make_args()
    bad = _fixed(args) | {"indices": args["indices"].copy()}
    bad["indices"][0] = 10 ** 8
    with pytest.raises(ArgumentError, match="indices"):
        kernel.bind(**bad)
    with torch.no_grad():
        bound = kernel.bind(**(_fixed(args) | {"a": torch.from_numpy(args["a"]).requires_grad_()}))
    out = np.full((12, 16), np.nan, np.float32)
    bound(args["b"], out)
    np.testing.assert_allclose(out, args["expected"], rtol=1e-5, atol=1e-6)
