"""The run's results in a few lines: each kernel's geometric-mean speedup over its contender.

For every op and kernel (a ``*_segments`` kernel once per segment length), the geometric mean
and the worst of ``speedup`` (the contender's time over ours) over the problems it ran on, and,
per op, the same for the best of the ``ops_*`` kernels on each problem. Rows whose check failed
or that have no contender time are left out and counted.

Run after a run, on its CSV: ``python3 summary.py results.csv``; ``run.py`` prints it at the end.

Example
-------
>>> rows = [dict(graph="g", op="spmm", kernel="ops_spmm", block="", feat="32", speedup="2.0",
...              ok="True"),
...         dict(graph="g", op="spmm", kernel="ops_spmm_segments", block="32", feat="32",
...              speedup="0.5", ok="True"),
...         dict(graph="h", op="spmm", kernel="ops_spmm", block="", feat="32", speedup="0.5",
...              ok="True")]
>>> for line in summary_lines(rows):
...     print(line)
spmm            ops_spmm                         geomean 1.00x  worst 0.50x  (2 problems)
spmm            ops_spmm_segments/32             geomean 0.50x  worst 0.50x  (1 problems)
spmm            best ops_* per problem           geomean 1.00x  worst 0.50x  (2 problems)
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict


def summary_lines(rows: list) -> list:
    """The summary of CSV ``rows`` (dicts with ``run.py``'s columns), a line per kernel."""
    by_kernel, best, skipped = defaultdict(list), defaultdict(dict), 0
    for row in rows:
        if not row["speedup"] or row["ok"] not in ("True", True):
            skipped += 1
            continue
        speedup = float(row["speedup"])
        kernel = row["kernel"] + (f"/{row['block']}" if row["block"] and
                                  row["kernel"].endswith("_segments") else "")
        by_kernel[(row["op"], kernel)].append(speedup)
        if row["kernel"].startswith("ops_"):
            problem = (row["graph"], row["feat"], row["block"] if row["op"] == "bsr_spmm" else "")
            best[row["op"]][problem] = max(best[row["op"]].get(problem, 0.0), speedup)
    lines = [_line(op, kernel, values) for (op, kernel), values in sorted(by_kernel.items())]
    lines += [_line(op, "best ops_* per problem", list(problems.values()))
              for op, problems in sorted(best.items())]
    if skipped:
        lines.append(f"({skipped} rows left out: failed, or no contender time)")
    return lines


def _line(op: str, kernel: str, values: list) -> str:
    geomean = math.exp(sum(map(math.log, values)) / len(values))
    return (f"{op:15s} {kernel:32s} geomean {geomean:.2f}x  worst {min(values):.2f}x  "
            f"({len(values)} problems)")


def main(path: str) -> None:
    with open(path, newline="") as stream:
        for line in summary_lines(list(csv.DictReader(stream))):
            print(line)


if __name__ == "__main__":
    main(sys.argv[1])
