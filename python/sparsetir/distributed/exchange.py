"""How a rank gets the rows of X its blocks multiply, and returns the gradients of those rows.

Two strategies, one interface:

* ``gather(X_local)`` yields ``(q, X_q)`` for every rank ``q``: the rows block ``q`` multiplies
  (``X_local`` itself for ``q`` = this rank);
* ``scatter_add(product)`` is its transpose: ``product(q)`` gives block ``q``'s contribution to
  the rows of rank ``q`` (the transposed block times a gradient), and the result is the sum, over
  all ranks, of the contributions to this rank's rows.

``BroadcastExchange`` is CAGNET's 1D algorithm: stage ``q`` broadcasts all of rank ``q``'s rows
(and its transpose sums each stage's contributions onto rank ``q``). ``HaloExchange`` sends only
the rows each rank's entries reference (its halo) with one ``all_to_all_single``, started before
the local block is computed and waited for after; the counts and row ids are exchanged once,
when it is made. ``bytes_sent`` counts the bytes of this rank's rows sent, once per rank that
receives them (a broadcast of ``b`` bytes to ``P - 1`` ranks counts ``b (P - 1)``, whatever
tree the backend uses), ``seconds`` the time this rank spent in or waiting for the
collectives.

The ranks must pass rows of one shape past the first dimension and dtype. The halo exchange
sends them as bytes, each rank's piece closed by a trailer giving its rows' shape and dtype, so
the ranks agree in the exchange itself (``row_agreement``): an explicit ``all_reduce``
(``explicit_checks`` counts them) precedes only an exchange whose format the ranks' shared
history does not predict (the first calls, and those after a change). The broadcast exchange
checks explicitly at every call: it sends the caller's rows as they are, and a trailer would
cost a copy of all of them.

Example
-------
>>> import os, tempfile
>>> import numpy as np, scipy.sparse, torch, torch.distributed as dist
>>> from sparsetir.distributed import DistSparseMatrix, partition
>>> store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
>>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)    # one rank: all of A
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> DM = DistSparseMatrix(partition(A, 1)[0])
>>> X_local = torch.rand(6, 16)[torch.from_numpy(np.asarray(DM.part.owned))]
>>> import sparsetir
>>> exchange = DM.exchange("broadcast")
>>> Y = torch.zeros(6, 16)
>>> for q, X_q in exchange.gather(X_local):
...     Y += sparsetir.ops.spmm(DM.block(q, "broadcast"), X_q)
>>> np.allclose(Y.numpy(), A @ X_local.numpy(), atol=1e-5)
True
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from ..errors import SparseTIRValueError
from . import collective
from .row_agreement import (TRAILER_BYTES, RowAgreement, decode, row_bytes, row_format,
                            trailer)


class Counted:
    """``bytes_sent``, ``seconds`` (see the module docstring) and ``explicit_checks``."""

    bytes_sent = 0
    seconds = 0.0
    explicit_checks = 0

    @contextmanager
    def timed(self):
        """Add the body's time to ``seconds``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start

    def check_rows_agree(self, X_local: torch.Tensor) -> None:
        """``check_rows_agree``, counted."""
        check_rows_agree(X_local)
        self.explicit_checks += 1


class BroadcastExchange(Counted):
    """CAGNET's broadcast per stage (see the module docstring)."""

    kind = "broadcast"

    def __init__(self, part):
        self.rank = part.rank
        self.sizes = [block.num_cols for block in part.blocks]

    def gather(self, X_local: torch.Tensor):
        self.check_rows_agree(X_local)   # a trailer would cost a copy of every local row
        for q, rows in enumerate(self.sizes):
            if q == self.rank:
                buffer = X_local.contiguous()
                self.bytes_sent += buffer.numel() * buffer.element_size() * (len(self.sizes) - 1)
            else:
                buffer = X_local.new_empty((rows,) + tuple(X_local.shape[1:]))
            with self.timed():
                collective.broadcast(buffer, q, "rows of X")
            yield q, buffer

    def scatter_add(self, product) -> torch.Tensor:
        result = None
        for q in range(len(self.sizes)):
            contribution = product(q).contiguous()
            if q != self.rank:
                self.bytes_sent += contribution.numel() * contribution.element_size()
            with self.timed():
                collective.reduce_sum(contribution, q, "row gradients")
            if q == self.rank:
                result = contribution
        return result


