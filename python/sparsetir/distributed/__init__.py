"""Sparse operators and GNN layers over a graph partitioned across processes
(``torch.distributed``: gloo on CPU), with autograd; every local product is a compiled
``sparsetir.ops`` kernel.

* ``partition(A, num_parts, method="contiguous" | "metis")`` -> a ``Part`` per rank
  (``partition.py``, ``part.py``); ``save(parts, folder)`` / ``load(folder, rank)``
  (``storage.py``);
* ``DistSparseMatrix(part)`` on each rank (``matrix.py``);
* ``dist_spmm(DM, X_local, strategy="halo" | "broadcast")`` and ``dist_sddmm(DM, X_local,
  Y_local, strategy=...)`` (``spmm.py``, ``sddmm.py``) over the exchanges of ``exchange.py``;
* ``sparsetir.ops``' ``gspmm``, ``gsddmm`` and ``edge_softmax`` hand a ``DistSparseMatrix`` to
  ``aggregate.py``, so ``sparsetir.nn``'s layers take one as their graph; what needs all of a
  destination's in-edges runs on the rank's local graph (``local_graph.py``);
* ``launch.run(fn, world_size)`` starts ranks on this machine with every wait bounded.

See ``docs/distributed.md``.

Example
-------
>>> # parts = partition(A, 2, "metis"); save(parts, "graph-2")
>>> # on rank r:  DM = DistSparseMatrix(load("graph-2", r))
>>> #             Y_local = dist_spmm(DM, X[DM.part.owned])
"""

from .launch import run
from .matrix import DistSparseMatrix
from .part import Block, Part
from .partition import partition
from .sddmm import dist_sddmm
from .spmm import dist_spmm
from .storage import load, save

__all__ = ["Block", "DistSparseMatrix", "Part", "dist_sddmm", "dist_spmm", "load",
           "partition", "run", "save"]
