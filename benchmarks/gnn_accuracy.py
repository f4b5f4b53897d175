"""GCN and GraphSAGE trained in float32 and under bfloat16 autocast: test accuracy and epoch time.

For each model and graph, ``sparsetir.nn``'s network is trained from the same initial weights
in float32 (``ours``) and under ``torch.autocast("cpu", dtype=torch.bfloat16)``
(``ours_bf16``), the two runs taking turns one epoch at a time, for ``--epochs`` epochs (200);
the table gives each one's test accuracy after the last epoch, the difference in points, and
the median epoch time, beside a feature-only MLP's accuracy (the task's floor). The task:
``gnn_training/communities.py`` (classes grown on the real graph, class-dependent noisy
features, Planetoid's split); the models and training: ``gnn_training/accuracy.py``.

Example
-------
``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/gnn_accuracy.py`` (GCN and GraphSAGE on cora
and pubmed); ``make bench-gnn-accuracy``; ``... --models gcn --graphs cora --epochs 50``
"""

from __future__ import annotations

import argparse

import torch

import machine
from gnn_training import accuracy, communities, frameworks, tasks

COLUMNS = ("model", "graph", "MLP acc", "fp32 acc", "bf16 acc", "diff (pts)", "fp32 ms",
           "bf16 ms")


def graph(label: str):
    """The bundled graph ``label``, symmetric and without self-loops."""
    from sparsetir.data import load_graph

    return tasks.symmetric_without_loops(load_graph(label))


def rows(model_names, graph_names, epochs: int, seed: int = 0) -> list:
    """One row of ``COLUMNS`` per model and graph; ``seed`` makes the task and the weights."""
    contenders = [frameworks.load_framework("ours"), frameworks.load_framework("ours_bf16")]
    out = []
    for label in graph_names:
        A = graph(label)
        for name in model_names:
            spec = accuracy.MODELS[name]
            task, split = communities.community_task(label, A, spec.self_loops, seed)
            fp32, bf16 = accuracy.train_and_test(spec, contenders, task, split, epochs, seed)
            mlp = accuracy.mlp_accuracy(task, split, epochs=epochs, seed=seed)
            out.append((name, label, 100 * mlp,
                        100 * fp32.test_accuracy, 100 * bf16.test_accuracy,
                        100 * (bf16.test_accuracy - fp32.test_accuracy),
                        fp32.median_epoch_ms, bf16.median_epoch_ms))
    return out


def table(rows_: list) -> str:
    """``rows_`` as a Markdown table (accuracies in percent, times in ms)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, label, *numbers in rows_:
        mlp, fp32, bf16, diff, ms32, ms16 = numbers
        lines.append(f"| {name} | {label} | {mlp:.1f} | {fp32:.1f} | {bf16:.1f} | {diff:+.1f} "
                     f"| {ms32:.1f} | {ms16:.1f} |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(accuracy.MODELS),
                        default=list(accuracy.MODELS))
    parser.add_argument("--graphs", nargs="+", choices=list(communities.CLASS_SIZES),
                        default=list(communities.CLASS_SIZES))
    parser.add_argument("--epochs", type=int, default=accuracy.EPOCHS)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads")
    parser.add_argument("--seed", type=int, default=0, help="of the task and the weights")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"CPU: {machine.cpu_model()}; torch threads {args.threads}; {args.epochs} epochs; "
          f"seed {args.seed}")
    print(table(rows(args.models, args.graphs, args.epochs, args.seed)), flush=True)


if __name__ == "__main__":
    main()
