"""Compile every zoo kernel for llvm and compare what it computes with its numpy reference.

Outputs are filled with NaN before each call, so an output entry the kernel does not write
(e.g. the T.init of an empty row) fails the comparison. Each kernel is built once per module.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import sparse_inputs as si
import sparsetir
from kernel_zoo import CASES

NAMES = sorted(CASES)
TORCH_NAMES = ["csrmm", "sparse_softmax"]


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    """The llvm build of kernel ``name`` (built once per module)."""
    return sparsetir.build(CASES[name].func, "llvm")


def _param_names(name: str) -> list:
    """Parameter names of kernel ``name`` in call order."""
    return [p.name for p in CASES[name].func.params]


def _inputs(name: str, size: str) -> dict:
    """Seeded inputs of ``name`` at ``size``, with every output array filled with NaN."""
    case = CASES[name]
    inputs = case.make_inputs(si.case_rng(name, size), size)
    assert set(inputs) == set(_param_names(name)), "inputs must name every parameter"
    for out in case.outputs:
        inputs[out] = np.full_like(inputs[out], np.nan)
    return inputs


def _assert_outputs_match(name: str, size: str, got: dict, expected: dict) -> None:
    """Compare the kernel's outputs ``got`` with the reference outputs ``expected``."""
    case = CASES[name]
    for out in case.outputs:
        np.testing.assert_allclose(
            np.asarray(got[out], dtype=np.float64), np.asarray(expected[out], dtype=np.float64),
            rtol=case.rtol, atol=case.atol, err_msg=f"{name}/{size}: output {out}",
        )


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_kernel_matches_reference(name, size):
    """The compiled kernel writes the reference values to every output, and leaves inputs alone."""
    inputs = _inputs(name, size)
    expected = CASES[name].reference(inputs)
    before = {k: v.copy() for k, v in inputs.items()
              if isinstance(v, np.ndarray) and k not in CASES[name].outputs}
    _kernel(name)(*[inputs[p] for p in _param_names(name)])
    _assert_outputs_match(name, size, inputs, expected)
    for key, value in before.items():
        np.testing.assert_array_equal(inputs[key], value, err_msg=f"{name}: input {key} changed")


@pytest.mark.parametrize("name", TORCH_NAMES, ids=TORCH_NAMES)
def test_kernel_accepts_torch_tensors(name):
    """The same kernels called with CPU torch tensors (sharing memory with the numpy inputs)."""
    torch = pytest.importorskip("torch")
    inputs = _inputs(name, "small")
    expected = CASES[name].reference(inputs)
    args = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    _kernel(name)(*[args[p] for p in _param_names(name)])
    got = {out: args[out].numpy() for out in CASES[name].outputs}
    _assert_outputs_match(name, "small", got, expected)
