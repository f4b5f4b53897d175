"""Background compiles (``driver.background``, ``nn.kernel_plans``): a layer compiles, when it
is built, the kernels of its forward and backward on a pool of threads bounded by the cores.

Each test turns them on (``tests/conftest.py`` turns them off), with an empty disk cache and
nothing in memory, and records every compile (``build_module.compile_stage2``) with the thread
that ran it. Checked: kernels compiled in the background are the ones the training step uses
(it compiles nothing more, and no kernel compiles twice), the first forward waits for a kernel
under way and equals a scipy / dense torch reference, a background compile that fails raises at
the call that needs the kernel (and only there, once), the opt-out compiles everything on the
caller's thread, the pool never runs more compiles at a time than there are cores, and
``warmup`` runs a list of operator calls on the pool.
"""

import os
import threading
import time

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir
import sparsetir.ops as ops
from sparsetir.driver import background, build_module, cache
from sparsetir.nn import GATConv, GraphConv, kernel_plans

N = 9
_A = scipy.sparse.random(N, N, density=0.3, format="csr", dtype=np.float32, random_state=2)
EMPTY_ROW = 4
PATTERN = (scipy.sparse.diags((np.arange(N) != EMPTY_ROW).astype(np.float32)) @
           (_A + scipy.sparse.identity(N, dtype=np.float32))).tocsr()   # row 4: no in-edge


class Compiles:
    """The compiles made while a test runs: ``[(thread name, module script)]``; ``hook`` runs
    on the compiling thread before each."""

    def __init__(self):
        self.made = []
        self.hook = lambda: None

    def __call__(self, real):
        def recorded(mod, *args, **kwargs):
            self.made.append((threading.current_thread().name, mod.script()))
            self.hook()
            return real(mod, *args, **kwargs)
        return recorded

    def on(self, where: str) -> list:
        return [name for name, _ in self.made if name.startswith(where)]


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """Background compiles on, an empty disk cache, nothing in memory, compiles recorded."""
    monkeypatch.setenv(background.ENV, "1")
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMORY", {})
    monkeypatch.setattr(kernel_plans, "_SUBMITTED", set())
    recorder = Compiles()
    monkeypatch.setattr(build_module, "compile_stage2", recorder(build_module.compile_stage2))
    yield recorder
    background.drain()        # nothing left running into the next test


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
    built = compiles.on(background.THREAD_PREFIX)
    assert built and len(built) == len(compiles.made)        # all on the pool
    pattern = (PATTERN + scipy.sparse.identity(N, dtype=np.float32, format="csr")).tocsr()
    X = torch.randn(N, 5, requires_grad=True)
    out = gat(ops.SparseMatrix(pattern), X)
    out.sum().backward()
    assert len(compiles.made) == len(built)                  # the step compiled nothing
    assert len({script for _, script in compiles.made}) == len(built)   # none twice
    torch.testing.assert_close(out, _gat_reference(gat, pattern, X), rtol=1e-4, atol=1e-5)


def test_first_forward_waits_for_the_kernel_under_way(compiles):
    started = threading.Event()

    def slow_in_background():
        if threading.current_thread().name.startswith(background.THREAD_PREFIX):
            started.set()
            time.sleep(0.5)                      # the caller arrives while this compiles
    compiles.hook = slow_in_background
    torch.manual_seed(1)
    conv = GraphConv(6, 11, allow_zero_in_degree=True)      # aggregates at 6 features
    assert started.wait(120)
    X = torch.randn(N, 6)
    out = conv(ops.SparseMatrix(PATTERN), X)     # needs the kernel the pool is compiling
    assert compiles.on("MainThread") == []
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)
    assert out[EMPTY_ROW].detach().numpy() == pytest.approx(conv.bias.detach().numpy())
    background.drain()
    assert len({script for _, script in compiles.made}) == len(compiles.made) == 1


def test_failed_background_compile_raises_at_the_call_needing_it(compiles):
    def fail_in_background():
        if threading.current_thread().name.startswith(background.THREAD_PREFIX):
            raise RuntimeError("planted background failure")
    compiles.hook = fail_in_background
    torch.manual_seed(2)
    conv = GraphConv(7, 13, allow_zero_in_degree=True)
    background.drain()
    assert compiles.on(background.THREAD_PREFIX)            # it was tried, and failed
    M, X = ops.SparseMatrix(PATTERN), torch.randn(N, 7)
    with pytest.raises(RuntimeError, match="planted background failure"):
        conv(M, X)
    out = conv(M, X)                                        # raised once: now compiled here
    assert len(compiles.on("MainThread")) == 1
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)


def test_opt_out_compiles_on_the_callers_thread(compiles, monkeypatch):
    monkeypatch.setenv(background.ENV, "0")
    assert not background.enabled() and background.submit(lambda: None) is None
    torch.manual_seed(3)
    conv = GraphConv(8, 15, allow_zero_in_degree=True)
    background.drain()
    assert compiles.made == []
    X = torch.randn(N, 8)
    out = conv(ops.SparseMatrix(PATTERN), X)
    assert [name for name, _ in compiles.made] == ["MainThread"]
    np.testing.assert_allclose(out.detach().numpy(), _graph_conv_reference(conv, X),
                               rtol=1e-4, atol=1e-5)


def test_pool_runs_no_more_at_a_time_than_the_cores(compiles):
    del compiles
    lock, running, most = threading.Lock(), [0], [0]

    def task():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
    futures = [background.submit(task) for _ in range(4 * background.workers() + 2)]
    for future in futures:
        future.result()
    assert background.workers() == len(os.sched_getaffinity(0))
    assert 1 <= most[0] <= background.workers()


def test_warmup_runs_operator_calls_on_the_pool(compiles):
    M = ops.SparseMatrix(PATTERN)
    X = [torch.randn(N, width, requires_grad=True) for width in (17, 19)]
    report = sparsetir.warmup([lambda x=x: ops.copy_u_max(M, x) for x in X], progress=False)
    assert report.compiled == len(compiles.made) >= 2
    assert len(compiles.on(background.THREAD_PREFIX)) == len(compiles.made)
    made = len(compiles.made)
    for x in X:
        out = ops.copy_u_max(M, x)
        out.sum().backward()
        dense = np.where(PATTERN.toarray()[:, :, None] != 0, x.detach().numpy()[None], -np.inf)
        expected = np.where(np.isfinite(dense.max(1)), dense.max(1), 0)
        np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6)
    assert len(compiles.made) == made
