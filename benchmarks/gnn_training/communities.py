"""A node-classification task on a bundled graph's real edges, for measuring accuracy.

The bundled cora and pubmed hold the citation graphs' structure only (no features, no labels),
and nothing is downloaded, so the classes and features here are made, from a seed, in a way
that lets a graph neural network's accuracy mean something: the classes follow the graph (its
neighbourhoods), and the features alone leave a classifier clearly short of one that reads
the graph.

- **Classes** (``grown_regions``): regions grown on the graph, one per class, to the real
  dataset's class sizes (``CLASS_SIZES``: Planetoid's Cora has 7 classes of 818, 426, 418,
  351, 298, 217 and 180 papers, Pubmed 3 of 4103, 7739 and 7875). One seed node per class,
  drawn in the largest connected component; the region furthest below its target size claims
  the next unclaimed node of its breadth-first frontier, until every node of the component is
  claimed. Each other component goes whole to the class then furthest below its target.
  So neighbours mostly share a class (edge homophily 0.81 on cora and 0.77 on pubmed with
  seed 0, where the real labels give about 0.81 and 0.80).
- **Features** (``class_features``): bags of words at the dataset's published vocabulary size
  (``tasks.DATASETS``: 1433 words, 500 for pubmed), as the real ones are. Each class has a
  topic, a random set of ``vocabulary`` words; each node draws ``words`` words (the real
  datasets' mean count: 18 on cora, 50 on pubmed), each from its class's topic with
  probability ``topical``, else from the whole vocabulary, uniformly; its feature vector marks
  the words drawn, row-normalised to sum 1 (the usual preprocessing of Planetoid's features).
  ``topical`` is set (``BAGS``) so that a two-layer MLP on the features alone reaches about
  what it is reported to reach on the real features (some 57-60% on cora, 71% on pubmed):
  with seed 0 it reaches 61% and 71%, GCN and GraphSAGE 92% on both (the table in
  ``docs/half-precision.md``).
- **Split** (``planetoid_split``): Planetoid's sizes, 20 training nodes per class, 500
  validation and 1000 test nodes, disjoint, drawn from a seeded permutation.

Example
-------
>>> A = tasks.symmetric_without_loops(sparsetir.data.load_graph("cora"))
>>> task, split = community_task("cora", A, self_loops=True)
>>> task.features.shape, np.bincount(task.labels), len(split.train), len(split.test)
((2708, 1433), array([844, 419, 413, 346, 295, 214, 177]), 140, 1000)
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from . import tasks

CLASS_SIZES = {"cora": (818, 426, 418, 351, 298, 217, 180), "pubmed": (4103, 7739, 7875)}
TRAIN_PER_CLASS, NUM_VAL, NUM_TEST = 20, 500, 1000


@dataclasses.dataclass(frozen=True)
class Split:
    """Disjoint node indices (int64): ``train``, ``val``, ``test``."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def grown_regions(A: scipy.sparse.csr_matrix, sizes, seed: int) -> np.ndarray:
    """Each node's class (int64): regions grown breadth-first on the symmetric ``A`` toward
    the target ``sizes`` (one per class), as the module docstring says."""
    targets = np.asarray(sizes, np.float64)
    classes, n = len(targets), A.shape[0]
    _, component = scipy.sparse.csgraph.connected_components(A, directed=False)
    component_sizes = np.bincount(component)
    largest = int(np.argmax(component_sizes))
    seeds = np.random.default_rng([seed, 4]).choice(np.flatnonzero(component == largest),
                                                    classes, replace=False)
    owner = np.full(n, -1, np.int64)
    claimed = np.zeros(classes)
    frontiers = [collections.deque([int(s)]) for s in seeds]
    while True:
        growing = [c for c in range(classes) if frontiers[c]]
        if not growing:
            break
        c = min(growing, key=lambda c: claimed[c] / targets[c])
        v = frontiers[c].popleft()
        if owner[v] >= 0:
            continue
        owner[v] = c
        claimed[c] += 1
        neighbours = A.indices[A.indptr[v]:A.indptr[v + 1]]
        frontiers[c].extend(neighbours[owner[neighbours] < 0].tolist())
    for other in np.argsort(-component_sizes, kind="stable"):
        if other != largest:
            c = int(np.argmin(claimed / targets))
            owner[component == other] = c
            claimed[c] += component_sizes[other]
    return owner


@dataclasses.dataclass(frozen=True)
class BagOfWords:
    """How ``class_features`` draws a node's words (see the module docstring)."""

    words: int
    vocabulary: int
    topical: float


BAGS = {"cora": BagOfWords(words=18, vocabulary=100, topical=0.27),
        "pubmed": BagOfWords(words=50, vocabulary=50, topical=0.15)}


def class_features(labels: np.ndarray, width: int, bag: BagOfWords, seed: int) -> np.ndarray:
    """Each node's bag of ``bag.words`` words among ``width``, drawn from its class's topic
    with probability ``bag.topical``, as a row-normalised indicator (float32, ``(n, width)``)."""
    rng = np.random.default_rng([seed, 5])
    n = len(labels)
    topics = np.stack([rng.choice(width, bag.vocabulary, replace=False)
                       for _ in range(labels.max() + 1)])
    from_topic = topics[labels[:, None], rng.integers(0, bag.vocabulary, (n, bag.words))]
    anywhere = rng.integers(0, width, (n, bag.words))
    words = np.where(rng.random((n, bag.words)) < bag.topical, from_topic, anywhere)
    features = np.zeros((n, width), np.float32)
    np.put_along_axis(features, words, 1.0, axis=1)
    return features / features.sum(1, keepdims=True)


def planetoid_split(labels: np.ndarray, classes: int, seed: int) -> Split:
    """``TRAIN_PER_CLASS`` training nodes of each class, then ``NUM_VAL`` validation and
    ``NUM_TEST`` test nodes among the rest, all in the order of one seeded permutation."""
    order = np.random.default_rng([seed, 6]).permutation(len(labels))
    train = np.concatenate([order[labels[order] == c][:TRAIN_PER_CLASS]
                            for c in range(classes)])
    rest = order[~np.isin(order, train)]
    return Split(np.sort(train), np.sort(rest[:NUM_VAL]),
                 np.sort(rest[NUM_VAL:NUM_VAL + NUM_TEST]))


def community_task(label: str, A: scipy.sparse.csr_matrix, self_loops: bool,
                   seed: int = tasks.SEED) -> tuple:
    """``(task, split)`` on graph ``label`` (``A`` symmetric and loop-free, as ``tasks.load``
    gives it; the task on ``A + I`` if ``self_loops``): ``tasks.seeded_task``'s task with the
    grown classes and bag-of-words features in place of the uniform ones."""
    width, classes = tasks.DATASETS[label]
    labels = grown_regions(A, CLASS_SIZES[label], seed)
    task = dataclasses.replace(tasks.seeded_task(label, A, width, classes, self_loops, seed),
                               features=class_features(labels, width, BAGS[label], seed),
                               labels=labels)
    return task, planetoid_split(labels, classes, seed)
