"""Tuning records on disk: the choice a search made, kept for later processes.

A record is keyed by the matrix's pattern (:func:`fingerprint`: SHA-256 of its shape, row
pointers and column indices; values do not change which kernel is fastest), the machine
(``machine.machine_key``), the kernel and the feature size. It lives in the disk cache
(``backend.cache_folder``: ``$SPARSETIR_CACHE/tune/<key>/record.json``, folders only the user can
write, files checked against their recorded SHA-256 before they are read). A record is used
only when it parses, names exactly the key asked for, and its choice is one of today's
candidates (``candidates.space``); anything else (cut short, altered, from another machine,
matrix or version) is ignored, never trusted, and a new search replaces it. Even a record that
passes is checked against scipy before its kernel runs (``search``).

Example
-------
>>> import os, tempfile
>>> from unittest import mock
>>> from sparsetir.tune.candidates import Candidate
>>> key = record_key("0" * 64, "spmm", 16)     # the pattern: fingerprint(M) of a SparseMatrix
>>> choice = Candidate("csr", prefetch=16, lanes=16, tiles_per_thread=64)
>>> with mock.patch.dict(os.environ, SPARSETIR_CACHE=tempfile.mkdtemp()):  # a cache of its own
...     store(key, choice, {choice.describe(): 0.00061}, {})
...     load(key) == choice, load(record_key("1" * 64, "spmm", 16))   # the candidate, or None
(True, None)
"""

from __future__ import annotations

import hashlib
import json

from ..backend import cache_folder
from .candidates import Candidate
from .machine import machine_key

RECORD = "record.json"
FORMAT = 1


def fingerprint(matrix) -> str:
    """The SHA-256 of ``matrix``'s pattern (a ``SparseMatrix``): shape, indptr, indices."""
    digest = hashlib.sha256(repr(tuple(matrix.shape)).encode())
    digest.update(matrix.indptr.tobytes())
    digest.update(matrix.indices.tobytes())
    return digest.hexdigest()


def record_key(pattern: str, kernel: str, feat_size: int) -> dict:
    """Everything a record must match to be used."""
    return {"format": FORMAT, "pattern": pattern, "machine": machine_key(), "kernel": kernel,
            "feat_size": int(feat_size)}


def _entry_name(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def load(key: dict) -> Candidate | None:
    """The candidate recorded under ``key``, or None (no record, or one not to be trusted)."""
    folder = cache_folder.folder("tune")
    if folder is None:
        return None
    files = cache_folder.read_entry(folder / _entry_name(key))
    if files is None or RECORD not in files:
        return None
    try:
        record = json.loads(files[RECORD].read_text())
        if record.get("key") != key:
            return None
        return Candidate.from_json(record["choice"], key["kernel"], key["feat_size"])
    except cache_folder.DAMAGED:
        return None


def store(key: dict, choice: Candidate, measured: dict, paired: dict) -> None:
    """Record ``choice`` under ``key`` with the times that chose it (description -> seconds:
    ``measured``, each candidate timed on its own; ``paired``, the default and the fastest
    timed in alternation, which decided; empty when no pair was timed),
    replacing whatever is there (a record, or anything damaged: ``cache_folder.write_entry``
    sets it aside, as it does for kernels); where the cache cannot be used, nothing is stored
    (the cache warns)."""
    folder = cache_folder.folder("tune")
    if folder is None:
        return
    text = json.dumps({"key": key, "choice": choice.to_json(), "measured_s": measured,
                       "paired_s": paired}, indent=1, sort_keys=True)
    cache_folder.write_entry(folder / _entry_name(key),
                             lambda staging: (staging / RECORD).write_text(text), replace=True)
