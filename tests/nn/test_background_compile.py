"""Background compiles (``driver.background``, ``nn.kernel_plans``): a layer compiles, when it
is built, the kernels of its forward and backward in worker processes.

Each test turns them on (``tests/conftest.py`` turns them off), with an empty disk cache and
nothing in memory, and records every compile record (``driver.compile_log``) with the thread
that logged it (a worker's compiles are logged by the thread driving it). Checked: the kernels
compiled in the background are the ones the training step uses (it compiles nothing more, none
twice), the first forward equals a scipy / dense torch reference, a compile that fails in a
worker raises at the call that needs the kernel (once), the opt-out compiles on the caller's
thread, the workers are no more than the cores, ``warmup`` counts the workers' compiles, a
script that exits while workers compile leaves no process behind, and the default is on only
with ``AUTO_CORES`` cores or more.
"""

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir
import sparsetir.ops as ops
from sparsetir.driver import background, cache
from sparsetir.driver.compile_log import EVENT, LOGGER
from sparsetir.nn import GATConv, GraphConv, kernel_plans

import background_jobs

HERE = Path(__file__).resolve().parent
N = 9
_A = scipy.sparse.random(N, N, density=0.3, format="csr", dtype=np.float32, random_state=2)
EMPTY_ROW = 4
PATTERN = (scipy.sparse.diags((np.arange(N) != EMPTY_ROW).astype(np.float32)) @
           (_A + scipy.sparse.identity(N, dtype=np.float32))).tocsr()   # row 4: no in-edge


class Compiles(logging.Handler):
    """The compile records logged while a test runs: ``made`` holds ``(thread, message)``."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.made = []

    def emit(self, record):
        if getattr(record, EVENT, None) == "compiled":
            self.made.append((record.threadName, record.getMessage().split(" for llvm")[0]))

    def on(self, where: str) -> list:
        return [what for thread, what in self.made if thread.startswith(where)]


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """Background compiles on, an empty disk cache, nothing in memory, compiles recorded."""
    monkeypatch.setenv(background.ENV, "1")
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH",
                                                                                   "")]))
    monkeypatch.setattr(cache, "_MEMORY", {})
    monkeypatch.setattr(kernel_plans, "_SUBMITTED", set())
    recorder, level = Compiles(), LOGGER.level
    LOGGER.addHandler(recorder)
    LOGGER.setLevel(logging.DEBUG)
    try:
        yield recorder
        background.drain()        # nothing left running into the next test
    finally:
        LOGGER.removeHandler(recorder)
        LOGGER.setLevel(level)


def _graph_conv_reference(conv, X):
    """``D_in^-1/2 A D_out^-1/2 X W + b`` with scipy (degrees below 1 count as 1)."""
    pattern = (PATTERN.toarray() != 0).astype(np.float64)
    src, dst = (np.diag(1 / np.sqrt(np.maximum(pattern.sum(axis), 1))) for axis in (0, 1))
    return dst @ pattern @ src @ X.detach().numpy() @ conv.weight.detach().numpy() \
        + conv.bias.detach().numpy()


def _gat_reference(gat, pattern, X):
    """GAT by dense torch on ``pattern`` (no empty row): attention softmax over each
    destination's in-edges."""
    heads, width = gat._num_heads, gat._out_feats        # pylint: disable=protected-access
    z = gat.fc(X).view(N, heads, width)
    left, right = (z * gat.attn_l).sum(-1), (z * gat.attn_r).sum(-1)        # (N, heads)
    logits = torch.nn.functional.leaky_relu(right[:, None] + left[None, :], 0.2)
    mask = torch.from_numpy(pattern.toarray() != 0)[:, :, None]
    attention = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=1)
    return torch.einsum("vuh,uhf->vhf", attention, z) + gat.bias.view(heads, width)


