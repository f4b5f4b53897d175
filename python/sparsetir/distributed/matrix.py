"""``DistSparseMatrix``: one rank's part of a partitioned matrix, ready for the distributed
operators and as the graph of ``sparsetir.nn``'s layers.

Every rank makes its own from its part, at the same point of the program (making one
exchanges the halo's counts and row ids with the other ranks). The rank's node features
``X_local`` are the rows of the nodes it owns (``part.owned``, in that order); results of
``dist_spmm`` are those rows too, and ``dist_sddmm`` gives one value per local edge, in the
part's local edge order (``part.global_edges`` maps them to the global CSR order).

To the layers, the matrix is the graph of the local nodes: ``shape`` is ``(num_owned,
num_owned)`` (feature rows in, result rows out), ``nnz`` the local edges, ``in_degrees()`` and
``out_degrees()`` the owned nodes' degrees in the whole graph, and ``gspmm``, ``gsddmm`` and
``edge_softmax`` the operators the layers call through ``sparsetir.ops`` (``aggregate.py``);
``local_graph()`` is the rank's destinations with all their sources as one ``SparseMatrix``
(``local_graph.py``).

Example
-------
``sparsetir.distributed.launch.run`` makes the process group of every rank; here one process:

>>> import os, tempfile
>>> import scipy.sparse, torch.distributed as dist
>>> from sparsetir.distributed import dist_spmm, load, partition, save
>>> store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
>>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> folder, rank = "graph-1", 0
>>> save(partition(A, 1), folder)
PosixPath('graph-1/partition.json')
>>> DM = DistSparseMatrix(load(folder, rank))
>>> DM.shape, DM.nnz == A.nnz
((6, 6), True)
>>> X = torch.rand(6, 16)
>>> Y_local = dist_spmm(DM, X[DM.part.owned])
>>> np.allclose(Y_local.numpy(), A @ X[DM.part.owned].numpy())
True
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
import torch.distributed as dist

from .. import ops
from ..ops.graph_tensors import GraphTensors
from ..errors import SparseTIRTypeError, SparseTIRValueError
from . import collective
from .exchange import STRATEGIES, check_strategy
from .part import Part


class DistSparseMatrix:
    """This rank's part (see the module docstring).

    Parameters
    ----------
    part : Part
        This rank's part (``partition(...)[rank]`` or ``load(folder, rank)``); the process
        group must have ``part.num_parts`` ranks and this process rank ``part.rank``.
    values : torch.Tensor or None
        One value per local edge (float, ``(part.nnz,)``) to multiply by instead of the stored
        ones; when it requires grad, ``dist_spmm`` gives it its gradient (computed locally).
    strategy : {"halo", "broadcast"}
        The exchange the operators use unless told otherwise (``sparsetir.nn`` layers use it).
    """

    is_distributed = True
    multiplicity = None          # one stored entry per edge, as sparsetir.nn requires

    def __init__(self, part: Part, values=None, strategy: str = "halo"):
        if not isinstance(part, Part):
            raise SparseTIRTypeError(f"part must be a sparsetir.distributed.Part, got "
                                     f"{type(part).__name__}")
        check_strategy(strategy)
        if not dist.is_initialized():
            raise SparseTIRValueError("DistSparseMatrix needs torch.distributed initialised "
                                      "(init_process_group) on every rank first")
        if dist.get_world_size() != part.num_parts or dist.get_rank() != part.rank:
            raise SparseTIRValueError(
                f"this process is rank {dist.get_rank()} of {dist.get_world_size()}, but part "
                f"is part {part.rank} of {part.num_parts}: load(folder, rank) with this rank")
        if values is not None:
            if not torch.is_tensor(values) or tuple(values.shape) != (part.nnz,):
                raise SparseTIRValueError(
                    f"values must be a torch tensor of shape ({part.nnz},), one per local "
                    f"edge, got {getattr(values, 'shape', type(values).__name__)}")
            if str(values.dtype) != f"torch.{part.blocks[0].data.dtype}":
                raise SparseTIRTypeError(f"values are {values.dtype} and the part's entries "
                                         f"{part.blocks[0].data.dtype}: nothing is cast, pass "
                                         "one dtype")
        check_parts_agree(part)         # a collective: every rank makes its matrix here
        self.part, self.values, self.strategy = part, values, strategy
        self.shape = (part.num_owned, part.num_owned)
        self.nnz = part.nnz
        self.offsets = part.block_offsets()
        self.blocks = [ops.SparseMatrix.from_csr(b.indptr, b.indices, b.data,
                                                 (part.num_owned, b.num_cols))
                       for b in part.blocks]
        self.halo_blocks = [self.blocks[q] if q == part.rank else _compacted(b, part.halo(q))
                            for q, b in enumerate(part.blocks)]
        in_degrees = part.in_degrees()
        # what the layers read of a graph through ops.graph_tensors: the owned nodes' degrees
        self._graph_tensors = GraphTensors(
            indptr=None, indices=None, data=None, values=values,
            in_degrees=torch.from_numpy(in_degrees),
            out_degrees=torch.from_numpy(part.out_degrees), has_empty_rows=bool(
                (in_degrees == 0).any()))
        self._exchanges, self._local_graphs = {}, {}
        self.exchange("halo")           # a collective: made here, where every rank is

    def exchange(self, strategy: str):
        """The exchange for ``strategy`` (made once per matrix)."""
        check_strategy(strategy)
        if strategy not in self._exchanges:
            self._exchanges[strategy] = STRATEGIES[strategy](self.part)
        return self._exchanges[strategy]

    def block(self, q: int, strategy: str) -> ops.SparseMatrix:
        """Block ``q`` with its columns numbered as ``strategy``'s ``gather`` delivers the rows:
        all of rank ``q``'s (broadcast) or its halo rows only (halo)."""
        return (self.blocks if strategy == "broadcast" else self.halo_blocks)[q]

    def bytes_sent(self) -> dict:
        """Bytes this rank has sent so far, per strategy."""
        return {name: exchange.bytes_sent for name, exchange in self._exchanges.items()}

    def in_degrees(self) -> np.ndarray:
        """Each owned node's in-edges (its row's entries), int64."""
        return self.part.in_degrees()

    def out_degrees(self) -> np.ndarray:
        """Each owned node's out-edges in the whole graph (its column's entries), int64."""
        return self.part.out_degrees

    def local_graph(self, strategy: str | None = None):
        """This rank's ``LocalGraph`` for ``strategy`` (default: ``self.strategy``), made once."""
        strategy = self.strategy if strategy is None else strategy
        check_strategy(strategy)
        if strategy not in self._local_graphs:
            from .local_graph import LocalGraph  # pylint: disable=import-outside-toplevel
            self._local_graphs[strategy] = LocalGraph(self, strategy)
        return self._local_graphs[strategy]

    def gspmm(self, op: str, reduce_op: str, lhs_data, rhs_data):
        """``sparsetir.ops.gspmm`` on this matrix: this rank's rows (``aggregate.dist_gspmm``)."""
        from .aggregate import dist_gspmm  # pylint: disable=import-outside-toplevel
        return dist_gspmm(self, op, reduce_op, lhs_data, rhs_data)

    def gsddmm(self, op: str, lhs_data, rhs_data, lhs_target: str = "u", rhs_target: str = "v"):
        """``sparsetir.ops.gsddmm`` on this matrix: one row per local edge
        (``aggregate.dist_gsddmm``)."""
        from .aggregate import dist_gsddmm  # pylint: disable=import-outside-toplevel
        return dist_gsddmm(self, op, lhs_data, rhs_data, lhs_target, rhs_target)

    def edge_softmax(self, logits, eids=None, norm_by: str = "dst"):
        """``sparsetir.ops.edge_softmax`` on this matrix, over each owned destination's
        in-edges (``aggregate.dist_edge_softmax``)."""
        from .aggregate import dist_edge_softmax  # pylint: disable=import-outside-toplevel
        return dist_edge_softmax(self, logits, eids, norm_by)

    def __repr__(self):
        return (f"DistSparseMatrix(rank={self.part.rank} of {self.part.num_parts}, "
                f"rows={self.part.num_owned}, nnz={self.nnz}, strategy={self.strategy!r})")


