"""The GNN training benchmark's pieces; ``benchmarks/gnn.py`` is its entry point.

- ``tasks``: the graphs, and the seeded features, labels and relations on them;
- ``models``: the four models, their canonical initial weights, one network class;
- ``frameworks``: how sparsetir.nn, DGL and PyG hold the graph and make each layer;
- ``worker``: one contender training one model on one graph, in a process of its own
  (``python -m gnn_training.worker``, run from ``benchmarks/``);
- ``sparse_time``: the share of an epoch spent in sparse operators, from ``torch.profiler``;
- ``results``: the loss check, the derived columns, the table, CSV, JSON and chart;
- ``communities`` and ``accuracy``: the task with learnable classes on cora and pubmed, and
  the float32 against bfloat16 accuracy runs of ``benchmarks/gnn_accuracy.py``.

The modules are imported as ``gnn_training.<name>`` with ``benchmarks/`` on ``sys.path``
(never with this folder on it), so none of them shadows a module of the standard library or
of ``benchmarks/``.

Example
-------
>>> from gnn_training import models, tasks
>>> models.MODELS["gcn"].dims(1433, 7)
[(1433, 16), (16, 7)]
"""
