"""One contender training one model on one graph, in a process of its own (``gnn.py`` starts
one per case and condition).

Steps: build the task (``tasks``), the framework's graph (timed: ``setup_ms``), the network
with the canonical initial weights (``models``) and Adam (lr 0.01); then ``--warmup``
epochs (kernels compiled or loaded, optimizer state allocated), the C heap's free pages handed
back and the peak resident set reset to the current one (``/proc/self/clear_refs``), and
``--epochs`` timed epochs, each one ``zero_grad``, forward, cross-entropy over every node,
backward and an optimizer step, timed whole with ``perf_counter``; the peak memory is the
process's peak resident set during the timed epochs minus its resident set just before them:
what one training epoch needs on top of the model, the graph and the optimizer state.
The losses of all those epochs are reported (the harness compares them across contenders).
Then ``--profile-epochs`` more epochs under ``torch.profiler`` give the share of an epoch spent
in sparse operators (``sparse_time``). Last, the check: the same network trained from the same
weights in float64 for ``--check-epochs`` epochs; its losses are what the harness compares
across contenders (float32 rounding differences grow too fast in training to compare float32
losses at 1e-4 after more than a few epochs: see ``docs/gnn-benchmark.md``). A variant
(``frameworks.VARIANTS``: ours under bfloat16 autocast, ours or PyG under ``torch.compile``)
is checked otherwise, before its timed epochs: its eager contender (``framework.eager``) in
float32 trains from the same weights for as many epochs as the variant's warm-up (at most
``--check-epochs``), and the variant's warm-up losses must agree with those within the
variant's ``loss_rtol``, else the case is an error with no time (``check_vs_eager``: the
largest relative difference). A compiled network compiles in its warm-up epochs (again where
a guard fails, as on PyG's GCN once its normalisation is cached): ``compile_ms`` is their time
less as many median epochs, and ``graph_breaks`` (with a note naming the reasons) how often
dynamo had to split it; where ``torch.compile`` raises, the case is ``refused`` with its
message, no time. One line ``RESULT {json}`` on stdout.

Threads: ``torch.set_num_threads(--threads)``; ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
``TVM_NUM_THREADS`` come from the harness.

Example
-------
``cd benchmarks; python -m gnn_training.worker --contender dgl --model gcn --graph cora --threads 2 --cache DIR``
(``DIR`` holding ``gnn-cora.npz`` from ``tasks.prepare``)
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from . import frameworks, models, sparse_time, tasks

PREFIX = "RESULT "
LEARNING_RATE = 0.01


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak_memory() -> int:
    """Reset this process's peak resident set to the current one; the current one in KiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kib("VmRSS")


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``), so that the
    resident set before the timed epochs holds live data only and their peak counts what they
    allocate; a no-op where the C library has no ``malloc_trim``."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


def peak_memory() -> int:
    """This process's peak resident set in KiB since the last ``reset_peak_memory``."""
    return _status_kib("VmHWM")


class Training:
    """``spec`` on ``task`` with ``framework`` in ``dtype``: ``epoch()`` trains one epoch and
    returns its loss, the cross-entropy over ``train_nodes`` (every node when ``None``), with
    Adam's ``weight_decay``; ``predictions()`` are the classes the network gives every node."""

    def __init__(self, spec, framework, task, dtype=torch.float32, seed: int = 0,
                 weight_decay: float = 0.0, train_nodes: np.ndarray | None = None):
        start = time.perf_counter()
        self.inputs = framework.inputs(task, dtype)
        self.setup_s = time.perf_counter() - start
        width = task.features.shape[1]
        self.net = models.Net(spec, framework, width, task.num_classes)
        framework.load(self.net, models.canonical_weights(spec, width, task.num_classes,
                                                              seed))
        self.net.to(dtype)
        self.framework, self.model = framework, framework.prepare(self.net)
        self.features = torch.from_numpy(task.features).to(dtype)
        self.labels = torch.from_numpy(task.labels)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=LEARNING_RATE,
                                          weight_decay=weight_decay)
        self.train_nodes = (slice(None) if train_nodes is None
                            else torch.from_numpy(np.asarray(train_nodes, np.int64)))

    def logits(self):
        return self.model(self.inputs, self.features)

    def epoch(self) -> float:
        self.optimizer.zero_grad()
        with self.framework.forward_context():
            loss = torch.nn.functional.cross_entropy(self.logits()[self.train_nodes],
                                                     self.labels[self.train_nodes])
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def predictions(self) -> np.ndarray:
        """Each node's class (the argmax of its logits), from a forward in the context the
        network trains in, without gradients."""
        with torch.no_grad(), self.framework.forward_context():
            return self.logits().argmax(1).numpy()


