"""The GNN benchmark's outputs: the loss check, derived columns, the terminal table, the CSV, the
JSON sidecar and the PNG chart.

The check (``check_losses``): on each model and graph, every contender's float64 losses (the
workers' ``check_losses``) must agree with DGL's within ``LOSS_RTOL`` relative at every epoch;
a contender that does not is marked ``error`` on every row of that case, its times withheld.
The variants (``frameworks.VARIANTS``) are checked in their worker instead, against their
eager contender in float32 (``check_vs_eager``); the compiled ones (``ours_compiled``,
``pyg_compiled``) are set side by side apart from the table (``compiled``), with their compile
times and graph breaks. A contender that ``torch.compile`` refuses is ``refused``, with its
message. Derived columns: ``loss_vs_dgl`` (the relative difference of the float32 final loss
from DGL's, for information: float32 rounding grows in training), ``check_vs_dgl`` (the float64
one that is checked), ``ours_over_this_*`` (ours' epoch time, sparse time, live and
resident-set peak memory over this contender's, ours being ``ours_compiled`` for
``pyg_compiled`` (``frameworks.COUNTERPART``) and eager ``ours`` for every other: below 1, ours
is faster or smaller) and ``load_slowdown`` (epoch time under load over idle).

Example
-------
>>> rows = finish(check_losses(records))         # records: the workers' result dicts
>>> print(table(rows, machine_info, settings))
>>> write(rows, machine_info, settings, Path("benchmarks/results"))
{'csv': ..., 'json': ..., 'png': ...}
"""

from __future__ import annotations

from pathlib import Path

from result_files import write_table

from . import frameworks, models

LOSS_RTOL = 1e-4
REFERENCE = "dgl"
COLUMNS = ("model", "graph", "nodes", "edges", "contender", "condition", "status", "epoch_ms",
           "p25_ms", "p75_ms", "sparse_ms", "sparse_share", "live_peak_mib", "peak_mib",
           "final_loss", "loss_vs_dgl", "check_vs_dgl", "check_vs_eager", "compile_ms",
           "graph_breaks",           "ours_over_this_epoch",
           "ours_over_this_sparse", "ours_over_this_live", "ours_over_this_peak",
           "load_slowdown", "epochs", "first_epoch_ms", "prewarm_ms", "setup_ms",
           "profiled_epoch_ms", "profiled_sparse_ms", "baseline_mib", "rounds", "round_ms",
           "note")


def _relative(values, reference) -> float:
    return max(abs(v - r) / abs(r) for v, r in zip(values, reference))


def check_losses(records: list) -> list:
    """``records`` with ``check_vs_dgl`` set, and a contender whose float64 losses differ from
    DGL's by more than ``LOSS_RTOL`` (or that gave none while DGL did) marked ``error``."""
    reference = {(r["model"], r["graph"]): r["check_losses"] for r in records
                 if r["contender"] == REFERENCE and r.get("check_losses")}
    verdict = {}
    for r in records:
        key = (r["model"], r["graph"])
        if r.get("check_losses") and key in reference:
            ref = reference[key]
            worst = _relative(r["check_losses"], ref)
            note = ""
            if worst > LOSS_RTOL or len(r["check_losses"]) != len(ref):
                k = next((i for i, (v, w) in enumerate(zip(r["check_losses"], ref))
                          if abs(v - w) > LOSS_RTOL * abs(w)), len(ref) - 1)
                when = "of the initial weights" if k == 0 else f"after {k} updates"
                note = (f"NOT THE SAME MODEL: float64 loss at epoch {k + 1} ({when}) is "
                        f"{r['check_losses'][k]:.8g}, DGL's {ref[k]:.8g} (relative difference "
                        f"above {LOSS_RTOL:g} from there; at most {worst:.2g})")
            verdict[key + (r["contender"],)] = (worst, note)
    out = []
    for r in records:
        r = dict(r)
        worst, note = verdict.get((r["model"], r["graph"], r["contender"]), ("", ""))
        r["check_vs_dgl"] = worst
        if note and r["status"] == "ok":
            r["status"], r["note"] = "error", note
        out.append(r)
    return out


