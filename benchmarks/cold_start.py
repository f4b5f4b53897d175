"""Cold start: the first training epoch of each GNN model on a graph, with a fresh kernel cache
and with a warm one, and the kernels each compiles (sparsetir against DGL).

Every measurement runs in a new process (``--child``): it imports the contender (timed), builds
the model of ``models`` on the ``tasks`` task, and times the first epoch (forward,
backward, Adam step), compiles included. For sparsetir the kernels compiled by the training
thread are counted (with the seconds spent in ``compile_stage2``, storing and loading
excluded), and apart from them (``background``) those the prebuilt kernels' upgrades compiled
by the end of the second epoch: "fresh" uses an empty ``SPARSETIR_CACHE``, "warm" the same
cache again (filled by the fresh run). ``SPARSETIR_PREBUILT=0`` in the environment measures
without the package's prebuilt kernels. Results: one line per run on stdout, and ``--out`` (JSON) when given. ``docs/cold-start.md``
holds the figures and says on what machine they were taken.

Example
-------
``.venv/bin/python benchmarks/cold_start.py --models gat gcn --graph cora``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "COLD-START "


def child(contender: str, model: str, graph: str, cache: Path) -> dict:
    """One first epoch, measured in this (new) process."""
    start = time.perf_counter()
    import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    torch_s = time.perf_counter() - start
    # pylint: disable-next=import-outside-toplevel
    from gnn_training import frameworks, models, tasks
    from gnn_training.worker import Training  # pylint: disable=import-outside-toplevel
    framework = frameworks.load_framework(contender)
    import_s = time.perf_counter() - start - torch_s
    events = {"compiled": 0, "compile_s": 0.0}
    if contender == "ours":
        _count_compiles(events)
    spec = models.MODELS[model]
    if not tasks.graph_path(graph, cache).exists():
        tasks.prepare(graph, cache)
    task = tasks.make_task(graph, tasks.load(graph, cache), spec.self_loops)
    run = Training(spec, framework, task)
    start = time.perf_counter()
    run.epoch()
    first = time.perf_counter() - start
    start = time.perf_counter()
    run.epoch()
    second = time.perf_counter() - start
    return {"contender": contender, "model": model, "graph": graph, "torch_import_s": torch_s,
            "import_s": import_s, "first_epoch_s": first, "second_epoch_s": second, **events}


def _count_compiles(events: dict) -> None:
    """Count every compile ``sparsetir.build`` makes in the training thread, and the seconds
    in it, into ``events``, and those of other threads (the prebuilt kernels' background
    upgrades, ``driver.upgrade``) as ``background`` (by wrapping
    ``build_module.compile_stage2``, which every sparsetir version here has)."""
    from sparsetir.driver import build_module  # pylint: disable=import-outside-toplevel
    compile_stage2 = build_module.compile_stage2
    events["background"] = 0

    def counted(*args, **kwargs):
        start = time.perf_counter()
        try:
            return compile_stage2(*args, **kwargs)
        finally:
            if threading.current_thread() is threading.main_thread():
                events["compiled"] += 1
                events["compile_s"] += time.perf_counter() - start
            else:
                events["background"] += 1

    build_module.compile_stage2 = counted


def measure(contender: str, model: str, graph: str, cache: Path, kernels: Path) -> dict:
    env = {**os.environ, "SPARSETIR_CACHE": str(kernels), "DGLBACKEND": "pytorch"}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", contender,
                           "--models", model, "--graph", graph, "--cache", str(cache)],
                          capture_output=True, text=True, env=env, cwd=HERE, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    return {"contender": contender, "model": model, "error": done.stderr[-500:]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat", "rgcn"])
    parser.add_argument("--graph", default="cora")
    parser.add_argument("--contenders", nargs="+", default=["ours", "dgl"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        result = child(args.child, args.models[0], args.graph, args.cache)
        print(PREFIX + json.dumps(result), flush=True)
        return
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        graphs = Path(folder) / "graphs"
        graphs.mkdir()
        for model in args.models:
            kernels = Path(folder) / f"kernels-{model}"     # fresh for each model
            for contender in args.contenders:
                states = ["fresh", "warm"] if contender == "ours" else ["-"]
                for state in states:
                    row = {"cache": state, **measure(contender, model, args.graph, graphs,
                                                      kernels)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
