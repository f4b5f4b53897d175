"""``RelGraphConv``'s messages while torch traces it (``torch.compile``, ``torch.export``):
over the dense (source, relation) slots of ``edge_groups``, made when the graph runs.

Each source ``u`` has a slot per relation ``r``, ``u * num_rels + r``, holding ``x_u W_r``: all
of them are one dense product (``TypedLinear.every_type``). An edge ``u -> v`` of relation ``r``
is then an entry at ``(v, u * num_rels + r)`` of a ``num_dst x (num_src * num_rels)`` matrix
with ``M``'s ``indptr``, and the messages are one ``gspmm`` over it (``copy_u_sum``, or
``u_mul_e_sum`` with ``norm``), whose registered backward gives the gradients of the slots
(so of ``feat`` and the weights) and of ``norm``. Its column indices are made from ``etypes``
by the operator ``torch.ops.sparsetir.relation_slots`` (``(indptr, indices, etypes, num_src,
num_rels) -> (slots, order)``), which reads the values of ``etypes`` only when the graph runs,
refusing relations out of range by name. ``order`` is the edge of ``M`` behind each entry:
the identity, unless ``M`` holds parallel edges (a column repeated in a row), whose slots are
sorted within their row. The slot matrix is made once per matrix and relations (kept while
``M`` lives, the last ``etypes`` compared by value at each call: ``O(nnz)``), and the
``gspmm`` operator finds it behind the fresh tensors ``relation_slots`` returns
(``custom_ops.remember_matrix``), with its bound kernels and transpose.

This needs no grouping of ``etypes`` by value, which a traced function cannot do, and runs the
eager layer's dense layout; ``dense_slots_fit`` says when it is taken: while the slots are at
most ``edge_groups.DENSE_FACTOR`` times as many as the edges (otherwise the traced layer runs
per edge, DGL's ``gather_mm`` formulation) and their indices fit in int32.

Example
-------
>>> import torch
>>> indptr = torch.tensor([0, 2, 4], dtype=torch.int32)       # row 1: two edges from 1
>>> indices = torch.tensor([0, 2, 1, 1], dtype=torch.int32)
>>> slots, order = torch.ops.sparsetir.relation_slots(indptr, indices,
...                                                   torch.tensor([1, 0, 1, 0]), 3, 2)
>>> slots.tolist(), order.tolist()
([1, 4, 2, 3], [0, 1, 3, 2])
"""

from __future__ import annotations

import weakref

import numpy as np
import torch
from torch import Tensor

from ..errors import SparseTIRTypeError
from ..ops import SparseMatrix
from ..ops.cpu_dispatch import custom_operator
from ..ops.custom_ops import matrix_of, remember_matrix
from ..ops.dtypes import autocast_result
from ..ops.graph_tensors import graph_tensors
from .edge_groups import DENSE_FACTOR, checked_etypes

_INT32_LIMIT = 2 ** 31


def dense_slots_fit(num_src: int, num_rels: int, nnz: int) -> bool:
    """Whether the traced layer takes the dense slots (see the module docstring)."""
    slots = num_src * num_rels
    return slots < _INT32_LIMIT and slots <= DENSE_FACTOR * max(nnz, 1)


def slot_messages(linear, M, feat: Tensor, etypes, norm) -> Tensor:
    """``(num_dst, out_size)``: per destination, the sum over its in-edges ``(u, v)`` of
    relation ``r`` of ``norm_uv x_u W_r`` (``linear``: the layer's ``TypedLinear``), over the
    dense slots (see the module docstring); ``norm`` (nnz,) or (nnz, 1) or None."""
    etypes = torch.as_tensor(etypes)
    _check_integers(etypes)
    arrays = graph_tensors(M)
    slots, order = torch.ops.sparsetir.relation_slots(arrays.indptr, arrays.indices, etypes,
                                                      M.shape[1], linear.num_types)
    x = linear.every_type(feat)
    rhs = None if norm is None else norm.reshape(-1, 1).index_select(0, order)
    return torch.ops.sparsetir.gspmm(arrays.indptr, slots, "copy_lhs" if rhs is None else "mul",
                                     "sum", x, rhs, autocast_result(x, rhs))[0]


@custom_operator("sparsetir::relation_slots")
def relation_slots(indptr: Tensor, indices: Tensor, etypes: Tensor, num_src: int,
                   num_rels: int) -> tuple[Tensor, Tensor]:
    """``(slots, order)`` (int32, int64) of a CSR matrix (``indptr``, ``indices``, ``num_src``
    columns) whose entries have the relations ``etypes`` (see the module docstring): fresh
    tensors at each call, which ``custom_ops.matrix_of`` leads to the slot matrix kept for
    these relations."""
    M = matrix_of(indptr, indices, num_src)
    types = checked_etypes(etypes, M.nnz, num_rels)
    slots, order, matrix = _slot_matrix(M, types, num_rels)
    slots = torch.from_numpy(slots.astype(np.int32))
    remember_matrix(indptr, slots, matrix.shape[1], matrix)
    return slots, torch.from_numpy(order.copy())


_KEPT = weakref.WeakKeyDictionary()
"""SparseMatrix -> {num_rels: (edge types, slots, order, slot matrix)}: the last of each."""


def _slot_matrix(M: SparseMatrix, types: np.ndarray, num_rels: int) -> tuple:
    """``(slots, order, slot matrix)`` of ``M`` under ``types``, made once while the types
    stay the same."""
    kept = _KEPT.setdefault(M, {})
    if num_rels in kept and np.array_equal(kept[num_rels][0], types):
        return kept[num_rels][1:]
    slots = M.indices.astype(np.int64) * num_rels + types
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    if ((np.diff(slots) < 0) & (np.diff(rows) == 0)).any():   # parallel edges
        order = np.lexsort((slots, rows))
        slots = slots[order]
    else:
        order = np.arange(slots.size)
    matrix = SparseMatrix.from_csr(M.indptr, slots, np.ones(slots.size, np.float32),
                                   (M.shape[0], M.shape[1] * num_rels))
    kept[num_rels] = (types, slots, order, matrix)
    return slots, order, matrix


def _check_integers(etypes: Tensor) -> None:
    """Refuse ``etypes`` by name unless of an integer dtype (known while torch traces)."""
    if etypes.is_floating_point() or etypes.is_complex() or etypes.dtype == torch.bool:
        raise SparseTIRTypeError(f"etypes must hold integers, got {etypes.dtype}")


@relation_slots.register_fake
def _(indptr, indices, etypes, num_src, num_rels):
    _check_integers(etypes)
    return torch.empty_like(indices), indices.new_empty(indices.shape, dtype=torch.int64)
