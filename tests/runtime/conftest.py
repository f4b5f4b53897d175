"""Fixtures of the call tests: the csrmm kernel of ``csrmm_calls`` (built once per module)
and a fresh set of its arguments for each test."""
import pytest
from csrmm_calls import build_kernel, make_args


@pytest.fixture(scope="module")
def kernel():
    return build_kernel()


@pytest.fixture
def args():
    return make_args()
