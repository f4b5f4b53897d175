"""``benchmarks/bench.py``'s schedule of measurements and ``worker_process.py``, without the
libraries: every contender is asked for a case before the next case, in a rotated order, once
the other workers are quiet; a worker that dies costs only its own remaining cases; the first
round's one-off costs are the ones reported.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench  # noqa: E402  pylint: disable=wrong-import-position
import worker_process  # noqa: E402  pylint: disable=wrong-import-position
from worker_process import WorkerGone, WorkerProcess  # noqa: E402  pylint: disable=wrong-import-position

SETTINGS = {"contenders": ["ours", "dgl", "mkl"], "feats": [32, 64], "ops": ["spmm", "sddmm"],
            "dtypes": ["float32"], "rounds": 2, "threads": 2, "budget": 0.1, "min_repeat": 3,
            "max_repeat": 10, "omp_wait_policy": "unset"}


class FakeWorker:
    """Answers like ``worker.py``, logging each question; dies at its ``dies_at``-th one."""

    def __init__(self, name, log, dies_at=None):
        self.name, self.log, self.dies_at, self.asked, self.pid = name, log, dies_at, 0, 0
        self.closed = False

    def ask(self, case):
        self.asked += 1
        if self.asked == self.dies_at:
            raise WorkerGone("worker exited (-9): killed")
        feat, op, dtype = case.split()
        self.log.append((self.name, int(feat), op))
        return json.dumps({"contender": self.name, "graph": "g", "feat": int(feat), "op": op,
                           "dtype": dtype, "status": "ok", "median_ms": 1.0})

    def close(self):
        self.closed = True


def run(monkeypatch, dies=None):
    log, made, quiet_for = [], {}, []

    def start(name, graph, settings, cache, condition):
        made[name] = FakeWorker(name, log, (dies or {}).get(name))
        return made[name]
    monkeypatch.setattr(bench, "start_worker", start)
    monkeypatch.setattr(bench, "wait_until_quiet", lambda pids: quiet_for.append(pids) or 0.0)
    records = bench.run_graph("g", SETTINGS, Path("."), lambda record: None, "idle")
    return records, log, made, quiet_for


def test_every_contender_is_asked_for_a_case_before_the_next_case(monkeypatch):
    records, log, made, quiet_for = run(monkeypatch)
    cases = [(f, op) for f in (32, 64) for op in ("spmm", "sddmm")]
    assert len(log) == 3 * len(cases) * 2
    turns = [log[i:i + 3] for i in range(0, len(log), 3)]
    for turn, (feat, op) in zip(turns, cases * 2):
        assert {(n, f, o) for n, f, o in turn} == {(n, feat, op) for n in ("ours", "dgl", "mkl")}
    firsts = [turn[0][0] for turn in turns]
    assert firsts[:4] == ["ours", "dgl", "mkl", "ours"]           # rotated at every case
    assert firsts[4:8] == ["dgl", "mkl", "ours", "dgl"]           # and at every round
    assert len(quiet_for) == len(log) and all(len(pids) == 2 for pids in quiet_for)
    assert all(r["status"] == "ok" and r["condition"] == "idle" for r in records)
    assert all(worker.closed for worker in made.values())


def test_a_dead_worker_costs_only_its_own_cases(monkeypatch):
    records, log, made, _ = run(monkeypatch, dies={"dgl": 3})
    dgl = [r for r in records if r["contender"] == "dgl"]
    assert [r["status"] for r in dgl] == ["ok", "ok"] + ["error"] * 6
    assert all(r["note"] == "worker exited (-9): killed" for r in dgl[2:])
    assert sum(1 for name, _, _ in log if name == "dgl") == 2
    assert all(r["status"] == "ok" for r in records if r["contender"] != "dgl")
    assert len(records) == 3 * 8 and made["dgl"].closed


def test_the_first_rounds_compile_and_search_are_reported():
    rounds = [{"contender": "ours_tuned", "graph": "g", "feat": 32, "op": "spmm",
               "dtype": "float32", "condition": "idle", "status": "ok", "median_ms": ms,
               "first_call_ms": first, "prepare_ms": prepare}
              for ms, first, prepare in ((2.0, 900.0, 4000.0), (1.0, 3.0, 1.0))]
    (merged,) = bench.median_of_rounds(rounds)
    assert merged["median_ms"] == 1.0 and merged["round_ms"] == [2.0, 1.0]
    assert merged["first_call_ms"] == 900.0 and merged["prepare_ms"] == 4000.0


def worker(code, tmp_path):
    stderr = open(tmp_path / "stderr", "w+")  # pylint: disable=consider-using-with
    return WorkerProcess([sys.executable, "-c", code], env=None, cwd=None, stderr=stderr)


def test_worker_process_answers_and_reports_how_it_ended(tmp_path):
    echo = ("import sys\nprint('READY', flush=True)\n"
            "for line in sys.stdin:\n"
            "    if line.startswith('64'): sys.exit('out of memory')\n"
            "    print('chatter'); print('RESULT ' + line.strip(), flush=True)\n")
    proc = worker(echo, tmp_path)
    assert proc.ask("32 spmm float32") == "32 spmm float32\n"
    with pytest.raises(WorkerGone, match=r"worker exited \(1\): out of memory"):
        proc.ask("64 spmm float32")
    proc.close()
    with pytest.raises(WorkerGone, match="cannot load the graph"):
        worker("import sys; sys.exit('cannot load the graph')", tmp_path)


def test_quiet_means_no_thread_of_the_others_runs(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)                       # both started
        assert worker_process.cpu_time_ns([spinner.pid]) > 0
        assert worker_process.wait_until_quiet([sleeper.pid]) < 0.1
        assert worker_process.wait_until_quiet([sleeper.pid, spinner.pid]) \
            >= worker_process.QUIET_LIMIT_S
    finally:
        sleeper.kill()
        spinner.kill()