class HaloExchange(Counted):
    """Halo rows through ``all_to_all_single`` (see the module docstring). Making one is a
    collective: every rank makes its own at the same point."""

    kind = "halo"

    def __init__(self, part):
        self.rank = part.rank
        self.agreement = RowAgreement()
        self._kept = torch.empty(0, dtype=torch.uint8)   # the send buffer, between exchanges
        self._unsettled = None                            # (pending, expected, sizes)
        halos = [part.halo(q) if q != part.rank else np.zeros(0, np.int64)
                 for q in range(part.num_parts)]
        self.recv_counts = [int(h.size) for h in halos]
        counts = collective.all_to_all(torch.tensor(self.recv_counts, dtype=torch.int64),
                                       [1] * part.num_parts, [1] * part.num_parts,
                                       "halo counts").wait()
        self.send_counts = [int(c) for c in counts]
        wanted = torch.from_numpy(np.concatenate(halos).astype(np.int64))
        self.send_rows = collective.all_to_all(wanted, self.recv_counts,
                                               self.send_counts, "halo row ids").wait()

    def gather(self, X_local: torch.Tensor):
        self._settle_abandoned()
        yield from self._gather(X_local, self._expected_format(X_local))

    def _expected_format(self, X_local: torch.Tensor) -> tuple:
        """The rows' format the exchange is sized for: the one the ranks' history expects, else
        ``X_local``'s after an explicit check that every rank passes rows in it."""
        fmt = self.agreement.expected()
        if fmt is None:
            self.check_rows_agree(X_local)
            fmt = row_format(X_local)
        return fmt

    def _gather(self, X_local: torch.Tensor, expected: tuple):
        mine = row_format(X_local)
        holds, width = mine == expected, row_bytes(expected)
        send_sizes = [piece_bytes(count, width) for count in self.send_counts]
        recv_sizes = [piece_bytes(count, width) for count in self.recv_counts]
        if self._kept.numel() < sum(send_sizes):     # kept: a fresh one costs page faults
            self._kept = torch.empty(sum(send_sizes), dtype=torch.uint8)
        send, closing, start, first_row = self._kept[:sum(send_sizes)], trailer(mine, holds), 0, 0
        for count, size in zip(self.send_counts, send_sizes):
            if holds:
                torch.index_select(X_local.detach(), 0,
                                   self.send_rows[first_row:first_row + count],
                                   out=rows_in(send, start, count, X_local))
            send[start + size - TRAILER_BYTES:start + size] = closing
            start, first_row = start + size, first_row + count
        if holds:
            self.bytes_sent += sum(self.send_counts) * width
        with self.timed():
            self._unsettled = (collective.all_to_all(send, send_sizes, recv_sizes, "halo rows"),
                               expected, recv_sizes)
        if holds:
            yield self.rank, X_local             # computed while the exchange is in flight
        received, again = self._settle()
        if again is not None:
            yield from self._gather(X_local, again)
            return
        starts = np.concatenate([[0], np.cumsum(recv_sizes)])
        for q, count in enumerate(self.recv_counts):
            if q != self.rank:
                yield q, rows_in(received, int(starts[q]), count, X_local)

    def _settle(self) -> tuple:
        """Wait for the exchange in flight and settle its trailers (``RowAgreement.settle``):
        ``(the bytes received, the format to exchange again in or None)``."""
        pending, expected, recv_sizes = self._unsettled
        with self.timed():
            received = pending.wait()
        self._unsettled = None
        ends = np.cumsum(recv_sizes)
        trailers = [decode(received[end - TRAILER_BYTES:end]) for end in ends]
        return received, self.agreement.settle(expected, trailers)

    def _settle_abandoned(self) -> None:
        """Settle an exchange whose ``gather`` was left before it settled (its caller raised
        on the local piece), as the other ranks settled it: else the ranks' histories, and so
        their next buffers, would differ. A disagreement was raised on the ranks that got that
        far; here it is only recorded as not agreed."""
        if self._unsettled is not None:
            try:
                self._settle()
            except SparseTIRValueError:
                pass

    def scatter_add(self, product) -> torch.Tensor:
        remote = [product(q) for q in range(len(self.recv_counts)) if q != self.rank]
        if not remote:
            return product(self.rank).contiguous()
        send = torch.cat(remote)
        self.bytes_sent += send.numel() * send.element_size()
        with self.timed():
            pending = collective.all_to_all(send, self.recv_counts, self.send_counts,
                                            "halo row gradients")
        local = product(self.rank).clone()       # computed while the exchange is in flight
        with self.timed():
            received = pending.wait()
        local.index_add_(0, self.send_rows, received)
        return local


def piece_bytes(count: int, width: int) -> int:
    """The bytes of one rank's piece of the halo exchange: ``count`` rows of ``width`` bytes,
    padded to a cache line (the trailer is read as int64 values, and the next piece's rows
    start on a line), then the trailer."""
    return -(-count * width // PIECE_ALIGN) * PIECE_ALIGN + TRAILER_BYTES


PIECE_ALIGN = 64


def rows_in(buffer: torch.Tensor, start: int, count: int, like: torch.Tensor) -> torch.Tensor:
    """``count`` rows shaped and typed as ``like``'s, the bytes of ``buffer`` from ``start``."""
    width = int(np.prod(like.shape[1:])) * like.element_size()
    piece = buffer[start:start + count * width]
    return piece.view(like.dtype).view((count,) + tuple(like.shape[1:]))


def check_rows_agree(X_local: torch.Tensor) -> None:
    """Refuse, on every rank, rows whose shape past the first dimension or dtype differ
    between the ranks: the exchange would receive rows of another size (gloo aborts the
    process, or leaves part of the buffer unwritten). One small collective."""
    collective.check_agree(list(row_format(X_local)),
                           "the rows' shape past the first dimension and dtype (ndim, "
                           "elements a row, sizes..., CRC-32 of the sizes, itemsize, dtype)")


STRATEGIES = {"broadcast": BroadcastExchange, "halo": HaloExchange}


def check_strategy(strategy) -> None:
    """Refuse, by name, a strategy that is not one of ``STRATEGIES``."""
    if strategy not in STRATEGIES:
        raise SparseTIRValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got "
                                  f"{strategy!r}")
