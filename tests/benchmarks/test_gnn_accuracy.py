"""The bfloat16 accuracy benchmark (``benchmarks/gnn_accuracy.py``) and its task, cheaply.

- the task (``gnn_training/communities.py``): grown regions are contiguous and take whole
  small components, on a path and a triangle by hand and on cora against its target sizes;
  bags of words are row-normalised and lean to their class's topic; the split has Planetoid's
  sizes, disjoint;
- GCN and GraphSAGE on cora, ``EPOCHS`` epochs (one torch thread: a few seconds), float32 and
  bfloat16 autocast from the same weights: their losses agree within ``OursBf16.loss_rtol``
  (and differ: the bfloat16 run is not the float32 one), their test accuracies within 1 point,
  both far above the feature-only MLP trained as long;
  every sparse aggregation of the bfloat16 run gives bfloat16 and gets a bfloat16 gradient
  (our bfloat16 kernels ran), the float32 run's float32;
- the table's layout.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gnn_accuracy  # noqa: E402
from gnn_training import accuracy, communities, frameworks  # noqa: E402

import sparsetir.ops  # noqa: E402

EPOCHS = 30


def _path_and_triangle():
    """Nodes 0-9 a path, 10-12 a triangle: symmetric, no self-loops."""
    edges = [(i, i + 1) for i in range(9)] + [(10, 11), (11, 12), (10, 12)]
    rows, cols = zip(*edges)
    A = scipy.sparse.coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(13, 13))
    return (A + A.T).tocsr()


@pytest.mark.parametrize("seed", range(4))
def test_grown_regions_are_contiguous_and_take_small_components_whole(seed):
    labels = communities.grown_regions(_path_and_triangle(), (8, 5), seed)
    path = labels[:10]
    assert set(path) == {0, 1}
    assert np.count_nonzero(np.diff(path)) == 1      # two runs along the path
    assert len(set(labels[10:])) == 1                  # the triangle: one class
    assert labels[10] == np.argmin(np.bincount(path, minlength=2) / (8, 5))
    assert np.array_equal(labels, communities.grown_regions(_path_and_triangle(), (8, 5), seed))


@pytest.fixture(scope="module")
def cora():
    return gnn_accuracy.graph("cora")


def test_cora_task_follows_the_graph(cora):
    task, split = communities.community_task("cora", cora, self_loops=False)
    sizes = np.bincount(task.labels)
    targets = np.array(communities.CLASS_SIZES["cora"])
    assert len(sizes) == 7 and np.all(abs(sizes - targets) <= 0.05 * targets.sum())
    destinations = np.repeat(np.arange(cora.shape[0]), np.diff(cora.indptr))
    same = task.labels[cora.indices] == task.labels[destinations]
    assert 0.7 < same.mean() < 0.95                    # homophilous, not trivially so
    # features: row-normalised bags of at most 18 words, leaning to the class's topic
    assert task.features.shape == (2708, 1433)
    np.testing.assert_allclose(task.features.sum(1), 1, rtol=1e-6)
    assert (np.count_nonzero(task.features, axis=1) <= 18).all()
    class_mean = np.stack([task.features[task.labels == c].mean(0) for c in range(7)])
    own = (class_mean[task.labels] * task.features).sum(1)
    other = (class_mean[(task.labels + 1) % 7] * task.features).sum(1)
    assert (own > other).mean() > 0.8
    # split: Planetoid's sizes, disjoint, 20 training nodes per class
    assert (len(split.train), len(split.val), len(split.test)) == (140, 500, 1000)
    assert len(np.unique(np.concatenate([split.train, split.val, split.test]))) == 1640
    assert (np.bincount(task.labels[split.train]) == 20).all()
    again, split_again = communities.community_task("cora", cora, self_loops=False)
    assert np.array_equal(again.labels, task.labels)
    assert np.array_equal(again.features, task.features)
    assert np.array_equal(split_again.test, split.test)


@pytest.fixture
def one_thread():
    """torch on one thread for the test (on a busy machine, two cost eight times as long)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def aggregation_dtypes(monkeypatch):
    """``[(output dtype, gradient dtype), ...]`` of every sparse aggregation the layers call
    (``copy_u_sum`` for GraphConv, ``gspmm`` for SAGEConv)."""
    seen = []

    def recording(function):
        def call(*args, **kwargs):
            out = function(*args, **kwargs)
            entry = [out.dtype, None]
            seen.append(entry)
            if out.requires_grad:
                out.register_hook(lambda grad: entry.__setitem__(1, grad.dtype))
            return out
        return call

    for name in ("copy_u_sum", "gspmm"):
        monkeypatch.setattr(sparsetir.ops, name, recording(getattr(sparsetir.ops, name)))
    return seen


@pytest.mark.parametrize("model", list(accuracy.MODELS))
def test_bfloat16_training_reaches_float32_accuracy(cora, model, one_thread,
                                                   aggregation_dtypes):
    spec = accuracy.MODELS[model]
    task, split = communities.community_task("cora", cora, spec.self_loops)
    fp32, bf16 = accuracy.train_and_test(spec, [frameworks.load_framework("ours"),
                                                frameworks.load_framework("ours_bf16")],
                                         task, split, EPOCHS)
    gaps = np.abs(np.array(bf16.losses) / np.array(fp32.losses) - 1)
    assert len(gaps) == EPOCHS
    assert gaps.max() <= frameworks.OursBf16.loss_rtol and gaps.max() > 0
    assert abs(bf16.test_accuracy - fp32.test_accuracy) <= 0.01
    mlp = accuracy.mlp_accuracy(task, split, epochs=EPOCHS)
    assert min(fp32.test_accuracy, bf16.test_accuracy) > mlp + 0.2
    # the runs take turns, float32 first: each epoch 2 layers of float32, then of bfloat16
    per_epoch = 2 * spec.num_layers
    assert len(aggregation_dtypes) == per_epoch * EPOCHS + 2 * spec.num_layers
    epoch = aggregation_dtypes[:per_epoch]
    assert epoch == ([[torch.float32] * 2] * spec.num_layers
                     + [[torch.bfloat16] * 2] * spec.num_layers)


def test_table_layout():
    text = gnn_accuracy.table([("gcn", "cora", 56.8, 92.1, 92.0, -0.1, 5.0, 6.25)])
    assert text.splitlines()[2] == "| gcn | cora | 56.8 | 92.1 | 92.0 | -0.1 | 5.0 | 6.2 |"
    assert text.splitlines()[0].count("|") == len(gnn_accuracy.COLUMNS) + 1
