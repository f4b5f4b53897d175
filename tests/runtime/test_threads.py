"""``sparsetir.runtime.threads``: kernels' parallel loops on sparsetir's task pool.

What the module does to a process (a launcher registered with tvm-ffi, decided once) is checked
in fresh processes: this file run as a script (``python test_threads.py CHECK``) does one check
and prints its findings as JSON; a hang fails the test after a timeout instead of stopping the
run. Whether a kernel ran on the task pool is seen in the workers it says it started
(``threads.pool_workers``) and in the threads the process has.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from sparsetir.runtime import threads

HERE = Path(__file__).resolve()
TIMEOUT_S = 180


def run_check(check: str, *arguments: str, **env: str) -> dict:
    """Run ``check`` (a function below) with ``arguments`` in a fresh process, with ``env``
    added to the environment (a None value removes the variable; TVM's pool settings are removed
    unless given); its findings."""
    base = {k: v for k, v in os.environ.items() if k not in threads.TVM_POOL_SETTINGS}
    environment = {k: v for k, v in {**base, **env}.items() if v is not None}
    with subprocess.Popen([sys.executable, str(HERE), check, *arguments], env=environment,
                          text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"check {check} hung") from None
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- checks run in a fresh process

def _matrix(m=300, n=200, seed=0):
    """A float32 CSR matrix with every fifth row empty, columns sorted within rows (the
    nonzero order of a ``SparseMatrix``)."""
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(m, n, density=0.05, format="csr", dtype=np.float32, random_state=rng)
    A = (scipy.sparse.diags((np.arange(m) % 5 != 0).astype(np.float32)) @ A).tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    return A


def _thread_ids() -> set:
    return set(os.listdir("/proc/self/task"))


def check_pool(torch_first: str = "1") -> dict:
    """Import in the order asked, run a torch operator on ``TVM_NUM_THREADS`` threads (its
    OpenMP team starts; the kernels follow torch's count, set after the import), then the
    first kernels; which pool was chosen, how many threads the kernels started (and
    how many the task pool says it started), and their largest error against scipy (outputs
    start as NaN). The matrix is large enough for its calls to run on a team."""
    if torch_first == "1":
        import torch
        import sparsetir.ops
    else:
        import sparsetir.ops
        import torch
    from sparsetir.runtime.threads import cooperate_with_torch, pool_workers

    torch.set_num_threads(int(os.environ["TVM_NUM_THREADS"]))
    torch.ones(1 << 22).mul_(2)                       # large enough to run on torch's team
    decision = cooperate_with_torch()
    before = _thread_ids()
    A = _matrix(12000, 1000)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((A.shape[1], 24)).astype(np.float32)
    Y = rng.standard_normal((A.shape[0], 24)).astype(np.float32)
    M = sparsetir.ops.SparseMatrix(A)
    out = np.full((A.shape[0], 24), np.nan, np.float32)
    assert out.nbytes > threads.SERIAL_BYTES
    sparsetir.ops.spmm(M, X, out=out)
    values = np.full(A.nnz, np.nan, np.float32)
    sparsetir.ops.sddmm(M, Y, X, out=values)
    started = len(_thread_ids() - before)
    coo = A.tocoo()
    expected_values = np.einsum("ij,ij->i", Y[coo.row], X[coo.col])
    torch_out = sparsetir.ops.spmm(M, torch.from_numpy(X))
    return {"pool": decision.pool, "reason": decision.reason, "threads": decision.threads,
            "again_same": cooperate_with_torch() is decision, "started": started,
            "workers": pool_workers(),
            "spmm_error": float(np.abs(out - A @ X).max()),
            "sddmm_error": float(np.abs(values - expected_values).max()),
            "torch_error": float(np.abs(torch_out.numpy() - A @ X).max())}


def check_follow_torch() -> dict:
    """Kernel calls (on numpy arrays: the task pool; on torch tensors: torch's team) before and
    after ``torch.set_num_threads`` calls made after ``import sparsetir``: the threads each
    launch was cut for, the kernels' count, the pool's workers and launches, the largest error
    against scipy (outputs start as NaN)."""
    import sparsetir.ops
    import torch
    from sparsetir.runtime import threads as module

    A = _matrix(6000, 800)
    M = sparsetir.ops.SparseMatrix(A)
    X = np.random.default_rng(2).standard_normal((A.shape[1], 16)).astype(np.float32)
    found = {"error": 0.0, "steps": []}

    def call(torch_call: bool):
        out = np.full((A.shape[0], 16), np.nan, np.float32)
        if torch_call:
            out = sparsetir.ops.spmm(M, torch.from_numpy(X)).numpy()
        else:
            sparsetir.ops.spmm(M, X, out=out)
        found["error"] = max(found["error"], float(np.abs(out - A @ X).max()))
        return module.last_launch_threads()

    def step(label):
        launches = module.pool_launches()
        numpy_team = call(False)
        found["steps"].append({"label": label, "count": module.thread_count(),
                               "numpy": numpy_team, "torch": call(True),
                               "pooled": module.pool_launches() - launches,
                               "workers": module.pool_workers()})

    step("environment")
    for count in (3, 1, 2):
        torch.set_num_threads(count)
        step(f"torch {count}")
    return found


def check_concurrent_callers() -> dict:
    """Kernels called from three Python threads at once (the call releases the GIL: each
    caller's parallel loop is an OpenMP region of its own); the largest error of any call."""
    from concurrent.futures import ThreadPoolExecutor

    import sparsetir.ops
    from sparsetir.runtime.threads import cooperate_with_torch

    decision = cooperate_with_torch()
    A = _matrix(2000, 1500)
    M = sparsetir.ops.SparseMatrix(A)
    inputs = [np.random.default_rng(seed).standard_normal((1500, 16)).astype(np.float32)
              for seed in range(3)]

    def worst(X):
        out = np.full((2000, 16), np.nan, np.float32)
        error = 0.0
        for _ in range(40):
            out.fill(np.nan)
            sparsetir.ops.spmm(M, X, out=out)
            error = max(error, float(np.abs(out - A @ X).max()))
        return error
    with ThreadPoolExecutor(3) as callers:
        errors = list(callers.map(worst, inputs))
    return {"pool": decision.pool, "error": max(errors)}


def check_every_share_runs_once() -> dict:
    """A kernel whose parallel loop adds 1 to each entry, launched many times from the main
    thread and from two more threads at once: every entry must count every launch once (a
    share run twice, or skipped, would show)."""
    from concurrent.futures import ThreadPoolExecutor

    import tvm
    from tvm.script import tirx as T

    import sparsetir
    from sparsetir.runtime.threads import SERIAL_BYTES, cooperate_with_torch

    decision = cooperate_with_torch()

    @T.prim_func
    def count(a: T.handle, n: T.int32):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A = T.match_buffer(a, (n,), "int32")
        for i in T.parallel(n):
            A[i] = A[i] + 1

    kernel = sparsetir.build(tvm.IRModule({"main": count}), "llvm", schedule="none")
    n, launches = SERIAL_BYTES // 4 + 13, 300

    def launch_many(_):
        out = np.zeros(n, np.int32)
        for _ in range(launches):
            kernel(out, n)
        return sorted(set(out.tolist()))
    alone = launch_many(0)
    with ThreadPoolExecutor(2) as callers:
        together = list(callers.map(launch_many, range(2)))
    return {"pool": decision.pool, "counts": [alone, *together]}


def check_task_error() -> dict:
    """A kernel compiled after the launcher is registered, whose parallel loop fails in the
    task of the second thread: the error's message reaches Python; valid input computes."""
    import tvm
    from tvm.script import tirx as T

    from sparsetir.runtime.threads import cooperate_with_torch

    decision = cooperate_with_torch()

    @T.prim_func
    def double(a: T.handle):
        T.func_attr({"global_symbol": "double"})
        A = T.match_buffer(a, (64,), "float32")
        for i in T.parallel(64):
            assert A[i] >= T.float32(0), "negative entry"
            A[i] = A[i] * T.float32(2)

    kernel = tvm.compile(double, "llvm")["double"]
    x = np.arange(64, dtype=np.float32)
    good = tvm.runtime.tensor(x)
    kernel(good)
    x[50] = -1                                        # in the second half: the second task
    try:
        kernel(tvm.runtime.tensor(x))
        raised = None
    except Exception as err:                          # noqa: BLE001  (reported, then checked)
        raised = [type(err).__name__, str(err)]
    return {"pool": decision.pool, "doubled": bool(np.array_equal(good.numpy(),
                                                                  np.arange(64) * 2.0)),
            "raised": raised}


def check_fork() -> dict:
    """``fork_workers.py``'s children (multiprocessing, DataLoader, a bare ``os.fork`` and a
    thread it starts) with the launcher registered before the parent's first kernel."""
    import contextlib
    import io

    import fork_workers
    from sparsetir.runtime.threads import cooperate_with_torch

    decision = cooperate_with_torch()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fork_workers.main()
    return {"pool": decision.pool, "printed": printed.getvalue().strip()}


def check_small_calls_run_serially() -> dict:
    """A kernel whose parallel loop writes the id of the thread that ran each iteration, called
    with arrays just under, at and over ``SERIAL_BYTES`` (plain on numpy arrays, bound on torch
    tensors): how many threads each call used, and how many of its launches ran on the task
    pool."""
    import torch
    import tvm
    from tvm.script import tirx as T

    import sparsetir
    from sparsetir.runtime.threads import SERIAL_BYTES, cooperate_with_torch

    torch.set_num_threads(2)
    torch.ones(1 << 22).mul_(2)
    decision = cooperate_with_torch()

    @T.prim_func
    def threads_of(a: T.handle, n: T.int32):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A = T.match_buffer(a, (n,), "int64")
        for i in T.parallel(n):
            A[i] = T.Cast("int64", T.call_extern("uint64", "pthread_self"))

    kernel = sparsetir.build(tvm.IRModule({"main": threads_of}), "llvm", schedule="none")
    def most_threads(call, out, tries=20):
        """Over ``tries`` calls: the most threads one used (at most 2; a worker that is still
        waking takes no share of a call, the caller does them all), and the launches that ran
        on the pool per call."""
        most, before = 0, threads.pool_launches()
        for _ in range(tries):
            call()
            most = max(most, len(set(out.tolist())))
        return [most, (threads.pool_launches() - before) / tries]

    used = {}
    for label, n in (("small", 64), ("under", SERIAL_BYTES // 8 - 1),
                     ("at", SERIAL_BYTES // 8), ("small_again", 100)):
        out = np.zeros(n, np.int64)
        bound_out = torch.zeros(n, dtype=torch.int64)
        bound = kernel.bind(n=n)
        used[label] = [most_threads(lambda: kernel(out, n), out),
                       most_threads(lambda: bound(bound_out), bound_out)]
        bound(bound_out)
        used[label + "_team"] = threads.last_launch_threads()   # the team it was cut for
    # timing runs as a call would: a large call timed after a small one keeps its team
    big = np.zeros(SERIAL_BYTES // 8, np.int64)

    def timed():
        kernel(np.zeros(8, np.int64), 8)
        kernel.time(big, big.size, number=1, repeat=1)
    used["timed"] = most_threads(timed, big)[1]
    return {"pool": decision.pool, "used": used}


def check_small_calls_off_the_main_thread() -> dict:
    """Small kernel calls from a second Python thread, over more than one spread interval:
    the OS threads that appeared while it called (a team would bring its own)."""
    import time

    import sparsetir.ops
    from sparsetir.runtime.threads import SPREAD_INTERVAL_S, cooperate_with_torch

    decision = cooperate_with_torch()
    A = _matrix()
    M = sparsetir.ops.SparseMatrix(A)
    X = np.ones((A.shape[1], 4), np.float32)
    sparsetir.ops.spmm(M, X)                          # kernels loaded before counting
    found = {}

    def caller():
        before = _thread_ids()
        for _ in range(3):
            sparsetir.ops.spmm(M, X)
            time.sleep(SPREAD_INTERVAL_S * 1.2)
        found["started"] = len(_thread_ids() - before)
    worker = threading.Thread(target=caller)
    worker.start()
    worker.join()
    return {"pool": decision.pool, **found}


def check_spread_leaves_threads_unbound() -> dict:
    """The team's threads all bound to one CPU (torch's operator runs on them there), then
    spread; then freed again and spread: what each spread returned, and whether every thread
    of the process kept the affinity it had before each spread."""
    import torch

    from sparsetir.runtime import threads as module

    torch.set_num_threads(2)
    torch.ones(1 << 22).mul_(2)
    decision = module.cooperate_with_torch()
    usable = os.sched_getaffinity(0)

    def bind_all(cpus):
        for task in _thread_ids():
            os.sched_setaffinity(int(task), cpus)
        torch.ones(1 << 22).mul_(2)                   # the team runs where it is allowed

    def masks():
        return {task: sorted(os.sched_getaffinity(int(task))) for task in _thread_ids()}

    bind_all({min(usable)})
    before_bound = masks()
    moved_bound = module.spread_team()
    after_bound = masks()
    bind_all(usable)
    before_free = masks()
    moved_free = module.spread_team()
    regions = module.spread_regions()
    for _ in range(5):
        torch.ones(1 << 22).mul_(2)
        module.spread_team()
    return {"pool": decision.pool, "cpus": len(usable), "moved_bound": moved_bound,
            "kept_bound": after_bound == before_bound, "moved_free": moved_free,
            "kept_free": masks() == before_free,
            "spreads": module._spread is not None,
            "regions_first": regions, "regions_later": module.spread_regions() - regions}


# ---------------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("torch_first", ["1", "0"], ids=["torch-first", "sparsetir-first"])
def test_kernels_run_on_the_task_pool(torch_first):
    found = run_check("check_pool", torch_first, TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks", found["reason"]
    assert found["threads"] == 2
    assert found["again_same"]
    assert found["workers"] == 1 and found["started"] == 1     # one worker, and nothing else
    assert found["spmm_error"] < 1e-4
    assert found["sddmm_error"] < 1e-4
    assert found["torch_error"] < 1e-4


@pytest.mark.parametrize("setting", threads.TVM_POOL_SETTINGS)
def test_explicit_tvm_pool_settings_keep_tvms_pool(setting):
    found = run_check("check_pool", TVM_NUM_THREADS="2", **{setting: "1"})
    assert found["pool"] == "tvm"
    assert setting in found["reason"]
    assert found["started"] >= 1 and found["workers"] == 0    # TVM's worker thread
    assert found["spmm_error"] < 1e-4
    assert found["sddmm_error"] < 1e-4


def test_more_threads_than_cores_still_correct():
    found = run_check("check_pool", TVM_NUM_THREADS="5")
    assert found["pool"] == "tasks" and found["threads"] == 5 and found["workers"] == 4
    assert found["spmm_error"] < 1e-4 and found["sddmm_error"] < 1e-4


@pytest.mark.parametrize("environment,first", [({"TVM_NUM_THREADS": "2"}, 2),
                                               ({"OMP_NUM_THREADS": "1"}, 1)])
def test_kernels_follow_torch_set_num_threads(environment, first):
    base = {name: None for name in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    found = run_check("check_follow_torch", **{**base, **environment})
    assert found["error"] < 1e-4
    steps = {step["label"]: step for step in found["steps"]}
    start = steps["environment"]          # the environment's count until torch's changes
    assert start["count"] == start["torch"] == start["numpy"] == first
    for count in (3, 1, 2):
        step = steps[f"torch {count}"]
        assert step["count"] == step["torch"] == step["numpy"] == count, step
        assert (step["pooled"] > 0) == (count > 1), step     # the numpy call's, on the pool
    assert steps["torch 3"]["workers"] == 2                      # started as the pool grew


def test_concurrent_callers_get_right_numbers():
    found = run_check("check_concurrent_callers", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks"
    assert found["error"] < 1e-4


def test_every_share_runs_exactly_once():
    found = run_check("check_every_share_runs_once", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks"
    assert found["counts"] == [[300]] * 3


def test_error_in_a_task_reaches_python():
    found = run_check("check_task_error", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks"
    assert found["doubled"]
    assert found["raised"] is not None and found["raised"][0] == "RuntimeError"
    assert "negative entry" in found["raised"][1]


def test_forked_children_run_kernels():
    found = run_check("check_fork", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks"
    assert found["printed"] == "OK 11"


def test_calls_under_serial_bytes_run_on_the_calling_thread():
    found = run_check("check_small_calls_run_serially", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks"
    serial, pooled = [1, 0], [[1, 1], [2, 1]]                # [most threads, on the pool]
    assert found["used"]["small"] == found["used"]["under"] == [serial, serial]
    assert found["used"]["small_again"] == [serial, serial]
    assert found["used"]["at"][0] in pooled                  # numpy: the task pool
    # torch: torch's OpenMP team (cut for 2 threads, none on the pool); on a busy machine its
    # second thread may take no share in any of the tries (the caller claims them all)
    assert found["used"]["at_team"] == 2 and found["used"]["at"][1] in ([2, 0], [1, 0])
    assert found["used"]["small_team"] == 1                  # a serial launch: its caller
    assert found["used"]["timed"] >= 1                       # its warm-up and timed runs


def test_spreading_the_team_never_binds_it():
    found = run_check("check_spread_leaves_threads_unbound", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks" and found["spreads"]
    assert found["moved_bound"] == 0 and found["kept_bound"]     # bound threads stay
    assert 0 <= found["moved_free"] <= 1 and found["kept_free"]   # moved ones are not bound
    if found["cpus"] < 2:
        assert found["moved_free"] == 0
    else:       # one region learnt the team; later spreads read /proc and wake nobody
        assert found["regions_first"] == 1 and found["regions_later"] == 0


def test_small_calls_off_the_main_thread_start_no_team():
    found = run_check("check_small_calls_off_the_main_thread", TVM_NUM_THREADS="2")
    assert found["pool"] == "tasks" and found["started"] == 0


@pytest.mark.parametrize("setting", ["OMP_PROC_BIND=true", "OMP_PROC_BIND=close",
                                     "OMP_PLACES=cores", "GOMP_CPU_AFFINITY=0-1"])
def test_threads_the_user_binds_are_never_spread(setting):
    name, value = setting.split("=")
    found = run_check("check_spread_leaves_threads_unbound", TVM_NUM_THREADS="2",
                      **{name: value})
    assert found["pool"] == "tasks" and not found["spreads"]
    assert found["moved_bound"] == found["moved_free"] == 0


# (thread i's CPU, the usable CPUs) -> the CPU thread i moves to, -1 for none
SPREAD_PLANS = [
    (([1, 1], [0, 1]), [-1, 0]),                 # the second thread leaves the first's CPU
    (([0, 1], [0, 1]), [-1, -1]),                # already apart
    (([0, 0, 0], [0, 1, 2, 3]), [-1, 1, 2]),     # each crowded one to a CPU of its own
    (([0, 0], [0]), [-1, -1]),                   # nowhere to go
    (([2, 2, 2], [2, 5]), [-1, 5, -1]),          # one free CPU for two crowded threads
    (([3, 5, 3], [3, 5]), [-1, -1, -1]),         # every usable CPU has a thread already
    (([-1, -1], [0, 1]), [-1, -1]),              # sched_getcpu failed: nothing is known
    (([0, 0, 1], [0, 1, 2]), [-1, 2, -1]),       # a later thread's entry is no claim yet
]


@pytest.mark.parametrize("team, expected", SPREAD_PLANS)
def test_spread_plan(team, expected):
    import ctypes

    threads.cooperate_with_torch()
    if threads._spread_library is None:
        pytest.skip("torch's team is not spread in this process")
    cpus, usable = team
    ints = ctypes.c_int * len(cpus)
    target = ints(*[usable[-1]] * len(cpus))     # what a previous plan may have left there
    threads._spread_library.sparsetir_openmp_plan_spread(
        len(cpus), ints(*cpus), len(usable), (ctypes.c_int * len(usable))(*usable), target)
    assert list(target) == expected


def test_binding_settings_are_recognised():
    assert not threads._binds_threads({})
    assert not threads._binds_threads({"OMP_PROC_BIND": "false", "OMP_PLACES": " "})
    assert threads._binds_threads({"OMP_PROC_BIND": "TRUE"})
    assert threads._binds_threads({"GOMP_CPU_AFFINITY": "0 1"})


def test_explicit_setting_decides_without_building(monkeypatch):
    monkeypatch.setenv("TVM_THREAD_POOL_SPIN_COUNT", "0")
    monkeypatch.setattr(threads, "_install_task_pool",
                        lambda count: pytest.fail("built the launcher despite the setting"))
    decision = threads._decide()
    assert decision.pool == "tvm" and "TVM_THREAD_POOL_SPIN_COUNT" in decision.reason


def test_decided_once_across_threads(monkeypatch):
    calls = []
    monkeypatch.setattr(threads, "_decided", None)
    monkeypatch.setattr(threads, "_decide",
                        lambda: calls.append(1) or threads.Cooperation("tvm", 1, "test"))
    results = []
    workers = [threading.Thread(target=lambda: results.append(threads.cooperate_with_torch()))
               for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(calls) == 1 and len({id(result) for result in results}) == 1


@pytest.mark.parametrize("value", ["2", "7"])
def test_thread_count_is_tvm_num_threads(monkeypatch, value):
    monkeypatch.setattr(threads, "_followed", None)   # no torch.set_num_threads seen (another
    monkeypatch.setenv("TVM_NUM_THREADS", value)      # test of this process may have made one)
    assert threads.thread_count() == int(value)


@pytest.mark.parametrize("value", [None, "", "0", "-2", " 3", "3x", "abc", "\u0663"])
def test_thread_count_is_the_usable_cores_without_a_positive_number(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("TVM_NUM_THREADS", value)
    assert threads.thread_count() == len(os.sched_getaffinity(0))


if __name__ == "__main__":
    name, *arguments = sys.argv[1:]
    print(json.dumps(globals()[name](*arguments)))