def finish(records: list) -> list:
    """Result rows, in ``COLUMNS`` order, with the derived columns (see the module docstring)."""
    ok = {(r["model"], r["graph"], r["contender"], r["condition"]): r for r in records
          if r["status"] == "ok"}
    rows = []
    for r in records:
        row = dict.fromkeys(COLUMNS, "")
        row.update({k: v for k, v in r.items() if k in COLUMNS})
        row["round_ms"] = " ".join(f"{ms:.5g}" for ms in r.get("round_ms", []))
        case = (r["model"], r["graph"])
        ours = frameworks.COUNTERPART.get(r["contender"], "ours")
        mine = ok.get(case + (ours, r["condition"]))
        dgl = ok.get(case + (REFERENCE, r["condition"]))
        if r["status"] == "ok":
            if dgl:
                row["loss_vs_dgl"] = _relative([r["final_loss"]], [dgl["final_loss"]])
            if mine and r["contender"] != ours:
                for column, field in (("epoch", "epoch_ms"), ("sparse", "sparse_ms"),
                                      ("live", "live_peak_mib"), ("peak", "peak_mib")):
                    if r.get(field) and mine.get(field) not in (None, ""):
                        row[f"ours_over_this_{column}"] = mine[field] / r[field]
            idle = ok.get(case + (r["contender"], "idle"))
            if r["condition"] != "idle" and idle:
                row["load_slowdown"] = r["epoch_ms"] / idle["epoch_ms"]
        rows.append({k: row[k] for k in COLUMNS})
    return rows


def _load_average(machine: dict) -> str:
    spans = [f"{when} {' '.join(f'{x:.1f}' for x in machine[f'load_average_{when}'])}"
             for when in ("start", "end") if f"load_average_{when}" in machine]
    return f"; load average (1, 5, 15 min) at {', '.join(spans)}" if spans else ""


def header(machine: dict, settings: dict) -> str:
    """The machine and method, as the lines printed above the table."""
    return "\n".join([
        f"machine: {machine['cpu_model']} (LLVM: {machine['llvm_cpu']}), "
        f"{machine['cpus_usable']} usable of {machine['cpus_total']} CPUs, {machine['memory']}"
        + _load_average(machine),
        f"threads: {settings['threads']} for every contender (OMP_NUM_THREADS, MKL_NUM_THREADS, "
        f"TVM_NUM_THREADS, torch.set_num_threads); OMP_WAIT_POLICY={settings['omp_wait_policy']}",
        f"training: full batch, Adam lr 0.01, dropout 0, cross-entropy over all nodes, same "
        f"initial weights; {settings['warmup']} warm-up + {settings['epochs']} timed epochs "
        f"({settings['large_epochs']} on synthetic-arxiv), median; sparse time from "
        f"{settings['profile_epochs']} profiled epochs; load: {settings['load_processes']} busy "
        "processes beside the worker",
        f"check: float64 losses over {settings['check_epochs']} epochs agree with DGL's within "
        f"{LOSS_RTOL:g} relative, else ERROR; ours_bf16 (torch.autocast bfloat16), "
        "ours_compiled and pyg_compiled (torch.compile): warm-up losses agree with eager "
        f"float32 ours' (pyg_compiled: PyG's) within {frameworks.OursBf16.loss_rtol:g} "
        f"(bf16) or {frameworks.Compiled.loss_rtol:g} (compiled) relative ('eager' in the "
        "check column), else ERROR",
    ])


def _fmt_ratio(value) -> str:
    return f"{value:.2f}" if value != "" else "-"


def _cell(row, field: str, fmt: str, scale: float = 1) -> str:
    """``row[field] * scale`` formatted; the status of a row that has no figures."""
    if row is None:
        return ""
    if row["status"] != "ok":
        return {"n/a": "n/a", "refused": "refused"}.get(row["status"], "ERROR")
    value = row[field]
    return "-" if value == "" else format(value * scale, fmt)


