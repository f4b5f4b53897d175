"""The benchmark's outputs: derived columns, the terminal table, the CSV, the JSON sidecar and
the PNG chart.

Each result row (one per operator, graph, feature size, dtype, condition and contender) gets
``gbps`` (the traffic lower bound of ``workload.traffic_bytes`` in the row's dtype over the
median time), ``roofline`` (that
as a share of the machine's measured bandwidth; above 1 means the data came from cache),
``no_reuse_roofline`` (the same for the traffic of the CSR layout when no gathered row is
reused, ``workload.no_reuse_bytes``: above 1, gathers were served by caches) and
``speedup_of_ours`` (this contender's median over ours' in the same dtype: above 1, ours is
faster) and, on bfloat16 rows, ``speedup_over_float32`` (this contender's float32 median over
its bfloat16 one: above 1, bfloat16 is faster). A library that refuses bfloat16 has status
``refused`` and its message as the note, no time.

Example
-------
>>> rows = finish(records, graphs, machine_info)    # records: the workers' result dicts
>>> print(table(rows, machine_info, settings))
>>> write(rows, machine_info, settings, Path("benchmarks/results"))
{'csv': ..., 'json': ..., 'png': ...}
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import contenders
from result_files import write_table
import workload

COLUMNS = ("op", "graph", "rows", "nnz", "feat", "dtype", "condition", "contender", "status",
           "checked", "median_ms", "p25_ms", "p75_ms", "min_ms", "max_ms", "repeats",
           "traffic_bytes", "gbps", "roofline", "no_reuse_bytes", "no_reuse_roofline",
           "speedup_of_ours", "speedup_over_float32", "first_call_ms", "setup_ms",
           "prepare_ms", "max_error", "rounds", "round_ms", "cpu_vendor", "cpu_model", "note")

OURS = contenders.OURS


def finish(records: list, graphs: dict, machine: dict) -> list:
    """Result rows: the workers' ``records`` with the derived columns, in ``COLUMNS`` order.

    ``graphs`` maps each graph label to ``{"rows", "nnz", "traffic": {(op, feat, dtype):
    bytes}, "no_reuse": {(op, feat, dtype): bytes}}``.
    """
    times = {(r["contender"], r["op"], r["graph"], r["feat"], r["dtype"], r["condition"]):
             r["median_ms"] for r in records if r["status"] == "ok"}
    rows = []
    for r in records:
        g = graphs[r["graph"]]
        row = dict.fromkeys(COLUMNS, "")
        case = (r["op"], r["feat"], r["dtype"])
        row.update(r, rows=g["rows"], nnz=g["nnz"], checked=bool(r.get("checked", False)),
                   cpu_vendor=machine.get("cpu_vendor", ""), cpu_model=machine["cpu_model"],
                   traffic_bytes=g["traffic"][case], no_reuse_bytes=g["no_reuse"][case],
                   round_ms=" ".join(f"{ms:.5g}" for ms in r.get("round_ms", [])))
        if r["status"] == "ok":
            seconds = r["median_ms"] / 1e3
            row["gbps"] = row["traffic_bytes"] / seconds / 1e9
            row["roofline"] = row["gbps"] / machine["bandwidth_gbps"]
            row["no_reuse_roofline"] = row["no_reuse_bytes"] / seconds / 1e9 \
                / machine["bandwidth_gbps"]
            key = (r["op"], r["graph"], r["feat"], r["dtype"], r["condition"])
            if ("ours",) + key in times:
                row["speedup_of_ours"] = r["median_ms"] / times[("ours",) + key]
            float32 = (r["contender"], r["op"], r["graph"], r["feat"], "float32", r["condition"])
            if r["dtype"] != "float32" and float32 in times:
                row["speedup_over_float32"] = times[float32] / r["median_ms"]
        rows.append({k: row[k] for k in COLUMNS})
    return rows


def _cell(row: dict) -> str:
    if row["status"] != "ok":
        return {"n/a": "n/a", "refused": "refused"}.get(row["status"], "ERROR")
    text = f"{row['median_ms']:.4g}"
    if row["contender"] != "ours" and row["speedup_of_ours"] != "":
        text += f" ({row['speedup_of_ours']:.3g}x)"
    return text


def header(machine: dict, settings: dict) -> str:
    """The machine and method, as the lines printed above the table."""
    lines = [
        f"machine: {machine.get('cpu_vendor', '?')} {machine['cpu_model']} "
        f"(LLVM: {machine['llvm_cpu']}), "
        f"{machine['cpus_usable']} usable of {machine['cpus_total']} CPUs, {machine['memory']}",
        f"threads: {settings['threads']} for every contender (OMP_NUM_THREADS, MKL_NUM_THREADS, "
        "TVM_NUM_THREADS, torch.set_num_threads, GraphBLAS nthreads; scipy is single-threaded), "
        f"OMP_WAIT_POLICY={settings['omp_wait_policy']}; conditions: idle"
        + (f", loaded (beside {settings['load']} busy processes)" if settings.get("load")
           else ""),
        f"measured bandwidth at {settings['threads']} threads: copy {machine['copy_gbps']} GB/s, "
        f"triad {machine['triad_gbps']} GB/s (numpy, STREAM-like)",
        f"timing: each (contender, graph) in its own process; whole call, median of "
        f"{settings['min_repeat']}-{settings['max_repeat']} calls (about {settings['budget']} s "
        "each measurement) after a checked first call and as long a warm-up",
        f"dtypes: {', '.join(settings.get('dtypes', ['float32']))}"
        + ("; bfloat16 for " + ", ".join(contenders.BFLOAT16) + " (ours under torch.autocast, "
           "float32 sums; checked against the float32 result within 4 u = 2^-6 of the sum "
           "of the terms' magnitudes)" if "bfloat16" in settings.get("dtypes", []) else ""),
    ]
    return "\n".join(lines)


def table(rows: list, machine: dict, settings: dict) -> str:
    """The terminal table: per operator, median ms for each contender (with ours' speedup over
    it), ours' GB/s and its share of the measured bandwidth (above 100%: served from cache);
    then ours' one-off costs."""
    names = [n for n in contenders.NAMES if any(r["contender"] == n for r in rows)]
    width = 2 + max(len(text) for text in names + [_cell(r) for r in rows])
    out = [header(machine, settings), ""]
    for op, dtype, condition in [(op, d, c) for c in ("idle", "loaded")
                                 for d in workload.DTYPES for op in workload.OPS]:
        op_rows = [r for r in rows
                   if (r["op"], r["dtype"], r["condition"]) == (op, dtype, condition)]
        if not op_rows:
            continue
        out.append(f"{workload.OP_TITLES[op]}, {dtype}, {condition}: median ms (speedup of ours "
                   "over it); "
                   "ours' GB/s against the traffic lower bound, its share of the measured "
                   "bandwidth, and the share for the no-reuse traffic")
        out.append(f"{'graph':20s}{'feat':>5s} " + "".join(f"{n:>{width}s}" for n in names)
                   + f"{'ours GB/s':>11s}{'of peak':>8s}{'no-reuse':>9s}")
        keys = sorted({(r["graph"], r["feat"]) for r in op_rows},
                      key=lambda k: (list(settings["graphs"]).index(k[0]), k[1]))
        for graph, feat in keys:
            cells = {r["contender"]: r for r in op_rows if (r["graph"], r["feat"]) == (graph, feat)}
            line = f"{graph:20s}{feat:5d} " + "".join(
                f"{_cell(cells[n]) if n in cells else '':>{width}s}" for n in names)
            mine = cells.get("ours")
            if mine and mine["status"] == "ok":
                line += f"{mine['gbps']:11.1f}{mine['roofline']:8.0%}" \
                    f"{mine['no_reuse_roofline']:9.0%}"
            out.append(line)
        out.append("")
    notes = set()
    for r in rows:
        if r["status"] in ("n/a", "refused"):
            notes.add(f"{r['contender']} {r['op']} {r['dtype']}: {r['status']}, {r['note']}")
        elif r["status"] == "error":
            notes.add(f"{r['contender']} {r['op']} {r['graph']} f={r['feat']} "
                      f"({r['condition']}): ERROR, {r['note']}")
    out += [f"  {n}" for n in sorted(notes)] + ([""] if notes else [])
    out += [summary(rows), "", _ours_costs(rows), "", _tuning_costs(rows)]
    return "\n".join(out)


