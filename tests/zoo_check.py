"""Run a zoo kernel on seeded inputs whose outputs start as NaN, and compare with its reference.

Every test that computes with a kernel of ``kernel_zoo`` (as written, scheduled, emulated or
built for a GPU) goes through here: the inputs come from ``sparse_inputs`` (empty rows
included), each output is filled with NaN before the call, so an entry the kernel does not
write fails, and the outputs are compared with the numpy/scipy reference of
``kernel_references`` within the case's tolerance; the inputs must come back unchanged.
Uses only ``kernel_references``, so reference-only tests need no compiler.

>>> func = CASES["csrmm"].func                                         # doctest: +SKIP
>>> check_kernel(sparsetir.build(func, "llvm"), func, "csrmm", zoo_inputs("csrmm"))
"""

from __future__ import annotations

import numpy as np

import sparse_inputs as si
from kernel_references import REFERENCE_SPECS


def with_nan_outputs(name: str, inputs: dict) -> dict:
    """A copy of ``inputs`` whose outputs of kernel ``name`` are new NaN arrays."""
    outputs = REFERENCE_SPECS[name].outputs
    return dict(inputs, **{out: np.full_like(inputs[out], np.nan) for out in outputs})


def zoo_inputs(name: str, size: str = "small") -> dict:
    """The seeded inputs of kernel ``name`` at ``size`` (every parameter by name), outputs NaN."""
    return with_nan_outputs(name, REFERENCE_SPECS[name].make_inputs(si.case_rng(name, size), size))


def check_kernel(kernel, func, name: str, inputs: dict, convert=None) -> dict:
    """Call ``kernel`` (compiled from ``func``) on ``inputs`` and check it against the reference.

    The outputs are filled with NaN first; each array is passed through ``convert`` (e.g.
    ``torch.from_numpy``, which shares memory) when given. Arguments follow ``func``'s
    parameters, so a specialised ``func`` takes the inputs it was specialised with. Returns
    the inputs with the outputs the kernel wrote.
    """
    spec = REFERENCE_SPECS[name]
    inputs = with_nan_outputs(name, inputs)
    expected = spec.reference(inputs)
    unchanged = {key: value.copy() for key, value in inputs.items()
                 if isinstance(value, np.ndarray) and key not in spec.outputs}
    args = [inputs[p.name] for p in func.params]
    if convert is not None:
        args = [convert(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel(*args)
    for out in spec.outputs:
        np.testing.assert_allclose(np.asarray(inputs[out], np.float64),
                                   np.asarray(expected[out], np.float64), rtol=spec.rtol,
                                   atol=spec.atol, err_msg=f"{name}: output {out}")
    for key, value in unchanged.items():
        np.testing.assert_array_equal(inputs[key], value, err_msg=f"{name}: input {key} changed")
    return inputs
