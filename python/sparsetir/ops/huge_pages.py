"""Gathered operands on 2 MiB pages: a large dense operand whose rows a kernel gathers (SpMM's
``X``, SDDMM's ``Y``, the source data ``u`` of ``gspmm`` and ``gsddmm`` and their aliases:
``copy_u_sum``, ``u_mul_e_sum``, ``u_dot_v``...) is moved onto transparent huge pages once the
same object has been gathered for about as long as the move takes. Each operator notes its
operand once a call (:func:`note_gathered`).

A gather reads one row at an address known only from ``indices``: over an operand much larger
than the TLB's reach (Intel's second-level TLB maps 2,048 pages of 4 KiB, 8 MiB; AMD Zen 4's
3,072, 12 MiB) nearly every gathered row costs a page walk besides its cache misses. On 2 MiB
pages the whole operand fits the TLB. numpy asks for huge pages itself when it allocates 4 MiB or
more (``madvise(MADV_HUGEPAGE)``, where the kernel's THP setting is ``madvise``, the common
default), torch's CPU allocator does not (unless ``THP_MEM_ALLOC_ENABLE=1`` is set before torch
starts): on the Intel VM, SpMM from a torch ``X`` on 4 KiB pages against the same ``X`` moved to
2 MiB pages (2 threads, medians of 31 calls, ``THP`` ``madvise``, 2026-11-28): bfloat16 arxiv-size
synthetic graph 11.9 -> 9.0 ms at 128 features and 28.0 -> 21.1 at 256, R-MAT 13.1 -> 9.1 and
27.2 -> 21.1, email-Enron 1.96 -> 1.62 and 3.88 -> 3.40; float32 R-MAT at 32 features 3.8 ->
2.6 ms, at 128 17.7 -> 14.2.

Moving costs time once: ``madvise(MADV_COLLAPSE)`` (Linux 6.1) copies the operand into huge
pages, about ``MOVE_SECONDS_PER_MIB`` (87 MiB: 177 ms on that VM, about the time of 10-20 calls
that gather it), and it pays only if the same memory is gathered again. So an operand is moved
when the same object (not a new tensor at a recycled address: a training step's activations
are new tensors each step) has been gathered for about as long as the move takes, a
rent-or-buy rule: at its ``MIN_CALLS``-th call or later, once its calls so far times the
shortest interval between two of them (an upper bound on one call's time) reaches the move's
estimated time. The move then costs (as estimated) at most 1.5 times the time since the
operand's first call, and a loop over fixed features (inference, an input layer that
aggregates before its linear map, a benchmark) gains from there on. Operands under
``MIN_BYTES`` fit the TLB's reach and are left as they are; memory already on huge pages
(numpy's) moves in microseconds. ``SPARSETIR_HUGE_PAGES=0`` (set before the first call) turns
it off. Nothing changes for the user but the pages: the values, the address and the object
stay.

Results too: a torch tensor of ``MIN_BYTES`` or more that an operator makes for its result asks
for huge pages before the kernel writes it (:func:`advise_fresh_result`), so that glibc's fresh
pages for it are faulted 2 MiB at a time, not 4 KiB (numpy arrays ask for themselves).
``ops.spmm(M, X)`` with a torch ``X`` and no ``out=``, the R-MAT graph of arxiv size at 128
features (a 87 MB result; AMD EPYC Zen 3 VM, 2 threads, medians): 68.5 ms before, 31.2 after,
23.2 into a given ``out=``.

Example
-------
>>> import numpy as np
>>> X = np.ones((4, 4), np.float32)          # under MIN_BYTES: never moved
>>> for _ in range(2 * MIN_CALLS):
...     note_gathered(X)
>>> moved_bytes(X)
0
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import weakref
from functools import lru_cache
from pathlib import Path

import numpy as np

HUGE_PAGE = 2 << 20
"""The size of a transparent huge page on x86-64 and most arm64 kernels (bytes)."""

MIN_BYTES = 8 << 20
"""Operands smaller than this fit Intel's second-level TLB on 4 KiB pages: left as they are
(pubmed at 32 features, 2.5 MiB: 0.33 against 0.30 ms moved, within the noise)."""

MIN_CALLS = 3
"""Calls with the same operand object before it may move (two intervals between calls)."""

MOVE_SECONDS_PER_MIB = 2e-3
"""The estimated time of the move a MiB: ``MADV_COLLAPSE`` of torch tensors on 4 KiB pages on
the Intel VM, 43 MiB in 79 ms and 87 MiB in 177 ms (2026-11-28)."""

MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25

_seen: dict = {}        # id(operand) -> _Uses


class _Uses:
    """The calls seen with one operand object."""

    __slots__ = ("reference", "calls", "last", "shortest", "moved")

    def __init__(self, reference, now: float):
        self.reference, self.calls, self.last = reference, 0, now
        self.shortest, self.moved = float("inf"), None


def note_gathered(operand) -> None:
    """Count a call that gathers rows of ``operand`` (a numpy array or torch tensor); once this
    same object, of at least ``MIN_BYTES``, has been gathered for about as long as moving it
    takes (see the module docstring), move its memory onto huge pages
    (``back_with_huge_pages``), once. Costs a dictionary lookup and a clock read a call."""
    try:
        nbytes = operand.nbytes
    except (AttributeError, RuntimeError, TypeError, ValueError):   # no array: checked later
        return
    if not isinstance(nbytes, int) or nbytes < MIN_BYTES or not huge_pages_available():
        return
    key, now = id(operand), time.perf_counter()
    uses = _seen.get(key)
    if uses is None or uses.reference() is not operand:
        try:
            reference = weakref.ref(operand, lambda ref, key=key: _forget(key, ref))
        except TypeError:            # an object without weak references: not counted
            return
        _seen[key] = uses = _Uses(reference, now)
    else:
        uses.shortest = min(uses.shortest, now - uses.last)
        uses.last = now
    uses.calls += 1
    if uses.moved is None and uses.calls >= MIN_CALLS and \
            uses.calls * uses.shortest >= MOVE_SECONDS_PER_MIB * nbytes / (1 << 20):
        memory = _memory(operand)
        uses.moved = back_with_huge_pages(*memory) if memory is not None else 0


def moved_bytes(operand) -> int:
    """The bytes of ``operand`` that ``note_gathered`` moved onto huge pages (0 when it did
    not)."""
    uses = _seen.get(id(operand))
    return uses.moved or 0 if uses is not None and uses.reference() is operand else 0


def advise_fresh_result(result) -> None:
    """Ask Linux to fault a new result of at least ``MIN_BYTES`` (a contiguous CPU torch
    tensor just allocated, not yet written) in 2 MiB at a time (``MADV_HUGEPAGE`` on the
    whole huge pages inside it), as numpy asks for its own arrays. glibc gives an allocation
    over its mmap threshold (at most 32 MiB) fresh pages and returns them when it is freed,
    so a call that returns such a tensor pays a page fault for every 4 KiB of it on first
    write: ``torch.empty((169343, 128))`` then ``fill_`` took 40.2 ms, 6.6 with the request
    (AMD EPYC Zen 3 VM, THP ``madvise``; the fill alone 4.1 ms, ``np.empty`` then ``fill``
    12.3). Never raises, never changes a value.

    >>> import torch
    >>> advise_fresh_result(torch.empty(16))       # under MIN_BYTES: nothing asked
    """
    if result.nbytes < MIN_BYTES or not huge_pages_available():
        return
    memory = _memory(result)
    if memory is not None:
        _advise(*memory)


def _advise(address: int, nbytes: int):
    """``(start, length)`` of the whole huge pages inside ``[address, address + nbytes)``
    after asking ``MADV_HUGEPAGE`` for them, or None when there is none or Linux refused."""
    start = -(-address // HUGE_PAGE) * HUGE_PAGE
    end = (address + nbytes) // HUGE_PAGE * HUGE_PAGE
    if end <= start or _libc().madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start),
                                       MADV_HUGEPAGE) != 0:
        return None
    return start, end - start


def back_with_huge_pages(address: int, nbytes: int) -> int:
    """Ask Linux to back the whole 2 MiB pages inside ``[address, address + nbytes)`` with
    huge pages (``MADV_HUGEPAGE``) and to move them there now (``MADV_COLLAPSE``; on a kernel
    before 6.1, ``khugepaged`` moves them later). Returns the bytes moved now (0 when the range
    holds no whole huge page, or the kernel did not move it); never raises, never changes a
    value."""
    pages = _advise(address, nbytes) if huge_pages_available() else None
    if pages is None:
        return 0
    start, length = pages
    moved = _libc().madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), MADV_COLLAPSE) == 0
    return length if moved else 0


@lru_cache(maxsize=None)
def huge_pages_available() -> bool:
    """Linux with transparent huge pages not set to ``never``, and not turned off by
    ``SPARSETIR_HUGE_PAGES=0`` (read once, at the first large operand: set it before)."""
    if os.environ.get("SPARSETIR_HUGE_PAGES", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    return "[never]" not in setting


@lru_cache(maxsize=None)
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    return libc


def _memory(operand):
    """``(address, nbytes)`` of a C-contiguous numpy array or of a contiguous strided CPU torch
    tensor with memory of its own, else None: anything else (a view with gaps, a sparse,
    meta or ``torch.func`` tensor) is left as it is, to the operators' own checks."""
    if isinstance(operand, np.ndarray):
        if not operand.flags.c_contiguous:
            return None
        address = operand.__array_interface__["data"][0]
    else:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(operand, torch.Tensor) \
                or operand.layout is not torch.strided or operand.device.type != "cpu":
            return None
        try:
            if not operand.is_contiguous():
                return None
            address = operand.data_ptr()
        except RuntimeError:                    # a torch.func tensor: no storage to read
            return None
    return (address, operand.nbytes) if address else None


def _forget(key: int, reference) -> None:
    uses = _seen.get(key)
    if uses is not None and uses.reference is reference:
        del _seen[key]
