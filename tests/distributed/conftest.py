"""Fixtures of the distributed tests.

Example
-------
>>> # def test_something(group_of_one): DistSparseMatrix(partition(A, 1)[0])
"""

import pytest
import torch.distributed as dist

from sparsetir.distributed.launch import free_port, init_group


@pytest.fixture(scope="module")
def group_of_one():
    """This process as a gloo group of one, for the module's tests."""
    init_group(0, 1, f"127.0.0.1:{free_port()}", 30)
    yield
    dist.destroy_process_group()
