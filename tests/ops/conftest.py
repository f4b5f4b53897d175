"""Fixtures of the operator tests: ``general_path`` counts the plain calls that reach the
general path (``ops.plain_calls``' short path not taken).

Example
-------
>>> # def test_something(general_path): ops.spmm(A, X); assert len(general_path) == 1
"""

import pytest

from sparsetir.ops import operators, plain_calls


@pytest.fixture
def general_path(monkeypatch):
    """Forget prepared plain calls; count the calls that reach the general plain path."""
    plain_calls.clear()
    reached = []
    for name in ("_spmm_plain", "_sddmm_plain"):
        original = getattr(operators, name)

        def counted(*args, _original=original):
            reached.append(1)
            return _original(*args)

        monkeypatch.setattr(operators, name, counted)
    yield reached
    plain_calls.clear()
