"""One contender on one graph, in a process of its own (``bench.py`` starts one per pair and
keeps it for the graph's cases).

The worker loads the graph, sets the contender up and prints ``READY``; then it reads one case
a line from stdin (``FEAT OP DTYPE``, e.g. ``32 spmm float32``) and answers each with one
``RESULT {json}`` line, until stdin ends. The harness asks every contender for a case before
it moves to the next case, so that the contenders of one case are timed within seconds of one
another on a machine whose speed drifts (a shared VM's speed moves by 1.5x over seconds to
minutes, for every process alike).

For each case: make the inputs and the scipy reference, get the
contender's ``run`` (outside the timed region), call it once (the first call, timed apart: it
compiles for ours) and check the result, warm up (as long as the timed calls will take, at
least one call: one-off costs after the first call, such as a pool's threads starting or ours
moving a reused operand onto huge pages, ``ops.huge_pages``, fall there, and the timed calls
see the steady state a loop of calls reaches), choose the repeat count from the warm-up time
(``budget`` seconds of timed calls, clamped to ``[min_repeat, max_repeat]``), time each call,
and check the last result again. A result whose check fails is reported as an error, with no
time. In bfloat16 (for the contenders of ``contenders.BFLOAT16``) the same, with
the bfloat16 tolerance (``workload``); a library that raises while preparing or making its
first bfloat16 call is reported as refusing (status ``refused``, its exception as the note),
never as a time; ours raising is an error. Anything on stdout besides ``READY`` and the
``RESULT`` lines is the libraries' own chatter.

Thread counts come from the environment the harness sets (``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``, ``TVM_NUM_THREADS``) and ``--threads`` (torch, GraphBLAS).

Example
-------
``printf '32 spmm float32\\n64 sddmm float32\\n' | python benchmarks/worker.py --contender dgl
--graph cora --threads 2 --cache DIR`` (``DIR`` holding ``cora.npz`` from ``graphs.prepare``)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np

import contenders
import workload

PREFIX = "RESULT "
READY = "READY"
PR_SET_PDEATHSIG = 1


def _timed(run) -> tuple:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


class Refused(Exception):
    """A library's refusal of a dtype (its own exception, of whatever class, as the cause)."""


def _prepared_call(contender, op: str, X, Y, dtype: str, library: bool):
    """``(run, first)``: the contender's callable for ``op`` in ``dtype`` (None: no such call)
    and a callable making its first call; a ``library``'s exception in either, in a dtype
    other than float32, becomes :class:`Refused` (ours' stays an error)."""
    kwargs = {} if dtype == "float32" else {"dtype": dtype}
    may_refuse = dtype != "float32" and library

    def guarded(call):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001  (the library's refusal, of whatever class)
            if not may_refuse:
                raise
            message = (str(exc).strip().splitlines() or [""])[0][:160]
            raise Refused(f"{type(exc).__name__}: {message}") from exc

    run = guarded(lambda: contender.sddmm(X, Y, **kwargs) if op == "sddmm"
                  else contender.spmm(X, weighted=op == "spmm", **kwargs))
    return run, lambda: guarded(lambda: _timed(run))


def measure(contender, A, op: str, feat: int, args, dtype: str = "float32") -> dict:
    """Check and time ``op`` at ``feat`` features in ``dtype``; the fields of one result
    row."""
    X, Y = workload.inputs(A, op, feat)
    start = time.perf_counter()
    try:
        run, first_call = _prepared_call(contender, op, X, Y, dtype,
                                         args.contender not in contenders.OURS)
        prepare_ms = 1e3 * (time.perf_counter() - start)
        if run is None:
            return {"status": "n/a", "note": "no such call in this library"}
        path = args.cache / f"{args.graph}-{op}-{feat}.npy"
        expected, bound = workload.reference(A, op, X, Y, path)
        result, first_s = first_call()
    except Refused as refusal:
        return {"status": "refused", "note": f"refuses {dtype}: {refusal}"}
    error = workload.check(contender.to_numpy(op, result), expected, bound, dtype)
    if error > 1:
        return {"status": "error", "note": f"wrong result (error {error:.3g} of the allowed)",
                "first_call_ms": 1e3 * first_s}
    warm, calls = time.perf_counter(), 0
    while calls == 0 or (calls < args.max_repeat and time.perf_counter() - warm < args.budget):
        run()
        calls += 1
    per_call = (time.perf_counter() - warm) / calls
    repeat = int(min(max(args.budget / per_call, args.min_repeat), args.max_repeat))
    times = []
    for _ in range(repeat):
        result, seconds = _timed(run)
        times.append(seconds)
    error = max(error, workload.check(contender.to_numpy(op, result), expected, bound, dtype))
    if error > 1:
        return {"status": "error", "note": f"wrong result after timing (error {error:.3g})",
                "first_call_ms": 1e3 * first_s}
    ms = 1e3 * np.array(times)
    return {"status": "ok", "checked": True, "median_ms": float(np.median(ms)),
            "p25_ms": float(np.percentile(ms, 25)), "p75_ms": float(np.percentile(ms, 75)),
            "min_ms": float(ms.min()), "max_ms": float(ms.max()), "repeats": repeat,
            "first_call_ms": 1e3 * first_s, "prepare_ms": prepare_ms, "max_error": error}


def die_with_parent() -> None:
    """Ask Linux to kill this worker when the harness that started it dies (the harness keeps
    waiting workers stopped, and a stopped orphan would stay); nothing elsewhere."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:          # the harness died before the request
            os._exit(1)


def cases(lines):
    """``(feat, op, dtype)`` of each non-empty line ``FEAT OP DTYPE`` of ``lines``.

    >>> list(cases(["32 spmm float32\\n", "\\n"]))
    [(32, 'spmm', 'float32')]
    """
    for line in lines:
        if line.strip():
            feat, op, dtype = line.split()
            yield int(feat), op, dtype


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contender", required=True, choices=contenders.NAMES)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=0.25, help="seconds of timed calls")
    parser.add_argument("--min-repeat", type=int, default=5)
    parser.add_argument("--max-repeat", type=int, default=400)
    parser.add_argument("--cache", type=Path, required=True,
                        help="the harness's folder of prepared graphs and references")
    args = parser.parse_args()

    def emit(feat, op, dtype, **fields):
        print(PREFIX + json.dumps({"contender": args.contender, "graph": args.graph,
                                   "feat": feat, "op": op, "dtype": dtype, **fields}),
              flush=True)

    die_with_parent()
    A = workload.load(args.graph, args.cache)
    contender, unavailable = None, None
    try:
        Contender = contenders.load(args.contender)
    except ImportError as exc:
        unavailable = {"status": "n/a", "note": f"not installed ({exc})".splitlines()[0]}
    if unavailable is None:
        try:
            start = time.perf_counter()
            contender = Contender(A, args.threads)
            setup_ms = 1e3 * (time.perf_counter() - start)
        except Exception:  # reported as this contender's error on every measurement
            unavailable = {"status": "error",
                           "note": "setup: " + traceback.format_exc(limit=1).splitlines()[-1]}
    print(READY, flush=True)
    for feat, op, dtype in cases(sys.stdin):
        if unavailable is not None:
            emit(feat, op, dtype, **unavailable)
            continue
        try:
            fields = measure(contender, A, op, feat, args, dtype)
        except Exception:  # one failing call is that measurement's error, not the run's
            fields = {"status": "error", "note": traceback.format_exc(limit=1).splitlines()[-1]}
        emit(feat, op, dtype, setup_ms=setup_ms, **fields)


if __name__ == "__main__":
    main()