def summary(rows: list) -> str:
    """Per condition, dtype, operator and each of ours (``OURS``): in how many (graph,
    feature) cases it is faster than every library, the geometric mean of its speedup over
    the fastest library, its worst case, and its speedup over DGL and torch.sparse; then each
    contender's bfloat16 speedup over its float32 (geometric mean over cases), and its
    slowdown under load (loaded median over idle). Checked results only. ``rows`` as
    ``finish`` makes them, or read back from ``bench.csv``."""
    times = {}
    for r in rows:
        if r["status"] == "ok" and str(r["checked"]) == "True":
            key = (r.get("condition") or "idle", r.get("dtype") or "float32", r["op"],
                   r["graph"], int(r["feat"]))
            times.setdefault(key, {})[r["contender"]] = float(r["median_ms"])
    lines = ["summary, geometric means of ours' speedup over all (graph, feature) cases:"]
    for condition, dtype, op, mine in [(c, d, op, m) for c in ("idle", "loaded")
                                       for d in workload.DTYPES for op in workload.OPS
                                       for m in OURS]:
        cases = {(g, f): t for (c, d, o, g, f), t in times.items()
                 if (c, d, o) == (condition, dtype, op) and mine in t
                 and any(k not in OURS for k in t)}
        if not cases:
            continue
        best = {case: min(v for k, v in t.items() if k not in OURS) / t[mine]
                for case, t in cases.items()}
        worst = min(best, key=best.get)
        parts = [f"{condition:6s} {dtype:8s} {op:16s} {mine:10s} faster than every library in "
                 f"{sum(b > 1 for b in best.values())} of {len(cases)}",
                 f"vs fastest library {_geomean(list(best.values())):.2f}x "
                 f"(worst {best[worst]:.2f}x: {worst[0]} f={worst[1]})"]
        for name in ("dgl", "torch_sparse", "mkl"):
            ratios = [t[name] / t[mine] for t in cases.values() if name in t]
            if ratios:
                parts.append(f"vs {name} {_geomean(ratios):.2f}x")
        lines.append("  " + ", ".join(parts))
    lines += _half_speedups(times)
    slowdowns = {}
    for (condition, dtype, op, graph, feat), t in times.items():
        idle = times.get(("idle", dtype, op, graph, feat), {})
        if condition == "loaded":
            for name, ms in t.items():
                if name in idle:
                    slowdowns.setdefault(name, []).append(ms / idle[name])
    if slowdowns:
        lines.append("slowdown under load (loaded median over idle, geometric mean over cases): "
                     + ", ".join(f"{name} {_geomean(v):.2f}x"
                                 for name, v in sorted(slowdowns.items())))
    return "\n".join(lines)


