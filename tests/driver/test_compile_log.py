"""Compiles that show (``driver.compile_log``) and ``sparsetir.warmup``.

A compile past ``SLOW_S`` gives an INFO record on the ``"sparsetir"`` logger naming the
kernel and why it compiled; a kernel from the disk cache gives none (a DEBUG record only);
``SPARSETIR_LOG`` prints the records on stderr and nothing is printed without it. ``warmup``
compiles a layer's forward and backward kernels with a line per compile, touches no ``.grad``,
and leaves nothing for the training step to compile.
"""

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir
import sparsetir.nn
import sparsetir.ops as ops
from sparsetir.driver import cache, compile_log
from saved_workers import CHILD_PATH

A = scipy.sparse.random(12, 12, density=0.3, format="csr", dtype=np.float32, random_state=4)
A = (scipy.sparse.diags((np.arange(12) != 5).astype(np.float32)) @ A).tocsr()   # row 5 empty


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty disk cache and nothing in memory: every kernel compiles."""
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMORY", {})
    return tmp_path


def _records(caplog, level):
    return [r for r in caplog.records if r.name == "sparsetir" and r.levelno == level]


def test_slow_compile_is_logged_and_a_cache_hit_is_not(fresh, caplog, monkeypatch):
    monkeypatch.setattr(compile_log, "SLOW_S", 0.0)        # every compile counts as slow
    X = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="sparsetir"):
        out = ops.copy_u_max(ops.SparseMatrix(A), X)
    info = _records(caplog, logging.INFO)
    assert info and all("not in the disk cache" in r.getMessage() for r in info)
    assert any("gspmm copy_lhs max float32" in r.getMessage() for r in info)
    expected = np.array([[X[A.indices[s:e], j].max() if e > s else 0 for j in range(3)]
                         for s, e in zip(A.indptr[:-1], A.indptr[1:])])
    np.testing.assert_allclose(out, expected, rtol=1e-6)

    caplog.clear()
    monkeypatch.setattr(cache, "_MEMORY", {})                   # a new process: disk hits
    with caplog.at_level(logging.DEBUG, logger="sparsetir"):
        ops.copy_u_max(ops.SparseMatrix(A), X)
    assert not _records(caplog, logging.INFO)
    assert any("from the disk cache" in r.getMessage() for r in _records(caplog, logging.DEBUG))


@pytest.mark.parametrize("level", ["info", ""])
def test_sparsetir_log_prints_on_stderr_only_when_set(tmp_path, level):
    script = textwrap.dedent("""
        import numpy as np, scipy.sparse, sparsetir.ops as ops
        from sparsetir.driver import compile_log
        compile_log.SLOW_S = 0.0
        A = scipy.sparse.random(6, 6, density=0.5, format="csr", dtype=np.float32)
        ops.copy_u_sum(ops.SparseMatrix(A), np.ones((6, 5), np.float32))
    """)
    env = {**os.environ, "SPARSETIR_CACHE": str(tmp_path), "SPARSETIR_LOG": level,
           "PYTHONPATH": CHILD_PATH}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if level:
        assert "sparsetir: compiled ops gspmm copy_lhs sum float32" in done.stderr
    else:
        assert done.stderr == ""


def test_unknown_level_warns(monkeypatch, caplog):
    monkeypatch.setenv("SPARSETIR_LOG", "loud")
    with caplog.at_level(logging.WARNING, logger="sparsetir"):
        compile_log.configure_from_env()
    assert "SPARSETIR_LOG=loud is not a logging level" in caplog.text


class _Counter(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.events = []

    def emit(self, record):
        self.events.append(getattr(record, compile_log.EVENT, None))


def _compiles_during(run) -> list:
    """The compile records (``"compiled"``, ``"loaded"``) made while ``run()`` runs."""
    counter = _Counter()
    compile_log.LOGGER.addHandler(counter)
    compile_log.LOGGER.setLevel(logging.DEBUG)
    try:
        run()
    finally:
        compile_log.LOGGER.removeHandler(counter)
        compile_log.LOGGER.setLevel(logging.NOTSET)
    return counter.events


def test_warmup_compiles_forward_and_backward(fresh, capsys):
    torch.manual_seed(0)
    M = ops.SparseMatrix(A + scipy.sparse.identity(12, dtype=np.float32, format="csr"))
    conv = sparsetir.nn.GraphConv(6, 4)
    X = torch.randn(12, 6, requires_grad=True)
    report = sparsetir.warmup(conv, M, X)
    assert report.compiled >= 1 and report.loaded == 0   # the backward runs the same gspmm on Mᵀ
    lines = capsys.readouterr().err.splitlines()
    assert len([l for l in lines if "] compiled ops gspmm" in l]) == report.compiled
    assert lines[-1].startswith(f"sparsetir warmup: {report.compiled} kernels compiled")
    assert conv.weight.grad is None and X.grad is None

    out = conv(M, X)
    assert _compiles_during(lambda: out.sum().backward()) == []     # the training step
    pattern = (M.to_scipy().toarray() != 0).astype(np.float64)    # GraphConv reads no values
    src, dst = (np.diag(1 / np.sqrt(np.maximum(pattern.sum(axis), 1))) for axis in (0, 1))
    expected = dst @ pattern @ src @ X.detach().numpy() @ conv.weight.detach().numpy() \
        + conv.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-4, atol=1e-5)
    assert sparsetir.warmup(conv, M, X, progress=False).compiled == 0


def test_warmup_of_operator_calls(fresh):
    M = ops.SparseMatrix(A)
    X = torch.randn(12, 7, requires_grad=True)
    report = sparsetir.warmup([lambda: ops.spmm(M, X)], progress=False)
    assert report.compiled >= 1            # the backward runs the same product on Mᵀ
    assert X.grad is None
    out = ops.spmm(M, X)
    assert _compiles_during(lambda: out.sum().backward()) == []
    np.testing.assert_allclose(out.detach().numpy(), A @ X.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(X.grad.numpy(), A.T @ np.ones((12, 7)), rtol=1e-5, atol=1e-6)


def test_warmup_refuses_what_it_cannot_run():
    with pytest.raises(sparsetir.SparseTIRTypeError, match="callables taking no argument"):
        sparsetir.warmup([1, 2])
    with pytest.raises(sparsetir.SparseTIRTypeError, match="torch.nn.Module only"):
        sparsetir.warmup([lambda: None], torch.ones(2))
