"""Every collective ``sparsetir.distributed`` runs, each bounded by the process group's timeout
and turned, when it fails, into a ``CommunicationError`` naming this rank, the operation and,
where known, the peer.

``torch.distributed`` bounds a gloo collective by the ``timeout`` given to
``init_process_group`` (``launch.run`` sets one): a peer that died or hangs makes the
collective raise after that time instead of waiting for ever.

Example
-------
``torch.distributed.broadcast(buffer, src=2)`` inside it, when the peer has gone, raises a
``RuntimeError``, which comes out so (no process group here: the rank is ``?``):

>>> with failures_named("broadcast of rows", peer=2):
...     raise RuntimeError("Connection closed by peer")
Traceback (most recent call last):
...
sparsetir.errors.CommunicationError: rank ?: broadcast of rows with rank 2 failed (a peer died, ...): Connection closed by peer
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist

from ..errors import CommunicationError, SparseTIRValueError


@contextmanager
def failures_named(operation: str, peer: int | None = None):
    """Run the body; a failure of the collective in it (``RuntimeError``, which a gloo timeout
    or a closed connection raises) becomes a ``CommunicationError`` saying what and where."""
    try:
        yield
    except RuntimeError as err:
        if isinstance(err, CommunicationError):
            raise
        rank = dist.get_rank() if dist.is_initialized() else "?"
        where = f" with rank {peer}" if peer not in (None, rank) else ""
        raise CommunicationError(
            f"rank {rank}: {operation}{where} failed (a peer died, hangs or left the group; "
            f"collectives time out after the process group's timeout): {err}") from err


def all_gather(values: list, what: str) -> torch.Tensor:
    """Every rank's int64 ``values`` (as many on every rank), one row per rank."""
    mine = torch.tensor(values, dtype=torch.int64)
    rows = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    with failures_named(f"all_gather of {what}"):
        dist.all_gather(rows, mine)
    return torch.stack(rows)


def check_agree(values: list, what: str) -> None:
    """Raise ``SparseTIRValueError`` on every rank (so no rank waits for the others in a later
    collective) unless every rank passed the same int ``values`` (as many on every rank)."""
    both = torch.tensor(list(values) + [-v for v in values], dtype=torch.int64)
    with failures_named(f"all_reduce of {what}"):
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
    highest, lowest = both[:len(values)].tolist(), (-both[len(values):]).tolist()
    if highest != lowest:
        raise SparseTIRValueError(
            f"rank {dist.get_rank()}: the ranks disagree on {what}: this rank has "
            f"{list(values)}, the ranks' lowest are {lowest} and highest {highest}")


def broadcast(buffer: torch.Tensor, src: int, what: str) -> None:
    """``buffer`` on every rank becomes rank ``src``'s."""
    with failures_named(f"broadcast of {what} from rank {src}", peer=src):
        dist.broadcast(buffer, src=src)


def reduce_sum(buffer: torch.Tensor, dst: int, what: str) -> None:
    """Rank ``dst``'s ``buffer`` becomes the sum of every rank's."""
    with failures_named(f"sum of {what} onto rank {dst}", peer=dst):
        dist.reduce(buffer, dst=dst, op=dist.ReduceOp.SUM)


class Pending:
    """An ``all_to_all_single`` in flight; ``wait()`` returns its output."""

    def __init__(self, output: torch.Tensor, work, what: str):
        self.output, self._work, self._what = output, work, what

    def wait(self) -> torch.Tensor:
        with failures_named(self._what):
            if self._work is not None:
                self._work.wait()
        return self.output


def all_to_all(send: torch.Tensor, send_counts: list, recv_counts: list, what: str) -> Pending:
    """Start sending ``send``'s first ``send_counts[0]`` rows to rank 0, the next
    ``send_counts[1]`` to rank 1, ...; receive ``recv_counts[q]`` rows from each rank ``q``,
    in rank order. Runs asynchronously where the backend allows (``async_op=True``)."""
    output = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
    with failures_named(f"all_to_all of {what}"):
        work = dist.all_to_all_single(output, send.contiguous(), output_split_sizes=recv_counts,
                                      input_split_sizes=send_counts, async_op=True)
    return Pending(output, work, f"all_to_all of {what}")
