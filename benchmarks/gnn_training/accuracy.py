"""Test accuracy of a GNN trained in float32 and under bfloat16 autocast, from the same weights.

The models are the usual small ones for Planetoid's node classification (``MODELS``): GCN, 2
layers, hidden 16, on the graph with self-loops; GraphSAGE, 2 layers, hidden 64, mean
aggregation, on the graph without. Training (``worker.Training``): full batch, Adam (lr 0.01,
weight decay ``WEIGHT_DECAY`` on every parameter), dropout 0, cross-entropy over the training
nodes, from ``models.canonical_weights`` (the same seed for both precisions). ``ours`` runs in
float32; ``ours_bf16`` runs each forward and loss under ``torch.autocast("cpu",
dtype=torch.bfloat16)`` (``frameworks.OursBf16``: bfloat16 products and aggregations, float32
weights and optimizer). The accuracy is the trained network's after the last epoch, from a
forward in its own precision. ``mlp_accuracy`` is the baseline that reads no edges.

Example
-------
>>> task, split = communities.community_task("cora", A, self_loops=True)
>>> fp32, bf16 = train_and_test(MODELS["gcn"], [frameworks.load_framework("ours"),
...                              frameworks.load_framework("ours_bf16")], task, split)
>>> fp32.test_accuracy, bf16.test_accuracy, bf16.median_epoch_ms
(0.83, 0.83, 9.1)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from . import models
from .worker import LEARNING_RATE, Training

MODELS = {
    "gcn": models.ModelSpec("gcn", "GCN, 2 layers, hidden 16, norm both, self-loops", 2, 16,
                            True),
    "sage": models.ModelSpec("sage", "GraphSAGE, 2 layers, hidden 64, mean aggregation", 2, 64,
                             False),
}
WEIGHT_DECAY = 5e-4
EPOCHS = 200


@dataclass
class Outcome:
    """One training run: the accuracies after the last epoch, every epoch's loss and time."""

    test_accuracy: float
    val_accuracy: float
    losses: list
    epoch_ms: list

    @property
    def median_epoch_ms(self) -> float:
        return float(np.median(self.epoch_ms))


def accuracy(predictions: np.ndarray, labels: np.ndarray, nodes: np.ndarray) -> float:
    """The share of ``nodes`` whose prediction is their label."""
    return float(np.mean(predictions[nodes] == labels[nodes]))


def train_and_test(spec, contenders: list, task, split, epochs: int = EPOCHS,
                   seed: int = 0) -> list:
    """One ``Outcome`` per framework of ``contenders``: ``spec`` trained with each on
    ``split.train`` for ``epochs`` epochs, then tested. The runs advance in turn, one epoch
    each (each timed whole: zero_grad, forward, loss, backward, Adam step), so that a change
    in the machine's load falls on all of them alike."""
    runs = [Training(spec, framework, task, seed=seed, weight_decay=WEIGHT_DECAY,
                     train_nodes=split.train) for framework in contenders]
    losses, epoch_ms = [[] for _ in runs], [[] for _ in runs]
    for _ in range(epochs):
        for run, run_losses, run_ms in zip(runs, losses, epoch_ms):
            start = time.perf_counter()
            run_losses.append(run.epoch())
            run_ms.append(1e3 * (time.perf_counter() - start))
    outcomes = []
    for run, run_losses, run_ms in zip(runs, losses, epoch_ms):
        predicted = run.predictions()
        outcomes.append(Outcome(accuracy(predicted, task.labels, split.test),
                                accuracy(predicted, task.labels, split.val), run_losses, run_ms))
    return outcomes


def mlp_accuracy(task, split, hidden: int = 16, epochs: int = EPOCHS, seed: int = 0) -> float:
    """Test accuracy of a 2-layer MLP (``hidden`` wide, ReLU) on the features alone, trained in
    float32 as the GNNs are (Adam, lr 0.01, weight decay, the training nodes)."""
    torch.manual_seed(seed)
    width = task.features.shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(),
                              torch.nn.Linear(hidden, task.num_classes))
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    features, labels = torch.from_numpy(task.features), torch.from_numpy(task.labels)
    train = torch.from_numpy(split.train)
    for _ in range(epochs):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(features[train]), labels[train]).backward()
        optimizer.step()
    with torch.no_grad():
        return accuracy(net(features).argmax(1).numpy(), task.labels, split.test)