def check_parts_agree(part: Part) -> None:
    """Refuse, on every rank, parts that are not the parts of one partition: another
    ``partition_id`` (another matrix, method or part count), sizes or dtype, or a block whose
    column count is not the rows its rank owns. Without this, ranks holding parts of two
    partitions computed wrong rows without an error."""
    dtype = str(part.blocks[0].data.dtype) if part.blocks else ""
    summary = [part.num_parts, part.num_nodes, part.nnz_total, part.num_owned, part.nnz,
               *np.frombuffer(hashlib.sha256(f"{part.partition_id}/{dtype}".encode())
                              .digest()[:16], np.int64).tolist(),
               *[block.num_cols for block in part.blocks]]
    rows = collective.all_gather(summary, "the parts' sizes").tolist()
    problem = None
    if any(row[:3] + row[5:7] != rows[0][:3] + rows[0][5:7] for row in rows):
        problem = ("their partition_id, dtype, part count, node count or entry count differ "
                   "(rank: [num_parts, num_nodes, nnz_total]) " + ", ".join(
                       f"{r}: {row[:3]}" for r, row in enumerate(rows)))
    elif [row[7 + q] for row in rows for q in range(len(rows))] != \
            [rows[q][3] for _ in rows for q in range(len(rows))]:
        problem = ("a block's columns are not the rows its rank owns (owned rows per rank "
                   f"{[row[3] for row in rows]}, block columns per rank "
                   f"{[row[7:] for row in rows]})")
    elif sum(row[3] for row in rows) != rows[0][1] or sum(row[4] for row in rows) != rows[0][2]:
        problem = (f"their owned rows ({[row[3] for row in rows]}) and edges "
                   f"({[row[4] for row in rows]}) do not add up to the matrix's {rows[0][1]} "
                   f"nodes and {rows[0][2]} entries")
    if problem:
        raise SparseTIRValueError(f"rank {part.rank}: the ranks' parts are not the parts of "
                                  f"one partition: {problem}; load every rank's part from the "
                                  "same folder (or the same partition() call)")


def _compacted(block, halo: np.ndarray) -> ops.SparseMatrix:
    """``block`` with its columns renumbered into ``halo`` (the rows the exchange delivers)."""
    columns = np.searchsorted(halo, block.indices).astype(np.int32)
    return ops.SparseMatrix.from_csr(block.indptr, columns, block.data,
                                     (block.indptr.size - 1, halo.size))
