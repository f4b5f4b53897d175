"""How much of a training epoch is spent in sparse operators, from ``torch.profiler``.

The same rule on every side. A *sparse call* is one profiler range named in the contender's set
(``frameworks``: each call of DGL's or sparsetir's autograd Functions, which the profiler
records under the Function's class name, e.g. ``GSpMM``; for PyG, each layer's
``propagate``/``edge_updater`` call, marked with ``record_function``). Its forward time is the
range's duration (counted once where ranges nest). Its backward time is that of every autograd
node created inside it: the profiler gives each forward op the autograd sequence number of the
node it creates (the last op recorded with a number is the one that created the node, the
ones before it only read the counter), and the backward step of that node
(``autograd::engine::evaluate_function: ...``) carries the same number.

Work a library does outside those calls counts as dense: DGL divides by the degree for a mean
outside its SpMM and applies GAT's leaky ReLU outside its SDDMM, while PyG does both inside
``propagate``/``edge_updater``; PyG's RGCN selects each relation's edges outside ``propagate``.

Example
-------
>>> sparse_s, total_s = sparse_seconds(run_epoch, {"GSpMM", "GSDDMM"}, epochs=3)
>>> sparse_s / total_s        # the share of the profiled epochs spent in sparse operators
0.41
"""

from __future__ import annotations

import time

from torch.profiler import ProfilerActivity, profile

BACKWARD = "autograd::engine::evaluate_function: "


def _inside(event, names: set) -> bool:
    while event is not None:
        if event.name in names:
            return True
        event = event.cpu_parent
    return False


def sparse_microseconds(events, names: set) -> float:
    """Microseconds of ``events`` (a profiler's ``events()``) in sparse calls named ``names``,
    forward and backward, as the module docstring defines."""
    forward = [e for e in events if not e.name.startswith(BACKWARD)]
    total = sum(e.cpu_time_total for e in forward
                if e.name in names and not _inside(e.cpu_parent, names))
    creator = {}
    for e in sorted(forward, key=lambda e: e.time_range.start):
        if e.sequence_nr >= 0:
            creator[(e.thread, e.sequence_nr)] = e
    sparse_nodes = {key for key, e in creator.items() if _inside(e, names)}
    for e in events:
        if e.name.startswith(BACKWARD) and (e.fwd_thread, e.sequence_nr) in sparse_nodes:
            total += e.cpu_time_total
    return total


def sparse_seconds(run_epoch, names: set, epochs: int) -> tuple:
    """``(sparse, total)`` seconds of ``epochs`` calls of ``run_epoch`` under the profiler."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(epochs):
            run_epoch()
        total = time.perf_counter() - start
    return sparse_microseconds(prof.events(), names) / 1e6, total
