"""The CSV and JSON files a benchmark run leaves (``bench.*`` of ``bench.py``, ``gnn.*`` of
``gnn.py``): one CSV row per result, and a JSON sidecar with the machine, the settings and the
rows.

Example
-------
>>> # paths = write_table(rows, COLUMNS, {"machine": ..., "settings": ...}, out, "bench")
"""

from __future__ import annotations

import csv
import json
from pathlib import Path


def write_table(rows: list, columns: list, sidecar: dict, out: Path, stem: str) -> dict:
    """``<stem>.csv`` (``columns`` of each row, floats to 6 significant digits) and
    ``<stem>.json`` (``sidecar`` with the columns and rows added) in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "json": out / f"{stem}.json"}
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows([_cell(r[c]) for c in columns] for r in rows)
    paths["json"].write_text(json.dumps({**sidecar, "columns": columns, "rows": rows},
                                        indent=1, default=str) + "\n")
    return paths


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
