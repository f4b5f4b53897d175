"""Every test of ``tests/dgl_port`` carries the ``dgl_port`` marker, so a run can take or leave
DGL's ported tests as a whole (``-m dgl_port``, ``-m "not dgl_port"``): they compile several
hundred kernels on a fresh cache."""

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.dgl_port)
