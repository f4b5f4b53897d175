"""How the ranks of an exchange agree on what its rows look like, most calls without a
collective of their own.

Every rank must send and receive rows of the same shape past the first dimension and dtype
(their *format*): gloo aborts the process, or leaves part of a buffer unwritten, when the sizes
differ. Checking that with one small ``all_reduce`` before every exchange cost a halo
``dist_spmm`` on pubmed about as much as the exchange itself. So the ranks agree in the
exchange instead:

* every rank keeps the same history of the formats its exchange carried (``RowAgreement``);
  when the history repeats with a short period (one layer's width, or two layers' widths in
  turn), the next format is *expected* to continue it, and every rank sizes its buffers for the
  expected format, a decision made from what all ranks know;
* each piece of an exchange ends with a trailer (``trailer``): the sender's own format and
  whether its rows are in it. A rank whose rows are not in the expected format sends the
  expected number of bytes with no rows in them;
* after the exchange every rank has every rank's trailer and settles the same way
  (``RowAgreement.settle``): all in the expected format, the rows are used; all in one other
  format, the exchange is made again in that one (it happens when the period breaks; no rank
  has used a row); any disagreement raises ``SparseTIRValueError`` on every rank, naming the
  formats, after every rank has finished the exchange (none waits for another in a later
  collective).

Without an expectation (the first calls, or after a change) the exchange is preceded by the
explicit check (``collective.check_agree``).

Example
-------
>>> import torch
>>> agreement = RowAgreement()
>>> agreement.expected() is None                 # nothing seen yet: check explicitly
True
>>> for width in (16, 7, 16, 7):                 # two layers' widths in turn
...     agreement.record(row_format(torch.zeros(3, width)))
>>> agreement.expected() == row_format(torch.zeros(5, 16))
True
>>> fmt, holds_rows = decode(trailer(row_format(torch.zeros(2, 16)), True))
>>> describe(fmt), holds_rows
('rows of shape (n, 16) of torch.float32', True)
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

from ..errors import SparseTIRValueError

MAX_DIMS = 4
"""Sizes past the first dimension a format gives one by one (zeros past ``ndim``; with more
dimensions, their product and a checksum of all of them are compared too)."""
FORMAT_VALUES = MAX_DIMS + 5
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
TRAILER_VALUES = 16
TRAILER_BYTES = 8 * TRAILER_VALUES
"""A trailer's size: int64 values, a multiple of every dtype's size, so rows after it stay
aligned."""
MAX_PERIOD = 8
HISTORY = 4 * MAX_PERIOD


def row_format(rows: torch.Tensor) -> tuple:
    """``(ndim, elements a row, sizes..., CRC-32 of all sizes, itemsize, dtype code)`` of
    ``rows`` past its first dimension: what the ranks of an exchange must agree on (dtype code
    -1: not one of ``DTYPES``; the checksum tells apart shapes whose first ``MAX_DIMS`` sizes
    and element counts agree)."""
    shape = tuple(rows.shape[1:])
    sizes = (shape + (0,) * MAX_DIMS)[:MAX_DIMS]
    code = DTYPES.index(rows.dtype) if rows.dtype in DTYPES else -1
    checksum = zlib.crc32(np.asarray(shape, np.int64).tobytes())
    return (len(shape), int(np.prod(shape)), *sizes, checksum, rows.element_size(), code)


def row_bytes(fmt: tuple) -> int:
    """Bytes of one row in format ``fmt``."""
    return fmt[1] * fmt[-2]


def describe(fmt: tuple) -> str:
    """``fmt`` for an error message."""
    ndim, _, *sizes, _, _, code = fmt
    dtype = DTYPES[code] if 0 <= code < len(DTYPES) else "another dtype"
    shown = [str(size) for size in sizes[:ndim]] + ["..."] * (ndim > MAX_DIMS)
    return f"rows of shape (n, {', '.join(shown)}) of {dtype}"


def trailer(fmt: tuple, holds_rows: bool) -> torch.Tensor:
    """The bytes closing a piece a rank sends: its own rows' format ``fmt`` and whether the
    piece holds them (False: the piece has the expected size and no rows)."""
    values = torch.zeros(TRAILER_VALUES, dtype=torch.int64)
    values[0] = int(holds_rows)
    values[1:1 + len(fmt)] = torch.tensor(fmt, dtype=torch.int64)
    return values.view(torch.uint8)


def decode(piece_end: torch.Tensor) -> tuple:
    """``(format, holds rows)`` from a trailer's bytes."""
    values = piece_end.view(torch.int64).tolist()
    return tuple(values[1:1 + FORMAT_VALUES]), bool(values[0])


class RowAgreement:
    """The formats an exchange carried, the same on every rank (see the module docstring)."""

    def __init__(self):
        self.history = []

    def expected(self) -> tuple | None:
        """The format the next exchange is expected in: the one ``p`` exchanges back when the
        last ``2 p`` formats repeat with period ``p`` (the shortest such ``p`` up to
        ``MAX_PERIOD``); None without such a period, or for a dtype not in ``DTYPES``."""
        history = self.history
        for period in range(1, MAX_PERIOD + 1):
            if len(history) >= 2 * period and history[-period:] == history[-2 * period:-period]:
                fmt = history[-period]
                return fmt if fmt[-1] >= 0 else None
        return None

    def record(self, fmt: tuple) -> None:
        """Remember that an exchange carried rows in ``fmt``."""
        self.history = (self.history + [fmt])[-HISTORY:]

    def settle(self, expected: tuple, trailers: list) -> tuple | None:
        """After an exchange sized for ``expected``, with ``trailers[q]`` = rank ``q``'s
        ``(format, holds rows)``: None when every rank's rows were in ``expected`` (they may be
        used); the format to exchange again in when every rank's rows are in that one other
        format (no rank sent rows); otherwise ``SparseTIRValueError``, on every rank alike."""
        formats = {fmt for fmt, _ in trailers}
        if len(formats) > 1:
            ranks = "; ".join(f"rank {q}: {describe(fmt)}" for q, (fmt, _) in enumerate(trailers))
            raise SparseTIRValueError(
                f"the ranks disagree on the rows' shape past the first dimension and dtype "
                f"({ranks}): every rank must pass rows of one shape and dtype")
        (fmt,) = formats
        if fmt != expected:
            return fmt                  # recorded when the exchange made again settles
        self.record(fmt)
        return None
