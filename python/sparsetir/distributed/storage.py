"""``save(parts, folder)`` / ``load(folder, rank)``: a partition on disk, one file a part.

``folder/partition.json`` describes the partition (its id, sizes, and for each part the file's
name, byte count and SHA-256); ``folder/part-<rank>.npz`` holds one part's arrays. ``load``
reads only the description and its own part, checks the file's size and checksum before
parsing a byte of it, and then that the arrays are the part the description names (the
partition id and rank stored inside it, the sizes): a truncated, corrupt or foreign file is
refused with a ``PartitionFileError`` naming the file and the problem, never half-read.

Example
-------
>>> import numpy as np, scipy.sparse, tempfile
>>> from sparsetir.distributed import partition, save, load
>>> A = scipy.sparse.random(20, 20, density=0.2, format="csr", dtype=np.float32)
>>> folder = tempfile.mkdtemp()
>>> save(partition(A, 2), folder)          # the description's path
PosixPath('.../partition.json')
>>> load(folder, 1).rank
1
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from pathlib import Path

import numpy as np

from ..errors import PartitionFileError, SparseTIRValueError
from ..format import check_csr
from .part import Block, Part

DESCRIPTION = "partition.json"
FORMAT = "sparsetir.distributed.partition/1"


def save(parts: list, folder) -> Path:
    """Write ``parts`` (all of one ``partition``) into ``folder`` (made if missing); returns
    the description's path. Each file is written under a temporary name and renamed."""
    if not parts or any(not isinstance(p, Part) for p in parts):
        raise SparseTIRValueError("parts must be the non-empty list partition() returns")
    if [p.rank for p in parts] != list(range(parts[0].num_parts)) or len(
            {(p.num_parts, p.num_nodes, p.nnz_total) for p in parts}) != 1:
        raise SparseTIRValueError(
            f"parts must be all {parts[0].num_parts} parts of one partition in rank order, got "
            "(rank, num_parts, num_nodes, nnz_total) "
            f"{[(p.rank, p.num_parts, p.num_nodes, p.nnz_total) for p in parts]}")
    owned = np.sort(np.concatenate([p.owned for p in parts]))
    if not np.array_equal(owned, np.arange(parts[0].num_nodes)):
        raise SparseTIRValueError("parts must be the parts of one partition: their owned nodes "
                                  f"do not cover the {parts[0].num_nodes} nodes once each")
    if len({p.partition_id for p in parts}) != 1:
        raise SparseTIRValueError("parts must be the parts of one partition: their "
                                  "partition_id differ (parts of two partition() calls on "
                                  "different matrices or owners)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    partition_id = parts[0].partition_id or uuid.uuid4().hex      # parts made by hand: new
    entries = []
    for part in parts:
        payload = _encode(part, partition_id)
        name = f"part-{part.rank}.npz"
        _write(folder / name, payload)
        entries.append({"file": name, "bytes": len(payload),
                        "sha256": hashlib.sha256(payload).hexdigest(),
                        "num_owned": part.num_owned, "nnz": part.nnz})
    description = {"format": FORMAT, "partition_id": partition_id,
                   "num_parts": parts[0].num_parts, "num_nodes": parts[0].num_nodes,
                   "nnz": parts[0].nnz_total, "dtype": str(parts[0].blocks[0].data.dtype),
                   "parts": entries}
    path = folder / DESCRIPTION
    _write(path, json.dumps(description, indent=1).encode())
    return path


def load(folder, rank: int) -> Part:
    """Part ``rank`` of the partition saved in ``folder`` (see the module docstring)."""
    folder = Path(folder)
    description = _description(folder)
    count = description["num_parts"]
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) \
            or not 0 <= rank < count:
        raise PartitionFileError(f"rank {rank!r} is not a part of {folder} (it has {count} "
                                 f"parts, ranks 0..{count - 1})")
    entry = description["parts"][rank]
    path = folder / entry["file"]
    try:
        payload = path.read_bytes()
    except OSError as err:
        raise PartitionFileError(f"cannot read part file {path}: {err.strerror}") from None
    if len(payload) != entry["bytes"]:
        raise PartitionFileError(f"part file {path} has {len(payload)} bytes, the description "
                                 f"says {entry['bytes']}: truncated or replaced")
    if hashlib.sha256(payload).hexdigest() != entry["sha256"]:
        raise PartitionFileError(f"part file {path} does not match its SHA-256 in "
                                 f"{folder / DESCRIPTION}: corrupt or from another partition")
    part = _decode(payload, path, description["partition_id"])
    if part.rank != rank or part.num_parts != count or part.num_owned != entry["num_owned"] \
            or part.nnz != entry["nnz"] or part.num_nodes != description["num_nodes"] \
            or part.nnz_total != description["nnz"]:
        raise PartitionFileError(f"part file {path} holds part {part.rank} of {part.num_parts} "
                                 f"({part.num_owned} rows, {part.nnz} edges of a matrix of "
                                 f"{part.num_nodes} nodes and {part.nnz_total} entries), not "
                                 f"part {rank} of {count} as {DESCRIPTION} says")
    return part


