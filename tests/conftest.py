import pytest

from sparsetir.backend.target import cuda_available


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not cuda_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver")
        for item in gpu_items:
            item.add_marker(skip)
