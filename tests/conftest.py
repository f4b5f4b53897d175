"""Shared pytest setup: GPU tests skipped without a GPU, the ``golden`` fixture
(``golden_text``: generated text compared with ``<test folder>/golden/...``; ``--update-golden``
writes those files instead), and background compiles off unless ``SPARSETIR_BACKGROUND_COMPILE``
is set (a layer's constructor would otherwise compile on other threads while tests count,
time and clear kernels; ``tests/nn/test_background_compile.py`` turns them on)."""

import os

import pytest

from golden_text import UPDATE_OPTION, Golden
from sparsetir.backend.target import cuda_available

os.environ.setdefault("SPARSETIR_BACKGROUND_COMPILE", "0")


def pytest_addoption(parser):
    parser.addoption(UPDATE_OPTION, action="store_true", default=False,
                     help="write the golden files of the tests that run instead of comparing "
                          "with them (read their diff before committing)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not cuda_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def golden(request):
    """``golden(text)``: compare ``text`` with this test's golden file (see ``golden_text``)."""
    module = request.node.path
    return Golden(module.parent / "golden" / module.stem, request.node.name,
                  request.node.originalname, request.config.getoption(UPDATE_OPTION))