def _half_speedups(times: dict) -> list:
    """Per condition and operator, each contender's bfloat16 speedup over its own float32
    (float32 median over bfloat16 median, geometric mean over the cases it ran both)."""
    speedups = {}
    for (condition, dtype, op, graph, feat), t in times.items():
        float32 = times.get((condition, "float32", op, graph, feat), {})
        if dtype != "float32":
            for name, ms in t.items():
                if name in float32:
                    speedups.setdefault((condition, op, name), []).append(float32[name] / ms)
    lines = []
    for condition, op in dict.fromkeys((c, o) for c, o, _ in speedups):
        lines.append(f"  {condition:6s} {op:16s} bfloat16 over float32 (above 1: bfloat16 "
                     "faster): " + ", ".join(f"{name} {_geomean(v):.2f}x"
                                             for (c, o, name), v in speedups.items()
                                             if (c, o) == (condition, op)))
    return lines


def _geomean(values: list) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _tuning_costs(rows: list) -> str:
    """Per graph, the search time of ``ours_tuned`` (``ops.tune`` before each operator's first
    call, compiles included; a record from an earlier run makes it short), summed over
    operators and feature sizes."""
    spent = {}
    for r in rows:
        if r["contender"] == "ours_tuned" and r.get("prepare_ms") not in ("", None) \
                and r.get("condition", "idle") == "idle":
            spent[r["graph"]] = spent.get(r["graph"], 0.0) + float(r["prepare_ms"])
    if not spent:
        return ""
    return "ours_tuned, search time per graph (s, all operators and feature sizes, compiles " \
        "included): " + ", ".join(f"{g} {ms / 1e3:.1f}" for g, ms in spent.items())


