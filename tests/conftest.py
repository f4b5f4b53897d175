"""Shared pytest setup: GPU tests skipped without a GPU, and the ``golden`` fixture
(``golden_text``: generated text compared with ``<test folder>/golden/...``; ``--update-golden``
writes those files instead). Prebuilt kernels are off (``SPARSETIR_PREBUILT=0``): the suite tests
what it compiles, whether or not ``make prebuilt`` filled ``python/sparsetir/prebuilt``;
``tests/driver/test_prebuilt.py`` turns them on with a folder of its own."""

import os

import pytest

from golden_text import UPDATE_OPTION, Golden
from sparsetir.backend.target import cuda_available

os.environ.setdefault("SPARSETIR_PREBUILT", "0")


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
