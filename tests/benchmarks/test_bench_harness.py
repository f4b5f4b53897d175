"""``benchmarks/bench.py``'s schedule of measurements and ``worker_process.py``, without the
libraries: every contender is asked for a case before the next case, in a rotated order, with
the other workers stopped; a worker that dies or answers another case costs that case only;
the first round's one-off costs are the ones reported.
"""

import json
import os
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
    """Answers like ``worker.py``, logging each question with the workers then paused; dies
    at its ``dies_at``-th question, answers another case at its ``lies_at``-th."""

    def __init__(self, name, log, made, dies_at=None, lies_at=None):
        self.name, self.log, self.made, self.asked = name, log, made, 0
        self.dies_at, self.lies_at, self.paused, self.closed = dies_at, lies_at, False, False

    def pause(self):
        self.paused = True

    def ask(self, case):
        self.paused = False
        self.asked += 1
        if self.asked == self.dies_at:
            raise WorkerGone("worker exited (-9): killed")
        feat, op, dtype = case.split()
        others = {w.name for ws in self.made.values() for w in ws if w is not self}
        paused = {w.name for ws in self.made.values() for w in ws if w.paused or w.closed}
        self.log.append((self.name, int(feat), op, others <= paused))
        if self.asked == self.lies_at:
            feat = "1024"
        return json.dumps({"contender": self.name, "graph": "g", "feat": int(feat), "op": op,
                           "dtype": dtype, "status": "ok", "median_ms": 1.0})

    def close(self):
        self.closed = True


def run(monkeypatch, dies=None, lies=None, fails=()):
    log, made, starts = [], {}, []

    def start(name, graph, settings, cache, condition):
        starts.append(name)
        if name in fails:
            raise WorkerGone("worker exited (1): no module named dgl")
        fresh = not made.get(name)
        worker = FakeWorker(name, log, made, (dies or {}).get(name) if fresh else None,
                            (lies or {}).get(name) if fresh else None)
        made.setdefault(name, []).append(worker)
        return worker
    monkeypatch.setattr(bench, "start_worker", start)
    records = bench.run_graph("g", SETTINGS, Path("."), lambda record: None, "idle")
    return records, log, made, starts


def test_every_contender_is_asked_for_a_case_before_the_next_case(monkeypatch):
    records, log, made, _ = run(monkeypatch)
    cases = [(f, op) for f in (32, 64) for op in ("spmm", "sddmm")]
    assert len(log) == 3 * len(cases) * 2
    turns = [log[i:i + 3] for i in range(0, len(log), 3)]
    for turn, (feat, op) in zip(turns, cases * 2):
        assert {(n, f, o) for n, f, o, _ in turn} == {(n, feat, op) for n in ("ours", "dgl", "mkl")}
    orders = [[n for n, _, _, _ in turn] for turn in turns]
    assert orders[:4] == [["ours", "dgl", "mkl"], ["dgl", "mkl", "ours"],      # rotated
                          ["mkl", "ours", "dgl"], ["ours", "dgl", "mkl"]]
    assert orders[4:6] == [["mkl", "dgl", "ours"], ["dgl", "ours", "mkl"]]     # reversed
    assert all(others_paused for _, _, _, others_paused in log)
    assert all(r["status"] == "ok" and r["condition"] == "idle" for r in records)
    assert all(len(ws) == 1 and ws[0].closed for ws in made.values())


def test_a_worker_that_dies_or_answers_another_case_costs_that_case(monkeypatch):
    records, log, made, _ = run(monkeypatch, dies={"dgl": 3}, lies={"mkl": 2})
    dgl = [r for r in records if r["contender"] == "dgl"]
    assert [r["status"] for r in dgl] == ["ok", "ok", "error"] + ["ok"] * 5
    assert dgl[2]["note"] == "worker exited (-9): killed" and dgl[2]["feat"] == 64
    mkl = [r for r in records if r["contender"] == "mkl"]
    assert [r["status"] for r in mkl] == ["ok", "error"] + ["ok"] * 6
    assert mkl[1]["note"].startswith("answered another case") and mkl[1]["op"] == "sddmm"
    assert len(made["dgl"]) == len(made["mkl"]) == 2 and len(made["ours"]) == 1
    assert all(w.closed for ws in made.values() for w in ws)
    assert len(records) == 3 * 8 and all(others_paused for *_, others_paused in log)


def test_a_worker_that_cannot_start_is_not_started_again(monkeypatch):
    records, log, _, starts = run(monkeypatch, fails=("dgl",))
    dgl = [r for r in records if r["contender"] == "dgl"]
    assert len(dgl) == 8 and all(r["status"] == "error" for r in dgl)
    assert all(r["note"] == "could not start: worker exited (1): no module named dgl"
               for r in dgl)
    assert starts.count("dgl") == 1 and len(log) == 2 * 8


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


ECHO = ("import sys, threading\n"
        "def spin():\n"
        "    while True:\n"
        "        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "print('READY', flush=True)\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('64'): sys.exit('out of memory')\n"
        "    if line.startswith('128'): continue\n"
        "    print('chatter ' * 20000, end='', flush=True)\n"
        "    print('RESULT ' + line.strip(), flush=True)\n")


def cpu_ns(pid):
    return sum(int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
               for tid in os.listdir(f"/proc/{pid}/task"))


def test_worker_process_answers_and_reports_how_it_ended(tmp_path, monkeypatch):
    proc = worker(ECHO, tmp_path)
    assert proc.ask("32 spmm float32") == "32 spmm float32"   # after chatter on its line
    with pytest.raises(WorkerGone, match=r"worker exited \(1\): out of memory"):
        proc.ask("64 spmm float32")
    proc.close()
    with pytest.raises(WorkerGone, match="cannot load the graph"):
        worker("import sys; sys.exit('cannot load the graph')", tmp_path)
    monkeypatch.setattr(worker_process, "CASE_TIMEOUT_S", 1)
    silent = worker(ECHO, tmp_path)
    with pytest.raises(WorkerGone, match="no answer within 1 s"):
        silent.ask("128 spmm float32")
    silent.close()
    assert silent.proc.returncode is not None


def test_a_paused_worker_runs_no_thread_until_asked(tmp_path):
    proc = worker(ECHO, tmp_path)                  # one of its threads spins
    try:
        proc.pause()
        time.sleep(0.05)
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        before = cpu_ns(proc.pid)
        time.sleep(0.3)
        assert state == "T" and cpu_ns(proc.pid) == before
        assert proc.ask("32 spmm float32") == "32 spmm float32"
        time.sleep(0.3)
        assert cpu_ns(proc.pid) > before
    finally:
        proc.close()