def table(rows: list, machine: dict, settings: dict) -> str:
    """Per model: each graph and contender idle (epoch ms, sparse ms and share, live and
    resident-set peak MiB, float32
    final loss, float64 check) and under load (epoch ms, slowdown); then ours' ratios."""
    names = [n for n in frameworks.NAMES if any(r["contender"] == n for r in rows)]
    by_key = {(r["model"], r["graph"], r["contender"], r["condition"]): r for r in rows}
    out = [header(machine, settings), ""]
    columns = (f"{'graph':16s}{'contender':>14s}{'epoch ms':>11s}{'sparse ms':>11s}"
               f"{'share':>7s}{'live MiB':>10s}{'rss MiB':>9s}{'f32 loss':>12s}{'check':>14s}"
               f"{'load ms':>10s}{'slowdown':>9s}")
    for model in settings["models"]:
        out += [models.MODELS[model].title, columns]
        for graph in settings["graphs"]:
            for name in names:
                idle = by_key.get((model, graph, name, "idle"))
                load = by_key.get((model, graph, name, "load"))
                if idle is None and load is None:
                    continue
                check = _check_cell(name, idle)
                out.append(f"{graph:16s}{name:>14s}{_cell(idle, 'epoch_ms', '.4g'):>11s}"
                           f"{_cell(idle, 'sparse_ms', '.4g'):>11s}"
                           f"{_cell(idle, 'sparse_share', '.0%'):>7s}"
                           f"{_cell(idle, 'live_peak_mib', '.1f'):>10s}"
                           f"{_cell(idle, 'peak_mib', '.1f'):>9s}"
                           f"{_cell(idle, 'final_loss', '.6g'):>12s}{check:>14s}"
                           f"{_cell(load, 'epoch_ms', '.4g'):>10s}"
                           f"{_cell(load, 'load_slowdown', '.2f'):>9s}")
        out.append("")
    out += [ratios(rows, settings), "", compiled(rows, settings), ""]
    notes = sorted({f"{r['contender']} {r['model']} {r['graph']} {r['condition']}: "
                    f"{r['status'].upper()}, {r['note']}" for r in rows if r["note"]})
    out += [f"  {n}" for n in notes]
    return "\n".join(out)


def _check_cell(name: str, idle) -> str:
    """The check column: ``ref`` for DGL, the float64 difference from DGL's, or for a variant
    of ours its difference from eager float32 ours' (``... eager``)."""
    if idle is None:
        return "-"
    if name == REFERENCE and idle["status"] == "ok":
        return "ref"
    if idle.get("check_vs_eager", "") != "":
        return f"{idle['check_vs_eager']:.0e} eager"
    return f"{idle['check_vs_dgl']:.0e}" if idle["check_vs_dgl"] != "" else "-"


def compiled(rows: list, settings: dict) -> str:
    """``ours_compiled`` against ``pyg_compiled``, idle, per model and graph: each one's epoch
    time, ours' epoch and sparse time over PyG's (below 1: ours is faster), each one's compile
    time (its warm-up epochs less as many median epochs: apart from the epoch times) and how
    often dynamo split its network (0: it compiles fullgraph)."""
    by_key = {(r["model"], r["graph"], r["contender"]): r for r in rows
              if r["condition"] == "idle"}
    lines = ["torch.compile (inductor), idle: ours_compiled against pyg_compiled; compile time = "
             "the warm-up epochs less as many median epochs; breaks = graph breaks (0: "
             "fullgraph)",
             f"{'model':6s}{'graph':16s}" + "".join(f"{h:>11s}" for h in (
                 "ours ms", "pyg ms", "epoch o/p", "sparse o/p", "ours cmp s", "pyg cmp s",
                 "ours brk", "pyg brk"))]
    for model in settings["models"]:
        for graph in settings["graphs"]:
            ours = by_key.get((model, graph, "ours_compiled"))
            pyg = by_key.get((model, graph, "pyg_compiled"))
            if ours is None and pyg is None:
                continue
            cells = [_cell(ours, "epoch_ms", ".4g"), _cell(pyg, "epoch_ms", ".4g"),
                     _cell(pyg, "ours_over_this_epoch", ".2f"),
                     _cell(pyg, "ours_over_this_sparse", ".2f"),
                     _cell(ours, "compile_ms", ".1f", 1e-3), _cell(pyg, "compile_ms", ".1f", 1e-3),
                     _cell(ours, "graph_breaks", "d"), _cell(pyg, "graph_breaks", "d")]
            lines.append(f"{model:6s}{graph:16s}" + "".join(f"{c or '-':>11s}" for c in cells))
    return "\n".join(lines)