def eager_check(framework, spec, task, losses: list, epochs: int) -> tuple:
    """``(worst, note)``: the largest relative difference of a variant's first ``epochs``
    ``losses`` from its eager contender's in float32, from the same weights; ``note`` says
    where they part when that is beyond the variant's ``loss_rtol`` (empty otherwise)."""
    eager = Training(spec, frameworks.load_framework(framework.eager), task)
    reference = [eager.epoch() for _ in range(epochs)]
    gaps = [abs(v - r) / abs(r) for v, r in zip(losses, reference)]
    worst = max(gaps)
    if worst <= framework.loss_rtol:
        return worst, ""
    k = next(i for i, gap in enumerate(gaps) if gap > framework.loss_rtol)
    return worst, (f"NOT THE SAME MODEL: loss at epoch {k + 1} is {losses[k]:.8g}, eager "
                   f"float32 {framework.eager}'s {reference[k]:.8g} (relative difference "
                   f"{gaps[k]:.2g}, allowed {framework.loss_rtol:g})")


def train(args) -> dict:
    """Everything the worker measures, as the fields of its result."""
    framework = frameworks.load_framework(args.contender)
    spec = models.MODELS[args.model]
    task = tasks.make_task(args.graph, tasks.load(args.graph, args.cache), spec.self_loops)
    run = Training(spec, framework, task)
    seconds, losses = [], []

    def timed_epochs(count):
        for _ in range(count):
            start = time.perf_counter()
            losses.append(run.epoch())
            seconds.append(time.perf_counter() - start)

    timed_epochs(args.warmup)
    checked = {}
    if args.contender in frameworks.VARIANTS and min(args.warmup, args.check_epochs):
        worst, note = eager_check(framework, spec, task, losses,
                                  min(args.warmup, args.check_epochs))
        if note:
            return {"status": "error", "note": note, "check_vs_eager": worst}
        checked["check_vs_eager"] = worst
    gc.collect()
    release_free_memory()
    baseline_kib = reset_peak_memory()
    timed_epochs(args.epochs)
    peak_kib = peak_memory()
    ms = 1e3 * np.array(seconds[args.warmup:])
    fields = {"status": "ok", "nodes": task.num_nodes, "edges": int(task.adjacency.nnz),
              "setup_ms": 1e3 * run.setup_s, "first_epoch_ms": 1e3 * seconds[0],
              "epoch_ms": float(np.median(ms)), "p25_ms": float(np.percentile(ms, 25)),
              "p75_ms": float(np.percentile(ms, 75)), "epochs": len(losses),
              "final_loss": losses[-1], "losses": losses,
              "peak_mib": (peak_kib - baseline_kib) / 1024, "baseline_mib": baseline_kib / 1024,
              **checked}
    if framework.compiles:
        compiling = max(args.warmup, 1)   # the epochs that compile: the warm-up, or the first
        fields["compile_ms"] = 1e3 * sum(seconds[:compiling]) - compiling * fields["epoch_ms"]
        fields.update(framework.compile_report())
    if args.profile_epochs and framework.sparse_calls_visible:
        framework.mark_sparse_calls(run.net)
        sparse_s, total_s = sparse_time.sparse_seconds(
            run.epoch, framework.sparse_operator_names(), args.profile_epochs)
        share = sparse_s / total_s
        fields.update(sparse_share=share, sparse_ms=share * fields["epoch_ms"],
                      profiled_epoch_ms=1e3 * total_s / args.profile_epochs,
                      profiled_sparse_ms=1e3 * sparse_s / args.profile_epochs)
    if args.check_epochs and args.contender not in frameworks.VARIANTS:
        check = Training(spec, framework, task, torch.float64)
        fields["check_losses"] = [check.epoch() for _ in range(args.check_epochs)]
    return fields


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contender", required=True, choices=frameworks.NAMES)
    parser.add_argument("--model", required=True, choices=list(models.MODELS))
    parser.add_argument("--graph", required=True, choices=tasks.labels())
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=20, help="timed epochs")
    parser.add_argument("--profile-epochs", type=int, default=2)
    parser.add_argument("--check-epochs", type=int, default=10,
                        help="epochs of the float64 run whose losses are compared (0: none)")
    parser.add_argument("--condition", default="idle", help="a label copied to the result")
    parser.add_argument("--cache", type=Path, required=True,
                        help="the harness's folder of prepared graphs")
    return parser.parse_args(argv)


def outcome(args) -> dict:
    """``train``'s fields, or why there are none: ``n/a`` (the library is not installed),
    ``refused`` (``torch.compile`` raised: its message) or ``error`` (anything else)."""
    try:
        return train(args)
    except ImportError as exc:
        return {"status": "n/a", "note": f"not installed ({exc})".splitlines()[0]}
    except torch._dynamo.exc.TorchDynamoException as exc:  # pylint: disable=protected-access
        cause = getattr(exc, "inner_exception", exc)   # a backend's failure, unwrapped
        first = (str(cause).strip().splitlines() or [""])[0]
        return {"status": "refused",
                "note": f"torch.compile refused: {type(cause).__name__}: {first}"}
    except Exception:  # the case's error, reported in its row
        return {"status": "error",
                "note": traceback.format_exc(limit=2).strip().splitlines()[-1]}


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    fields = outcome(args)
    print(PREFIX + json.dumps({"contender": args.contender, "model": args.model,
                               "graph": args.graph, "condition": args.condition, **fields}),
          flush=True)


if __name__ == "__main__":
    main()
