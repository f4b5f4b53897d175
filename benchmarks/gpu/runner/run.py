"""Run sparsetir's packaged CUDA kernels on this GPU: check against torch, time next to torch.

Needs python3 with torch (CUDA) and numpy, nothing else: the kernels in ``kernels/`` are loaded
by TVM's runtime libraries in ``lib/`` through ``tvm_rt`` (no TVM install, no compiler).

* CSR ops, on each graph (``data/*.npz`` and the seeded synthetic ones of ``graphs.py``): the
  output is filled with NaN, computed, and compared with torch on the GPU (``torch.sparse`` CSR
  @ dense for SpMM, with weights 1 for unweighted SpMM, ``torch.sparse.sampled_addmm`` for SDDMM,
  all cuSPARSE), which is timed next to every kernel of the same op and feature size: the zoo
  kernels with the default schedule and the ``sparsetir.ops`` kernels (``ops_*``) with their
  CUDA schedules.
* The fp16 tensor-core BSR SpMM (``tc_bsrmm``), on seeded block-sparse matrices at 10% block
  density (``blocksparse.py``; ``--bsr-shapes``): checked against torch's float32 product of the
  same fp16 values, timed next to torch's fp16 BSR SpMM (``sparse_bsr_tensor @ x``; an empty
  cell where this torch refuses it, with its reason printed) and cuBLAS's fp16 dense matmul of
  the matrix made dense (``dense_ms``).

Times are CUDA-event times per call on torch's current stream (warm-up, then the median of
repeats, each over enough back-to-back calls to span about a millisecond); every side is called
from Python with its inputs ready.

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

import blocksparse
import graphs
import ops
import selftest
from bundle import arguments, load_specs
from summary import summary_lines
from tvm_rt import Runtime

ROOT = Path(__file__).resolve().parent
COLUMNS = ("device", "graph", "rows", "nnz", "op", "kernel", "block", "feat", "ours_ms",
           "torch_sparse_ms", "speedup", "dense_ms", "dense_speedup", "max_abs_err", "ok")


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
    with open(args.csv, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=COLUMNS)
        writer.writeheader()

        def record(row: dict) -> None:    # a run cut short by its time limit keeps its rows
            writer.writerow(row)
            stream.flush()
            _print_row(row)
        rows = _measure_all(args, specs, functions, name, device, record)
    failed = [_label(r) for r in rows if not r["ok"]]
    print("summary (speedup = the contender's time over ours):")
    for line in summary_lines(rows):
        print("  " + line)
    print(f"wrote {args.csv}; {len(rows) - len(failed)} of {len(rows)} results match torch"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _measure_all(args, specs: list, functions: dict, name: str, device, record) -> list:
    """Every kernel checked and timed on every problem; each row given to ``record``."""
    rows = []
    for graph_name in args.graphs:
        graph = graphs.load(graph_name, ROOT / "data")
        for op in ops.OPS:
            for feat in sorted({s["feat_size"] for s in specs if s["op"] == op}):
                inputs = ops.make_inputs(op, graph, feat, device)
                common = dict(device=name, graph=graph_name, rows=graph.rows, nnz=graph.nnz,
                              op=op, feat=feat, block=None, dense_ms=None,
                              torch_sparse_ms=time_ms(ops.baseline(op, inputs), args.warmup,
                                                      args.repeat))
                tolerance = (ops.RTOL, ops.ATOL, ops.magnitude(op, inputs))
                for spec in (s for s in specs if s["op"] == op and s["feat_size"] == feat):
                    for block, spec_inputs in _segmentings(spec, inputs, graph, args):
                        rows += _run_kernels(functions, [spec], spec_inputs,
                                             ops.reference(op, inputs), tolerance,
                                             dict(common, block=block), args, record)
    bsr_specs = [s for s in specs if s["op"] == blocksparse.OP]
    refusals = set()
    for shape in args.bsr_shapes:
        for block in sorted({s["block_size"] for s in bsr_specs}):
            matrix = blocksparse.make(*shape, block)
            for feat in sorted({s["feat_size"] for s in bsr_specs if s["block_size"] == block}):
                inputs = blocksparse.make_inputs(matrix, feat, device)
                contenders = blocksparse.contenders(inputs)
                common = dict(device=name, graph=matrix.name, rows=matrix.rows, nnz=matrix.nnz,
                              op=blocksparse.OP, feat=feat, block=block,
                              torch_sparse_ms=_time_unless_refused(contenders["torch_bsr"], args,
                                                                   refusals),
                              dense_ms=time_ms(contenders["dense"], args.warmup, args.repeat))
                rows += _run_kernels(functions, [s for s in bsr_specs if s["block_size"] == block
                                                 and s["feat_size"] == feat],
                                     inputs, blocksparse.reference(inputs),
                                     (blocksparse.RTOL, blocksparse.ATOL), common, args,
                                     record)
    return rows


def _segmentings(spec: dict, inputs: dict, graph, args):
    """``(block, inputs)`` for each run of ``spec``: once as it is (block None), or for a
    ``*_segments`` kernel once per ``--segment-nnz`` (the rows cut into segments of at most
    that many nonzeros, the table's ``blk``)."""
    if not any(param["role"] == "seg_ptr" for param in spec["params"]):
        yield None, inputs
        return
    for max_nnz in args.segment_nnz:
        yield max_nnz, ops.with_segments(inputs, graph, max_nnz)


def _run_kernels(functions: dict, specs: list, inputs: dict, expected, tolerance: tuple,
                 common: dict, args, record) -> list:
    """Check and time each kernel of ``specs`` on ``inputs``; give each table row to ``record``
    and return them, ``common`` (the problem and the contenders' times) completed."""
    rows = []
    for spec in specs:
        inputs["out"].fill_(float("nan"))
        call = functions[spec["name"]].bind(*arguments(spec, inputs))
        call()
        torch.cuda.synchronize()
        err, ok = ops.check(inputs["out"], expected, *tolerance)
        ours_ms = time_ms(call, args.warmup, args.repeat)
        rows.append(dict(common, kernel=spec["kernel"], ours_ms=round(ours_ms, 4),
                         torch_sparse_ms=_rounded(common["torch_sparse_ms"]),
                         speedup=_ratio(common["torch_sparse_ms"], ours_ms),
                         dense_ms=_rounded(common["dense_ms"]),
                         dense_speedup=_ratio(common["dense_ms"], ours_ms),
                         max_abs_err=f"{err:.2e}", ok=ok))
        record(rows[-1])
    return rows


def _time_unless_refused(fn, args, refusals: set):
    """``time_ms(fn)``, or None where a first call raises (a layout or dtype this torch has no
    kernel for on this device); each distinct reason is printed once."""
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as err:  # pylint: disable=broad-except  # whatever torch raises: no contender
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        if reason not in refusals:
            refusals.add(reason)
            print(f"note: torch {torch.__version__} refuses fp16 BSR @ dense here ({reason}); "
                  "its column is left empty", flush=True)
        return None
    return time_ms(fn, args.warmup, args.repeat)


def _label(r: dict) -> str:
    """``csrmm/cora/f32``, ``tc_bsrmm/bsr-4096x4096/b16/f64``: a row's kernel and problem."""
    block = f"/b{r['block']}" if r["block"] else ""
    return f"{r['kernel']}/{r['graph']}{block}/f{r['feat']}"


def _rounded(ms):
    return None if ms is None else round(ms, 4)


def _ratio(theirs, ours: float):
    """``theirs / ours`` (how many times faster ours is), None without ``theirs``."""
    return None if theirs is None else round(theirs / ours, 3)


def _dgl_note() -> str:
    where = ("is installed here but not timed" if importlib.util.find_spec("dgl")
             else "has no build for this machine's torch and CUDA (none is installed)")
    return (f"note: DGL {where}; DGL's GPU SpMM calls cuSPARSE, as torch.sparse does, so the "
            "cuSPARSE column stands for it.")


def _print_header() -> None:
    print("times in ms per call; speedup = torch.sparse time / ours (cuSPARSE for CSR); "
          "dense = cuBLAS fp16 dense matmul (BSR rows); - : not measured")
    print(f"{'graph':18s} {'rows':>7s} {'nnz':>9s} {'op':15s} {'kernel':19s} {'blk':>3s} "
          f"{'feat':>4s} {'ours':>9s} {'torch.sp':>9s} {'speedup':>7s} {'dense':>9s} "
          f"{'vs dense':>8s} {'max err':>8s} ok")


def _print_row(r: dict) -> None:
    print(f"{r['graph']:18s} {r['rows']:7d} {r['nnz']:9d} {r['op']:15s} {r['kernel']:19s} "
          f"{_cell(r['block'], 3, 'd')} {r['feat']:4d} {r['ours_ms']:9.4f} "
          f"{_cell(r['torch_sparse_ms'], 9, '.4f')} {_cell(r['speedup'], 7, '.2f')} "
          f"{_cell(r['dense_ms'], 9, '.4f')} {_cell(r['dense_speedup'], 8, '.2f')} "
          f"{r['max_abs_err']:>8s} {'yes' if r['ok'] else 'NO'}", flush=True)


def _cell(value, width: int, spec: str) -> str:
    """``value`` formatted with ``spec`` in ``width`` characters; ``-`` for None."""
    return f"{'-' if value is None else format(value, spec):>{width}s}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=graphs.bundled(ROOT / "data") + ["synthetic-arxiv"],
                        help=f"bundled ones or {', '.join(graphs.SYNTHETIC)} (default: all but "
                             "synthetic-proteins, 38M nonzeros, made in about 20 s)")
    parser.add_argument("--bsr-shapes", nargs="*", type=_shape,
                        default=list(blocksparse.SHAPES), metavar="ROWSxCOLS",
                        help="block-sparse matrices for the BSR kernel (default: "
                             f"{' '.join(f'{r}x{c}' for r, c in blocksparse.SHAPES)}; "
                             "none: skip it); multiples of 32")
    parser.add_argument("--segment-nnz", nargs="+", type=int, default=[32, 128],
                        help="the *_segments kernels run once per value: rows cut into "
                             "segments of at most that many nonzeros (the table's blk)")
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


def _shape(text: str) -> tuple:
    """``"4096x2048"`` -> ``(4096, 2048)``."""
    rows, cols = text.lower().split("x")
    return int(rows), int(cols)


if __name__ == "__main__":
    sys.exit(main())