def _description(folder: Path) -> dict:
    path = folder / DESCRIPTION
    try:
        description = json.loads(path.read_text())
    except OSError as err:
        raise PartitionFileError(f"cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise PartitionFileError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise PartitionFileError(f"{path} does not describe a sparsetir partition "
                                 f"(format {FORMAT!r} expected)")
    parts = description.get("parts")
    if not isinstance(parts, list) or len(parts) != description.get("num_parts"):
        raise PartitionFileError(f"{path} lists {len(parts) if isinstance(parts, list) else 0} "
                                 f"parts but says num_parts={description.get('num_parts')!r}")
    wrong = _wrong_field(description, DESCRIPTION_FIELDS) or next(
        (f"parts[{k}]: {problem}" for k, entry in enumerate(parts)
         if (problem := _wrong_field(entry, ENTRY_FIELDS))), None)
    if wrong:
        raise PartitionFileError(f"{path} is not a partition description: {wrong}")
    return description


DESCRIPTION_FIELDS = {"partition_id": str, "num_parts": int, "num_nodes": int, "nnz": int}
ENTRY_FIELDS = {"file": str, "bytes": int, "sha256": str, "num_owned": int, "nnz": int}


def _wrong_field(entry, fields: dict):
    """What is wrong with the JSON object ``entry`` against ``fields`` (name -> type), or
    None; a part's ``file`` must be a plain name in the folder."""
    if not isinstance(entry, dict):
        return f"{entry!r} is not an object"
    for name, kind in fields.items():
        value = entry.get(name)
        if type(value) is not kind or (kind is int and value < 0):
            return f"{name!r} is {value!r}, not a{'' if kind is str else ' non-negative'} " \
                   f"{'string' if kind is str else 'integer'}"
    if "file" in fields and (Path(entry["file"]).name != entry["file"]
                             or entry["file"] in ("", ".", "..")):
        return f"file {entry['file']!r} is not a name in the folder"
    return None


def _write(path: Path, payload: bytes) -> None:
    scratch = path.with_name(path.name + f".{os.getpid()}.tmp")
    scratch.write_bytes(payload)
    os.replace(scratch, path)


def _encode(part: Part, partition_id: str) -> bytes:
    arrays = {"meta": np.array([part.rank, part.num_parts, part.num_nodes, part.nnz_total],
                               np.int64),
              "partition_id": np.frombuffer(partition_id.encode(), np.uint8),
              "owned": part.owned, "global_edges": part.global_edges,
              "out_degrees": part.out_degrees,
              "block_cols": np.array([b.num_cols for b in part.blocks], np.int64)}
    for q, block in enumerate(part.blocks):
        arrays.update({f"indptr{q}": block.indptr, f"indices{q}": block.indices,
                       f"data{q}": block.data})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _decode(payload: bytes, path: Path, partition_id: str) -> Part:
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
        rank, num_parts, num_nodes, nnz_total = (int(v) for v in arrays["meta"])
        stored_id = arrays["partition_id"].tobytes().decode()
        blocks = [Block(arrays[f"indptr{q}"], arrays[f"indices{q}"], arrays[f"data{q}"],
                        int(arrays["block_cols"][q])) for q in range(num_parts)]
        part = Part(rank=rank, num_parts=num_parts, num_nodes=num_nodes, nnz_total=nnz_total,
                    owned=arrays["owned"], blocks=blocks, global_edges=arrays["global_edges"],
                    out_degrees=arrays["out_degrees"], partition_id=stored_id)
        if stored_id == partition_id:
            _check_part(part)
    except (KeyError, ValueError, IndexError, TypeError, OSError, UnicodeDecodeError) as err:
        raise PartitionFileError(f"part file {path} is not a sparsetir part: {err}") from None
    if stored_id != partition_id:
        raise PartitionFileError(f"part file {path} belongs to partition {stored_id}, not to "
                                 f"{partition_id} which {DESCRIPTION} describes")
    return part


def _check_part(part: Part) -> None:
    """Raise ``ValueError`` naming the first array of ``part`` that is not what a part holds
    (a file whose checksum was written again after it was changed passes the checksum)."""
    if not 0 <= part.rank < part.num_parts or part.num_nodes < 0 or part.nnz_total < 0:
        raise ValueError(f"meta {[part.rank, part.num_parts, part.num_nodes, part.nnz_total]} "
                         "is no rank, part count, node count and entry count")
    for name in ("owned", "global_edges", "out_degrees"):
        array = getattr(part, name)
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise ValueError(f"{name} is {array.dtype} of shape {array.shape}, not 1-D integers")
    owned = part.owned.astype(np.int64)
    if owned.size and (owned[0] < 0 or owned[-1] >= part.num_nodes
                       or (np.diff(owned) <= 0).any()):
        raise ValueError(f"owned is not increasing node ids in [0, {part.num_nodes})")
    for q, block in enumerate(part.blocks):
        if block.indptr.dtype.kind not in "iu" or block.indices.dtype.kind not in "iu" \
                or block.data.dtype.kind != "f" or block.num_cols < 0:
            raise ValueError(f"block {q} is not integer indptr and indices over "
                             "floating-point data with a column count")
        check_csr(block.indptr, block.indices, (part.num_owned, block.num_cols),
                  names=("owned rows", f"block_cols[{q}]"))
        if block.data.shape != block.indices.shape:
            raise ValueError(f"data{q} has {block.data.size} values for {block.nnz} entries")
    edges = part.global_edges.astype(np.int64)
    if edges.size != sum(block.nnz for block in part.blocks) or (edges.size and (
            edges.min() < 0 or edges.max() >= part.nnz_total)):
        raise ValueError(f"global_edges is not one position in [0, {part.nnz_total}) per entry")
    if part.out_degrees.size != part.num_owned or (part.out_degrees.astype(np.int64) < 0).any():
        raise ValueError("out_degrees is not one count per owned node")
