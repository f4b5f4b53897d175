"""End-to-end GNN training on the CPU: sparsetir.nn against DGL and PyG.

The pieces are in the package ``gnn_training`` (its docstring lists them).

Contenders (``gnn_training/frameworks.py``): ours (``sparsetir.nn``) eagerly in float32, ours
under bfloat16 autocast (``ours_bf16``) and under ``torch.compile`` (``ours_compiled``), DGL,
and PyG eagerly and under ``torch.compile`` (``pyg_compiled``).

Models (``gnn_training/models.py``): GCN (2 layers, hidden 16), GraphSAGE (3 layers, hidden 128, mean),
GAT (2 layers, 4 heads) and RGCN (2 layers, synthetic relations), trained full batch with Adam
from the same seeded initial weights on cora, citeseer, pubmed and the ogbn-arxiv-sized
synthetic power-law graph, with seeded synthetic features at the datasets' published widths and
seeded synthetic labels (``gnn_training/tasks.py``).

Method: every (contender, model, graph) runs in a process of its own
(``gnn_training/worker.py``), all with the same thread count, once idle and once beside one busy process per usable core
(``background_load.busy_processes``); contenders in a rotated order each round. Measured: ms
per epoch (forward, backward, Adam step; the median of the timed epochs after warm-up), the part
of it in sparse operators (``gnn_training/sparse_time.py``), the peak memory of training (peak resident set
minus the resident set before the first epoch: ``rss``, and the same from a second, short run
whose C heap hands every block of 128 KiB or more back when it is freed: ``live``, see
``LIVE_MEMORY_ENV``) and the losses. The check: each contender's
float64 losses from the same weights must agree with DGL's within 1e-4 relative
(``results.check_losses``); a contender that fails it is an ERROR, not a time. The variants
(ours' two, ``pyg_compiled``) are checked against their eager contender in float32 instead, in
their worker, before timing (``worker.eager_check``); the compiled ones' compile times and
graph breaks are reported apart, side by side (``results.compiled``), and a network that
``torch.compile`` refuses is reported ``refused`` with its message. sparsetir's
kernels come from the user's kernel cache (``SPARSETIR_CACHE``, default ``~/.cache/sparsetir``),
filled first by a one-epoch run of its own (``prewarm_ms``: that run's epoch, compiles included).
``OMP_WAIT_POLICY`` is left as the caller set it: how the libraries' thread pools behave under
load with their defaults is part of what is measured. Outputs (``--out``, default
``benchmarks/results/``): ``gnn.csv``, ``gnn.json`` (machine, settings, rows, loss curves) and
``gnn.png`` (needs matplotlib).

Example
-------
``.venv/bin/python benchmarks/gnn.py --quick`` (GCN on cora, ours and DGL: about a minute);
``... gnn.py --quick --contenders ours ours_compiled dgl pyg pyg_compiled`` (with the compiled
rows: a few minutes, most of it inductor compiling); ``.venv/bin/python benchmarks/gnn.py``
(everything); ``.venv/bin/python benchmarks/gnn.py --models sage --graphs cora pubmed
--conditions idle``
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import background_load
import machine
from gnn_training import frameworks, models, results, tasks
from gnn_training.worker import PREFIX

HERE = Path(__file__).resolve().parent
CONDITIONS = ("idle", "load")
QUICK = {"models": ["gcn"], "graphs": ["cora"], "rounds": 1, "contenders": ["ours", "dgl"],
         "conditions": ["idle"]}
FULL = {"models": list(models.MODELS), "graphs": tasks.labels(), "rounds": 1,
        "contenders": list(frameworks.NAMES), "conditions": list(CONDITIONS)}
EPOCHS = {"warmup": 3, "epochs": 20, "profile_epochs": 5, "check_epochs": 10}
LARGE = "synthetic-arxiv"
LARGE_EPOCHS = {"warmup": 1, "epochs": 5, "profile_epochs": 1, "check_epochs": 3}
MEMORY_EPOCHS = {"warmup": 3, "epochs": 3, "profile_epochs": 0, "check_epochs": 0}
WORKER_TIMEOUT_S = 1800
LIVE_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}
"""The environment of the run that measures live memory. By default glibc raises its mmap
threshold as large blocks are freed, so later blocks come from the heap and their pages stay
resident after ``free``: the resident-set peak then measures how the heap fragmented more than
what is alive (the same worker gave 75-106 MiB on GAT/pubmed from run to run). With a fixed
threshold every block of 128 KiB or more is mapped on its own and unmapped when freed, so the
peak is the peak of live data (the same case: 28-30 MiB), for every contender alike. Epochs are
slower so (GAT/pubmed 34 -> 64 ms), so times come from the default run."""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="GCN on cora, ours and DGL, idle only (about a minute)")
    parser.add_argument("--models", nargs="+", choices=list(models.MODELS))
    parser.add_argument("--graphs", nargs="+", choices=tasks.labels())
    parser.add_argument("--contenders", nargs="+", choices=frameworks.NAMES,
                        help="default: all (--quick: ours and dgl)")
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS,
                        help="default: idle and load (--quick: idle)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads for every contender (default: all usable cores)")
    parser.add_argument("--epochs", type=int, help=f"timed epochs (default {EPOCHS['epochs']}; "
                        f"{LARGE_EPOCHS['epochs']} on {LARGE})")
    parser.add_argument("--rounds", type=int, help="sweeps over every case, contenders in a "
                        "rotated order each time; a time is the median of its rounds' (default 1)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    return parser.parse_args(argv)


def settings_of(args: argparse.Namespace) -> dict:
    """The run's settings: the preset (quick or full) overridden by the options given."""
    preset = dict(QUICK if args.quick else FULL)
    preset.update({k: v for k, v in {"models": args.models, "graphs": args.graphs,
                                     "rounds": args.rounds, "contenders": args.contenders,
                                     "conditions": args.conditions}.items() if v})
    epochs = dict(EPOCHS, epochs=args.epochs or EPOCHS["epochs"])
    return {**preset, **epochs, "large_epochs": args.epochs or LARGE_EPOCHS["epochs"],
            "threads": args.threads, "load_processes": len(os.sched_getaffinity(0)),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (library defaults)")}


def epochs_for(graph: str, settings: dict) -> dict:
    """Warm-up, timed, profiled and checked epochs on ``graph``."""
    if graph == LARGE:
        return dict(LARGE_EPOCHS, epochs=settings["large_epochs"])
    return {k: settings[k] for k in EPOCHS}


def worker_env(threads: int) -> dict:
    """Every worker's environment: one thread count for every library, DGL on torch."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
        env[var] = str(threads)
    env["DGLBACKEND"] = "pytorch"
    return env


def run_worker(case: dict, epochs: dict, settings: dict, cache: Path, env: dict = None) -> dict:
    """One worker's result for ``case`` (contender, model, graph, condition), with ``env`` added
    to its environment; an error record when it crashed, printed nothing or ran past
    ``WORKER_TIMEOUT_S``."""
    cmd = [sys.executable, "-m", "gnn_training.worker", "--cache", str(cache),
           "--threads", str(settings["threads"])]
    cmd += [f"--{k}={v}" for k, v in case.items()]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in epochs.items()]
    stderr_path = cache / "{contender}-{model}-{graph}-{condition}.stderr".format(**case)
    with open(stderr_path, "w+") as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env={**worker_env(settings["threads"]), **(env or {})},
                                cwd=HERE)
        timer = threading.Timer(WORKER_TIMEOUT_S, proc.kill)
        timer.start()
        result = None
        for line in proc.stdout:
            if line.startswith(PREFIX):
                result = json.loads(line[len(PREFIX):])
        rc = proc.wait()
        timer.cancel()
        stderr.seek(0)
        last = (stderr.read().strip().splitlines() or [""])[-1]
    return result or {**case, "status": "error", "note": f"worker exited ({rc}): {last}"}


def measure(case: dict, epochs: dict, settings: dict, cache: Path) -> dict:
    """``run_worker`` idle, or beside the background load; the float64 check and the live
    memory run (``LIVE_MEMORY_ENV``, its peak as ``live_peak_mib``) are idle only."""
    if case["condition"] == "idle":
        record = run_worker(case, epochs, settings, cache)
        if record["status"] == "ok":
            memory = dict(MEMORY_EPOCHS, warmup=min(MEMORY_EPOCHS["warmup"], epochs["warmup"]))
            live = run_worker(dict(case, condition="memory"), memory, settings, cache,
                              LIVE_MEMORY_ENV)
            record["live_peak_mib"] = live.get("peak_mib", "")
        return record
    with background_load.busy_processes(settings["load_processes"]):
        return run_worker(case, dict(epochs, check_epochs=0), settings, cache)


ROUND_MEDIANS = ("sparse_ms", "live_peak_mib")
"""Fields given as the median over a case's rounds (the epoch time picks the round kept)."""


def median_of_rounds(records: list) -> list:
    """One record per case: of its rounds, the one with the median epoch time (the lower middle
    of an even count), with ``rounds``, every round's time in ``round_ms``, and the median of
    the rounds' ``ROUND_MEDIANS``; a case that failed in any round keeps its failure."""
    cases = {}
    for r in records:
        cases.setdefault((r["contender"], r["model"], r["graph"], r["condition"]), []).append(r)
    merged = []
    for rounds in cases.values():
        failed = [r for r in rounds if r["status"] != "ok"]
        if failed:
            merged.append(failed[0])
            continue
        chosen = dict(sorted(rounds, key=lambda r: r["epoch_ms"])[(len(rounds) - 1) // 2])
        chosen.update(rounds=len(rounds), round_ms=[r["epoch_ms"] for r in rounds])
        for field in ROUND_MEDIANS:
            values = [r[field] for r in rounds if r.get(field, "") != ""]
            if values:
                chosen[field] = float(statistics.median(values))
        merged.append(chosen)
    return merged


def progress_line(index: int, total: int, r: dict) -> str:
    where = f"[{index:3d}/{total}] {r['model']} {r['graph']} {r['condition']} {r['contender']}"
    if r["status"] != "ok":
        return f"{where}: {r['status']}: {r.get('note', '')}"
    sparse = f", sparse {r['sparse_ms']:.4g} ms" if "sparse_ms" in r else ""
    live = f"live {r['live_peak_mib']:.1f} MiB, " if r.get("live_peak_mib", "") != "" else ""
    return (f"{where}: {r['epoch_ms']:.4g} ms/epoch{sparse}, {live}rss {r['peak_mib']:.1f} MiB, "
            f"loss {r['final_loss']:.6g}")


def run_all(settings: dict, cache: Path) -> list:
    """Every case's records: ours' prewarm first (per model and graph), then each round."""
    names = settings["contenders"]
    cases = [(m, g) for m in settings["models"] for g in settings["graphs"]]
    total = len(cases) * len(names) * len(settings["conditions"]) * settings["rounds"]
    count = itertools.count(1)
    records, prewarm = [], {}
    for round_ in range(settings["rounds"]):
        shift = round_ % len(names)
        for model, graph in cases:
            epochs = epochs_for(graph, settings)
            if "ours" in names and (model, graph) not in prewarm:
                warm = run_worker({"contender": "ours", "model": model, "graph": graph,
                                   "condition": "prewarm"},
                                  {"warmup": 0, "epochs": 1, "profile_epochs": 0,
                                   "check_epochs": 0}, settings, cache)
                prewarm[model, graph] = warm.get("first_epoch_ms", "")
            for condition in settings["conditions"]:
                for name in names[shift:] + names[:shift]:
                    case = {"contender": name, "model": model, "graph": graph,
                            "condition": condition}
                    record = measure(case, epochs, settings, cache)
                    if name == "ours":
                        record["prewarm_ms"] = prewarm[model, graph]
                    records.append(record)
                    print(progress_line(next(count), total, record), flush=True)
    return records


def describe_machine(threads: int) -> dict:
    info = machine.describe(threads)
    for name in ("torch-geometric",):
        try:
            info["libraries"][name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return info


def main(argv=None) -> None:
    args = parse_args(argv)
    settings = settings_of(args)
    start = time.perf_counter()
    print(f"measuring memory bandwidth with {settings['threads']} threads ...", flush=True)
    info = describe_machine(settings["threads"])
    info["load_average_start"] = os.getloadavg()
    print(results.header(info, settings), flush=True)
    with tempfile.TemporaryDirectory(prefix="sparsetir-gnn-") as tmp:
        cache = Path(tmp)
        for graph in settings["graphs"]:
            A = tasks.prepare(graph, cache)
            print(f"graph {graph}: {A.shape[0]:,} nodes, {A.nnz:,} edges (symmetric, "
                  "before self-loops)", flush=True)
        records = median_of_rounds(run_all(settings, cache))
    info["load_average_end"] = os.getloadavg()
    curves = {"{contender}/{model}/{graph}/{condition}".format(**r):
              {"float32": r.get("losses"), "float64": r.get("check_losses")} for r in records}
    rows = results.finish(results.check_losses(records))
    print()
    print(results.table(rows, info, settings))
    paths = results.write(rows, info, settings, args.out, curves)
    print("\nwrote " + ", ".join(str(p) for p in paths.values())
          + ("" if "png" in paths else " (no chart: matplotlib is not installed)"))
    print(f"total {time.perf_counter() - start:.0f} s")
    if any(r["status"] == "error" for r in rows):
        sys.exit("some cases are errors (see above)")


if __name__ == "__main__":
    main()