def _ours_costs(rows: list) -> str:
    mine = [r for r in rows if r["contender"] == "ours" and r["first_call_ms"] != ""
            and r.get("condition", "idle") == "idle"]
    if not mine:
        return "ours: no results"
    feats = sorted({r["feat"] for r in mine})
    ops = [op for op in workload.OPS if any(r["op"] == op for r in mine)]
    lines = ["ours, one-off costs, not in the times above (ms): SparseMatrix(A), and each "
             f"operator's first call at feature size {'/'.join(map(str, feats))} (a kernel "
             "compiles the first time a graph needs it, the run's kernel cache starting empty, "
             "and loads from that disk cache after)",
             f"{'graph':20s}{'SparseMatrix':>13s}" + "".join(f"{op:>24s}" for op in ops)]
    for graph, dtype in dict.fromkeys((r["graph"], r["dtype"]) for r in mine):
        first = {(r["op"], r["feat"]): r["first_call_ms"] for r in mine
                 if (r["graph"], r["dtype"]) == (graph, dtype)}
        setup = next(r["setup_ms"] for r in mine if r["graph"] == graph)
        cells = ["/".join(f"{first[op, f]:.0f}" if (op, f) in first else "-" for f in feats)
                 for op in ops]
        label = graph if dtype == "float32" else f"{graph} ({dtype})"
        lines.append(f"{label:20s}{setup:13.1f}" + "".join(f"{c:>24s}" for c in cells))
    return "\n".join(lines)


def chart(rows: list, graphs: list, path: Path) -> bool:
    """Ours' speedup over each contender in float32 (log scale, bars per feature size), one
    panel per operator (rows) and graph (columns); False when matplotlib is not installed or
    no other contender ran idle in float32 (``--contenders ours``)."""
    rows = [r for r in rows if r["contender"] != "ours" and r["speedup_of_ours"] != ""
            and r.get("condition", "idle") == "idle" and r["dtype"] == "float32"]
    if not rows:
        return False
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in workload.OPS if any(r["op"] == op for r in rows)]
    names = [n for n in contenders.NAMES if any(r["contender"] == n for r in rows)]
    colors = {n: plt.get_cmap("tab10")(i) for i, n in enumerate(contenders.NAMES)}
    feats = sorted({r["feat"] for r in rows})
    fig, axes = plt.subplots(len(ops), len(graphs), figsize=(2.6 * len(graphs) + 1, 2.6 * len(ops)),
                             sharey="row", squeeze=False)
    step = 0.8 / len(names)
    for (op, graph), ax in zip([(o, g) for o in ops for g in graphs], axes.flat):
        for i, name in enumerate(names):
            speed = {r["feat"]: r["speedup_of_ours"] for r in rows
                     if (r["op"], r["graph"], r["contender"]) == (op, graph, name)}
            xs = [j + (i - (len(names) - 1) / 2) * step for j, f in enumerate(feats) if f in speed]
            ax.bar(xs, [speed[f] for f in feats if f in speed], step, color=colors[name],
                   label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(feats)), [str(f) for f in feats], fontsize=8)
        ax.set_title(f"{graph}", fontsize=9)
        if ax in axes[:, 0]:
            ax.set_ylabel(f"{op}\nspeedup of ours (x)", fontsize=9)
        if ax in axes[-1]:
            ax.set_xlabel("feature size", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in names]
    fig.legend(handles, names, loc="upper center", ncol=len(names), fontsize=9)
    fig.suptitle("above 1: ours is faster (contender's median time over ours)", y=0.005,
                 va="bottom", fontsize=9)
    fig.tight_layout(rect=(0, 0.02, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write(rows: list, machine: dict, settings: dict, out: Path) -> dict:
    """``bench.csv`` (one row per result), ``bench.json`` (machine, settings, rows) and
    ``bench.png`` (when matplotlib is installed) in ``out``; their paths."""
    paths = write_table(rows, COLUMNS, {"machine": machine, "settings": settings},
                        out, "bench")
    if chart(rows, settings["graphs"], out / "bench.png"):
        paths["png"] = out / "bench.png"
    return paths



if __name__ == "__main__":   # the summary of a finished run: python benchmarks/report.py bench.csv
    import sys
    print(summary(list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))))
