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
>>> import numpy as np, scipy.sparse
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> parts = partition(A, 2, "contiguous")             # or "metis"
>>> save(parts, "graph-2")
PosixPath('graph-2/partition.json')
>>> [load("graph-2", r).owned.tolist() for r in range(2)]
[[0, 1, 2, 3], [4, 5]]

On rank ``r`` of a 2-process run (``launch.run``), ``DM = DistSparseMatrix(load("graph-2", r))``
and ``Y_local = dist_spmm(DM, X[DM.part.owned])``; a one-process group runs the same calls:

>>> import os, tempfile, torch, torch.distributed as dist
>>> store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
>>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)
>>> save(partition(A, 1), "graph-1")
PosixPath('graph-1/partition.json')
>>> DM = DistSparseMatrix(load("graph-1", 0))
>>> X = torch.rand(6, 16)
>>> Y_local = dist_spmm(DM, X[DM.part.owned])
>>> np.allclose(Y_local.numpy(), A @ X[DM.part.owned].numpy())
True
>>> dist.destroy_process_group()
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
