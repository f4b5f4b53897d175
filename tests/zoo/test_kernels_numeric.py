"""Compile every zoo kernel for llvm and compare what it computes with its numpy reference.

Outputs are filled with NaN before each call (``zoo_check``), so an output entry the kernel
does not write (e.g. the T.init of an empty row) fails the comparison. Each kernel is built
once per module.
"""

from __future__ import annotations

import functools

import pytest

import sparse_inputs as si
import sparsetir
from kernel_zoo import CASES
from zoo_check import check_kernel, zoo_inputs

NAMES = sorted(CASES)
TORCH_NAMES = ["csrmm", "sparse_softmax"]


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    """The llvm build of kernel ``name`` (built once per module)."""
    return sparsetir.build(CASES[name].func, "llvm")


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_kernel_matches_reference(name, size):
    """The compiled kernel writes the reference values to every output, and leaves inputs alone."""
    inputs = zoo_inputs(name, size)
    assert set(inputs) == {p.name for p in CASES[name].func.params}, \
        "inputs must name every parameter"
    check_kernel(_kernel(name), CASES[name].func, name, inputs)


@pytest.mark.parametrize("name", TORCH_NAMES, ids=TORCH_NAMES)
def test_kernel_accepts_torch_tensors(name):
    """The same kernels called with CPU torch tensors (sharing memory with the numpy inputs)."""
    torch = pytest.importorskip("torch")
    check_kernel(_kernel(name), CASES[name].func, name, zoo_inputs(name), torch.from_numpy)