def ratios(rows: list, settings: dict) -> str:
    """Ours over DGL and over PyG (below 1: ours faster or smaller): epoch, sparse time, live and
    resident-set peak memory idle, epoch under load; and each side's slowdown under load."""
    by_key = {(r["model"], r["graph"], r["contender"], r["condition"]): r for r in rows}
    lines = ["ours / DGL and ours / PyG (below 1: ours is faster or smaller); slowdown = epoch "
             "under load / idle",
             f"{'model':6s}{'graph':16s}" + "".join(f"{h:>11s}" for h in (
                 "epoch/dgl", "epoch/pyg", "sparse/dgl", "sparse/pyg", "live/dgl", "live/pyg",
                 "rss/dgl", "rss/pyg", "load/dgl", "load/pyg", "slow ours", "slow dgl",
                 "slow pyg"))]
    for model in settings["models"]:
        for graph in settings["graphs"]:
            def get(name, condition, field):
                r = by_key.get((model, graph, name, condition))
                return r[field] if r and r["status"] == "ok" else ""
            cells = [get(n, "idle", f"ours_over_this_{f}")
                     for f in ("epoch", "sparse", "live", "peak") for n in ("dgl", "pyg")]
            cells += [get(n, "load", "ours_over_this_epoch") for n in ("dgl", "pyg")]
            cells += [get(n, "load", "load_slowdown") for n in ("ours", "dgl", "pyg")]
            if any(c != "" for c in cells):
                lines.append(f"{model:6s}{graph:16s}"
                             + "".join(f"{_fmt_ratio(c):>11s}" for c in cells))
    return "\n".join(lines)


def chart(rows: list, settings: dict, path: Path) -> bool:
    """Ours' epoch time and sparse time over DGL's and PyG's (log scale), idle and under load,
    one panel per model (columns) and measure (rows); False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [(n, c) for c in ("idle", "load") for n in ("dgl", "pyg")]
    model_names, graphs = settings["models"], settings["graphs"]
    width = max(3.2 * len(model_names) + 1, 6)
    fig, axes = plt.subplots(2, len(model_names), figsize=(width, 6.5), sharey="row",
                             squeeze=False)
    step = 0.8 / len(series)
    colors = plt.get_cmap("tab10")
    for col, model in enumerate(model_names):
        for row_index, field in enumerate(("ours_over_this_epoch", "ours_over_this_sparse")):
            ax = axes[row_index, col]
            for i, (name, condition) in enumerate(series):
                values = {r["graph"]: r[field] for r in rows if r[field] != "" and
                          (r["model"], r["contender"], r["condition"]) == (model, name, condition)}
                xs = [j + (i - (len(series) - 1) / 2) * step for j, g in enumerate(graphs)
                      if g in values]
                ax.bar(xs, [values[g] for g in graphs if g in values], step, color=colors(i),
                       label=f"over {name}, {condition}")
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_yscale("log")
            ax.set_xticks(range(len(graphs)), graphs, fontsize=7, rotation=20)
            if row_index == 0:
                ax.set_title(model, fontsize=9)
            if col == 0:
                ax.set_ylabel("ours / other, " + ("epoch" if row_index == 0 else "sparse time"),
                              fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8)
    fig.suptitle("below 1: ours is faster", y=0.005, va="bottom", fontsize=9)
    fig.tight_layout(rect=(0, 0.02, 1, 0.9))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write(rows: list, machine: dict, settings: dict, out: Path, curves: dict) -> dict:
    """``gnn.csv`` (one row per result), ``gnn.json`` (machine, settings, rows and each run's
    loss curves, ``curves``) and ``gnn.png`` (with matplotlib) in ``out``; their paths."""
    paths = write_table(rows, COLUMNS, {"machine": machine, "settings": settings,
                                        "loss_curves": curves}, out, "gnn")
    if chart(rows, settings, out / "gnn.png"):
        paths["png"] = out / "gnn.png"
    return paths

