"""``TypedLinear``: a linear map chosen per row by the row's type, with DGL's regularizers and
parameter names.

Row ``i`` of ``x`` is multiplied by ``W[x_type[i]]``. ``W`` holds one ``(in_size, out_size)``
matrix per type (``regularizer=None``), or ``num_bases`` of them mixed per type by ``coeff``
(``"basis"``), or per type a block-diagonal matrix of ``num_bases`` blocks (``"bdd"``, ``W`` of
shape ``(num_types, in_size * out_size / num_bases)``). The per-row products run in
``gather_mm`` / ``segment_mm`` (``sparsetir.ops``); ``every_type`` and ``sum_over_types``
run one dense product over every type instead (``RelGraphConv`` uses both).

Example
-------
>>> import torch
>>> from sparsetir.nn import TypedLinear
>>> layer = TypedLinear(4, 6, num_types=3, regularizer="basis", num_bases=2)
>>> x, x_type = torch.randn(5, 4), torch.tensor([0, 0, 1, 2, 2])
>>> y = layer(x, x_type, sorted_by_type=True)
>>> torch.allclose(y[2], x[2] @ layer.get_weight()[1], atol=1e-6)
True
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ops import gather_mm, segment_mm
from ..ops.graph_tensors import tracing

_REGULARIZERS = (None, "basis", "bdd")


class TypedLinear(nn.Module):
    """A linear map per type (see the module docstring).

    Parameters
    ----------
    in_size, out_size, num_types : int
    regularizer : {None, "basis", "bdd"}
    num_bases : int
        Needed by ``"basis"`` (how many matrices are mixed) and ``"bdd"`` (how many diagonal
        blocks: it must divide ``in_size`` and ``out_size``).
    """

    def __init__(self, in_size, out_size, num_types, regularizer=None, num_bases=None):
        super().__init__()
        if regularizer not in _REGULARIZERS:
            raise SparseTIRValueError(f"regularizer must be one of {_REGULARIZERS}, got "
                                      f"{regularizer!r}")
        if regularizer is not None and num_bases is None:
            raise SparseTIRValueError(f"num_bases is needed by the {regularizer!r} regularizer")
        self.in_size, self.out_size, self.num_types = in_size, out_size, num_types
        self.regularizer = regularizer
        if regularizer is None:
            self.W = nn.Parameter(torch.empty(num_types, in_size, out_size))
        elif regularizer == "basis":
            self.num_bases = num_bases
            self.W = nn.Parameter(torch.empty(num_bases, in_size, out_size))
            self.coeff = nn.Parameter(torch.empty(num_types, num_bases))
        else:
            if in_size % num_bases or out_size % num_bases:
                raise SparseTIRValueError(
                    f"the bdd regularizer splits in_size ({in_size}) and out_size ({out_size}) "
                    f"into num_bases ({num_bases}) blocks: both must be multiples of it")
            self.num_bases = num_bases
            self.submat_in, self.submat_out = in_size // num_bases, out_size // num_bases
            self.W = nn.Parameter(torch.empty(
                num_types, num_bases * self.submat_in * self.submat_out))
        self.reset_parameters()

    def reset_parameters(self):
        """``W`` uniform in ``±1/sqrt(fan_in)`` (as ``nn.Linear``), ``coeff`` Glorot-uniform."""
        fan_in = self.submat_in if self.regularizer == "bdd" else self.in_size
        with torch.no_grad():
            nn.init.uniform_(self.W, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
            if self.regularizer == "basis":
                nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))

    def get_weight(self):
        """The per-type weights: ``(num_types, in_size, out_size)``, or ``W`` itself for
        ``"bdd"`` (its blocks, flattened)."""
        if self.regularizer == "basis":
            mixed = self.coeff @ self.W.view(self.num_bases, -1)
            return mixed.view(self.num_types, self.in_size, self.out_size)
        return self.W

    def forward(self, x, x_type, sorted_by_type=False):
        """``(n, out_size)`` from ``x`` ``(n, in_size)`` and ``x_type`` ``(n,)`` (integers
        below ``num_types``); ``sorted_by_type`` says ``x_type`` is non-decreasing (checked),
        which lets each type's rows go through one matrix product."""
        x_type = self._checked_types(x, x_type, sorted_by_type)
        weight = self.get_weight()
        if self.regularizer == "bdd":          # each row block meets its type's block
            blocks = self.num_bases
            block_type = (x_type.unsqueeze(1) * blocks + torch.arange(blocks)).reshape(-1)
            rows = gather_mm(x.reshape(-1, self.submat_in),
                             weight.view(-1, self.submat_in, self.submat_out), block_type)
            return rows.view(-1, self.out_size)
        if sorted_by_type:
            return segment_mm(x, weight, torch.bincount(x_type, minlength=self.num_types))
        return gather_mm(x, weight, x_type)

    def every_type(self, x):
        """``(n * num_types, out_size)``: row ``i * num_types + r`` is ``x[i] @ W_r``, for ``x``
        of shape ``(n, in_size)`` (one dense product)."""
        weight, types = self.get_weight(), self.num_types
        if self.regularizer == "bdd":
            blocks = x.reshape(x.shape[0], self.num_bases, self.submat_in)
            out = torch.einsum("nbi,rbio->nrbo", blocks, weight.view(
                types, self.num_bases, self.submat_in, self.submat_out))
            return out.reshape(-1, self.out_size)
        stacked = weight.permute(1, 0, 2).reshape(self.in_size, types * self.out_size)
        return (x @ stacked).view(-1, self.out_size)

    def sum_over_types(self, z):
        """``(n, out_size)``: row ``i`` is the sum over ``r`` of ``z[i * num_types + r] @ W_r``,
        for ``z`` of shape ``(n * num_types, in_size)`` (one dense product)."""
        weight, types = self.get_weight(), self.num_types
        if self.regularizer == "bdd":
            blocks = z.reshape(-1, types, self.num_bases, self.submat_in)
            out = torch.einsum("nrbi,rbio->nbo", blocks, weight.view(
                types, self.num_bases, self.submat_in, self.submat_out))
            return out.reshape(-1, self.out_size)
        return z.reshape(-1, types * self.in_size) @ weight.reshape(types * self.in_size, -1)

    def _checked_types(self, x, x_type, sorted_by_type):
        """``x_type`` as an int64 tensor, refused by name unless it gives one type in range per
        row of ``x`` (sorted where claimed)."""
        x_type = torch.as_tensor(x_type)
        if x_type.is_floating_point() or x_type.is_complex() or x_type.dtype == torch.bool:
            raise SparseTIRTypeError(f"x_type must hold integers, got {x_type.dtype}")
        if x_type.dim() != 1 or x.dim() != 2 or x_type.shape[0] != x.shape[0] \
                or x.shape[1] != self.in_size:
            raise SparseTIRValueError(
                f"x {tuple(x.shape)} and x_type {tuple(x_type.shape)} must be (n, {self.in_size}) "
                "and (n,)")
        x_type = x_type.to(torch.int64)
        if tracing():       # values unknown while traced: the typed products check them
            return x_type
        if x_type.numel() and (x_type.min() < 0 or x_type.max() >= self.num_types):
            raise SparseTIRValueError(f"x_type holds types outside [0, {self.num_types}): "
                                      f"{x_type.min().item()}..{x_type.max().item()}")
        if sorted_by_type and bool((x_type[1:] < x_type[:-1]).any()):
            raise SparseTIRValueError("sorted_by_type=True, but x_type is not non-decreasing")
        return x_type

    def extra_repr(self):
        extra = f", regularizer={self.regularizer}, num_bases={self.num_bases}" \
            if self.regularizer else ""
        return (f"in_size={self.in_size}, out_size={self.out_size}, "
                f"num_types={self.num_types}{extra}")