def test_background_kernels_are_the_training_steps(compiles):
    torch.manual_seed(0)
    gat = GATConv(5, 3, num_heads=2)
    background.drain()
    built = compiles.on("sparsetir-compile")
    assert built and len(built) == len(compiles.made)        # all in the workers
    pattern = (PATTERN + scipy.sparse.identity(N, dtype=np.float32, format="csr")).tocsr()
    X = torch.randn(N, 5, requires_grad=True)
    out = gat(ops.SparseMatrix(pattern), X)
    out.sum().backward()
    assert len(compiles.made) == len(built)                  # the step compiled nothing
    assert len(set(built)) == len(built)                     # none twice
    torch.testing.assert_close(out, _gat_reference(gat, pattern, X), rtol=1e-4, atol=1e-5)


def test_first_forward_uses_the_kernel_under_way(compiles):
    torch.manual_seed(1)
    conv = GraphConv(6, 11, allow_zero_in_degree=True)      # aggregates at 6 features
    deadline = time.monotonic() + 600
    while not background.compiling() and not compiles.made and time.monotonic() < deadline:
        time.sleep(0.01)
    X = torch.randn(N, 6)
    out = conv(ops.SparseMatrix(PATTERN), X)     # waits for the worker, or finds its kernel
    assert compiles.on("MainThread") == []
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)
    assert out[EMPTY_ROW].detach().numpy() == pytest.approx(conv.bias.detach().numpy())
    background.drain()
    assert len(compiles.made) == 1


def test_failed_background_compile_raises_at_the_call_needing_it(compiles):
    key = ("test", "planted", os.getpid())
    job = background.submit(background_jobs.failing_kernel, key)
    with pytest.raises(RuntimeError, match="planted failure in the background"):
        job.result()
    assert key in background.compiling()                  # kept for the call needing it
    with pytest.raises(RuntimeError, match="planted failure in the background"):
        background.remembered(key, lambda: "made here")
    assert background.remembered(key, lambda: "made here") == "made here"   # raised once


def test_opt_out_compiles_on_the_callers_thread(compiles, monkeypatch):
    monkeypatch.setenv(background.ENV, "0")
    assert not background.enabled() and background.submit(pow, 2, 3) is None
    torch.manual_seed(3)
    conv = GraphConv(8, 15, allow_zero_in_degree=True)
    background.drain()
    assert compiles.made == []
    X = torch.randn(N, 8)
    out = conv(ops.SparseMatrix(PATTERN), X)
    assert [thread for thread, _ in compiles.made] == ["MainThread"]
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)


def test_workers_are_no_more_than_the_cores(compiles):
    del compiles
    jobs = [background.submit(background_jobs.process_id, 0.2)
            for _ in range(3 * background.workers() + 1)]
    pids = {job.result() for job in jobs}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= background.workers() <= len(os.sched_getaffinity(0))


def test_warmup_counts_the_workers_compiles(compiles, capsys):
    torch.manual_seed(4)
    conv = GraphConv(7, 13, allow_zero_in_degree=True)
    X = torch.randn(N, 7, requires_grad=True)
    M = ops.SparseMatrix(PATTERN)
    report = sparsetir.warmup(conv, M, X)
    background.drain()
    assert report.compiled <= len(compiles.made) == 1        # before warmup, or during it
    lines = capsys.readouterr().err.splitlines()
    assert len([line for line in lines if "] compiled ops gspmm" in line]) == report.compiled
    out = conv(M, X)
    out.sum().backward()
    assert len(compiles.made) == 1
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)


def test_exit_leaves_no_worker_behind(tmp_path):
    script = textwrap.dedent("""
        import time
        import sparsetir.nn
        from sparsetir.driver import background
        sparsetir.nn.GATConv(3, 2, num_heads=2)          # its kernels start compiling
        while not background._STATE["workers"]:
            time.sleep(0.01)
        print(" ".join(str(p.pid) for p in background._STATE["workers"]), flush=True)
    """)
    env = {**os.environ, background.ENV: "1", "SPARSETIR_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=900, check=True)
    pids = [int(pid) for pid in done.stdout.split()]
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_on_by_default_only_with_enough_cores(monkeypatch):
    monkeypatch.delenv(background.ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(background.AUTO_CORES)))
    assert background.enabled()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(background.AUTO_CORES
                                                                        - 1)))
    assert not background.enabled()
    monkeypatch.setenv(background.ENV, "on")
    assert background.enabled()
    monkeypatch.setenv(background.ENV, "auto")
    assert not background.enabled()
