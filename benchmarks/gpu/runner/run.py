"""Run sparsetir's packaged CUDA kernels on this GPU: check against torch, time next to cuSPARSE.

Needs python3 with torch (CUDA) and numpy, nothing else: the kernels in ``kernels/`` are loaded
by TVM's runtime libraries in ``lib/`` through ``tvm_rt`` (no TVM install, no compiler). For each
graph (``data/*.npz`` and the seeded synthetic ones of ``graphs.py``) and each kernel, the output
is filled with NaN, computed, and compared with torch on the GPU (``torch.sparse`` CSR @ dense for
SpMM, with weights 1 for unweighted SpMM, ``torch.sparse.sampled_addmm`` for SDDMM, all cuSPARSE),
which is timed next to every kernel of the same op and feature size: the zoo kernels with the
default schedule and the ``sparsetir.ops`` kernels (``ops_*``) with their CUDA schedules. Times are CUDA-event times per
call on torch's current stream (warm-up, then the median of repeats, each over enough back-to-back
calls to span about a millisecond); both sides are called from Python with their inputs ready.

Run on the GPU machine: ``python3 run.py [--graphs cora synthetic-proteins] [--csv results.csv]``
Check the folder without a GPU: ``python3 run.py --selftest-cpu``
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import statistics
import sys
import warnings
from pathlib import Path

import torch

import graphs
import ops
import selftest
from bundle import arguments, load_specs
from tvm_rt import Runtime

ROOT = Path(__file__).resolve().parent
COLUMNS = ("device", "graph", "rows", "nnz", "op", "kernel", "feat", "ours_ms", "cusparse_ms",
           "speedup", "max_abs_err", "ok")


def time_ms(fn, warmup: int, repeat: int) -> float:
    """Median CUDA-event time of one ``fn()`` call, in milliseconds."""
    for _ in range(warmup):
        fn()
    single = _events_ms(fn, 1)
    inner = max(1, min(100, math.ceil(1.0 / max(single, 1e-3))))
    return statistics.median(_events_ms(fn, inner) / inner for _ in range(repeat))


def _events_ms(fn, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def benchmark(args) -> int:
    """Check and time every kernel on every graph; print the table and write the CSV."""
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to torch; use --selftest-cpu to check the folder",
              file=sys.stderr)
        return 2
    manifest, specs = load_specs(ROOT)
    device = torch.device("cuda", 0)
    torch.cuda.init()  # torch's libcudart first: TVM's CUDA runtime then shares it
    runtime = Runtime(ROOT / "lib", cuda=True)
    runtime.set_cuda_stream(0, torch.cuda.current_stream(device).cuda_stream)
    kernels = ROOT / "kernels"
    functions = {spec["name"]: runtime.load_module(kernels / spec["library"])[spec["entry"]]
                 for spec in specs}
    name = torch.cuda.get_device_name(device)
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability(device))
    print(f"{name} ({arch}); torch {torch.__version__} (CUDA {torch.version.cuda}); kernels built "
          f"for {manifest['arch']} with TVM {manifest['tvm']}")
    if arch != manifest["arch"]:
        print(f"warning: this GPU is {arch}; package for it with --arch {arch}", file=sys.stderr)
    print(_dgl_note())
    _print_header()
    rows = []
    for graph_name in args.graphs:
        graph = graphs.load(graph_name, ROOT / "data")
        for op in ops.OPS:
            for feat in sorted({s["feat_size"] for s in specs if s["op"] == op}):
                inputs = ops.make_inputs(op, graph, feat, device)
                expected = ops.reference(op, inputs)
                base_ms = time_ms(ops.baseline(op, inputs), args.warmup, args.repeat)
                for spec in (s for s in specs if s["op"] == op and s["feat_size"] == feat):
                    err, ok, ours_ms = _measure(functions[spec["name"]], spec, inputs, expected,
                                                args)
                    rows.append(dict(device=name, graph=graph_name, rows=graph.rows, nnz=graph.nnz,
                                     op=op, kernel=spec["kernel"], feat=feat,
                                     ours_ms=round(ours_ms, 4), cusparse_ms=round(base_ms, 4),
                                     speedup=round(base_ms / ours_ms, 3), max_abs_err=f"{err:.2e}",
                                     ok=ok))
                    _print_row(rows[-1])
    with open(args.csv, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    failed = [f"{r['kernel']}/{r['graph']}/f{r['feat']}" for r in rows if not r["ok"]]
    print(f"wrote {args.csv}; {len(rows) - len(failed)} of {len(rows)} results match torch"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _measure(function, spec: dict, inputs: dict, expected, args) -> tuple:
    """(max abs error, within tolerance, median ms) of one kernel on prepared inputs."""
    inputs["out"].fill_(float("nan"))
    call = function.bind(*arguments(spec, inputs))
    call()
    torch.cuda.synchronize()
    err, ok = ops.check(inputs["out"], expected)
    return err, ok, time_ms(call, args.warmup, args.repeat)


def _dgl_note() -> str:
    where = ("is installed here but not timed" if importlib.util.find_spec("dgl")
             else "has no build for this machine's torch and CUDA (none is installed)")
    return (f"note: DGL {where}; DGL's GPU SpMM calls cuSPARSE, as torch.sparse does, so the "
            "cuSPARSE column stands for it.")


def _print_header() -> None:
    print("times in ms per call; speedup = cuSPARSE time / ours")
    print(f"{'graph':18s} {'rows':>7s} {'nnz':>9s} {'op':15s} {'kernel':19s} {'feat':>4s} "
          f"{'ours':>9s} {'cuSPARSE':>9s} {'speedup':>7s} {'max err':>8s} ok")


def _print_row(r: dict) -> None:
    print(f"{r['graph']:18s} {r['rows']:7d} {r['nnz']:9d} {r['op']:15s} {r['kernel']:19s} "
          f"{r['feat']:4d} {r['ours_ms']:9.4f} {r['cusparse_ms']:9.4f} {r['speedup']:7.2f} "
          f"{r['max_abs_err']:>8s} {'yes' if r['ok'] else 'NO'}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=graphs.bundled(ROOT / "data") + ["synthetic-arxiv"],
                        help=f"bundled ones or {', '.join(graphs.SYNTHETIC)} (default: all but "
                             "synthetic-proteins, 38M nonzeros, made in about 20 s)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--csv", default="results.csv", help="where to write the results")
    parser.add_argument("--selftest-cpu", action="store_true",
                        help="no GPU needed: load every library, run the CPU twins against torch")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
    if args.selftest_cpu:
        return selftest.run(ROOT)
    return benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
