"""``Kernel.with_argument_check`` (a format's own rule about the arguments, checked at the call)
and ``BoundKernel.native_call`` (the C fast call, turned off and on).

The check sees the parameters it names (arrays as numpy, scalars as ints), runs whenever the
index checks run (``validate=True``, and at ``bind``), and its ``ValueError`` reaches the caller
as an ``ArgumentError`` before any compiled code runs.
"""
import numpy as np
import pytest
from csrmm_calls import NAMES, call

from sparsetir import ArgumentError


def no_empty_rows(arguments):
    """A made-up rule: every one of the m rows holds a nonzero."""
    assert isinstance(arguments["m"], int) and isinstance(arguments["indptr"], np.ndarray)
    empty = np.flatnonzero(np.diff(arguments["indptr"]) == 0)
    if empty.size:
        raise ValueError(f"indptr: row {empty[0]} of {arguments['m']} is empty")


def test_the_check_refuses_before_the_kernel_runs(kernel, args):
    checked = kernel.with_argument_check(no_empty_rows, ["indptr", "m"])
    with pytest.raises(ArgumentError, match="indptr: row 4 of 12 is empty"):
        call(checked, args)
    assert np.isnan(args["c"]).all()
    with pytest.raises(ArgumentError, match="row 4 of 12 is empty"):
        checked.bind(**{k: args[k] for k in NAMES if k not in ("b", "c")})


def test_the_check_runs_only_where_index_checks_run(kernel, args):
    checked = kernel.with_argument_check(no_empty_rows, ["indptr", "m"])
    merged = dict(args)
    checked(*[merged[k] for k in NAMES], validate=False)
    np.testing.assert_allclose(merged["c"], args["expected"], rtol=1e-5, atol=1e-6)
    call(kernel, args)            # the kernel it came from is unchanged: no check
    np.testing.assert_allclose(args["c"], args["expected"], rtol=1e-5, atol=1e-6)


def test_a_check_must_name_parameters_of_the_kernel(kernel):
    with pytest.raises(ValueError, match="the kernel has no parameter tile_ptr"):
        kernel.with_argument_check(no_empty_rows, ["tile_ptr", "m"])


def test_the_native_call_can_be_turned_off_and_on(kernel, args):
    from sparsetir.runtime import native_call
    bound = kernel.bind(**{k: args[k] for k in NAMES if k not in ("b", "c")})
    assert bound.native_call == native_call.available()
    bound.native_call = False
    assert not bound.native_call
    bound(args["b"], args["c"])                       # the Python fast path
    np.testing.assert_allclose(args["c"], args["expected"], rtol=1e-5, atol=1e-6)
    if native_call.available():
        bound.native_call = True
        assert bound.native_call
