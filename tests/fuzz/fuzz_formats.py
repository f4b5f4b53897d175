"""Random valid and invalid calls of every conversion routine of ``sparsetir.format`` in one
process; prints a JSON summary.

``python fuzz_formats.py CASES SEED``. Valid calls (index arrays of any integer type, as
lists or strided views; float32 or float64 values; int32 or int64 outputs; empty rows and
matrices, unsorted and duplicate columns, column ids past 2**31 with int64 outputs) must give
arrays that rebuild the input (as scipy sums it), with every id in range and every padding
value exactly +0; invalid calls (an index array of shape (nnz, 1), of floats or bools, a
negative or out-of-range id, a falling or short ``indptr``, values of another length or of
integers, a size that is a bool, a float or 0, a float ``idtype``, ids past int32 for int32
outputs, bad bucket lists and shapes) must raise ``ValueError`` or ``TypeError``. A signal
kills the process, which the calling test reports with the last case printed to stderr.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import numpy as np

from sparsetir.format import (column_part_hyb, condense, csf_to_ell3d, csr_pad, csr_to_bsr,
                              csr_to_ell, row_tiles)

BIG = 2**31 + 5                       # a column count whose ids do not fit int32


def random_case(rng) -> dict:
    """A CSR matrix (int64 arrays) with empty rows, unsorted and duplicate columns, and the
    routines' other arguments; one case in eight has ids past 2**31."""
    m, n = int(rng.integers(0, 10)), int(rng.integers(1, 12))
    lengths = rng.integers(0, 7, m) * (rng.random(m) < 0.75)
    indices = rng.integers(0, n, int(lengths.sum()))
    huge = rng.random() < 0.125
    if huge:
        indices, n = indices + (BIG - n), BIG
    return dict(indptr=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                indices=indices.astype(np.int64), shape=(m, n), huge=huge,
                data=rng.uniform(0.5, 1.5, indices.size).astype(
                    (np.float32, np.float64)[rng.integers(2)]),
                size=int(rng.integers(1, 5)), parts=int(rng.integers(1, 4)),
                buckets=sorted(set(rng.integers(1, 6, rng.integers(1, 4)).tolist())),
                rels=np.sort(rng.integers(0, m + 1, rng.integers(0, 3))).tolist(),
                row_ids=rng.integers(0, max(m, 1), m), idtype=np.int64 if huge else np.int32)


def _form(array: np.ndarray, kind: int):
    """``array`` as itself (0), a list (1), a strided view (2), uint16 or int32 (3)."""
    if kind == 1:
        return array.tolist()
    if kind == 2:
        wide = np.zeros((array.size, 2), array.dtype)
        wide[:, 0] = array
        return wide[:, 0]
    if kind == 3:
        return array.astype(np.uint16 if array.size == 0 or array.max() < 2**16 else np.int64)
    return array


# ------------------------------------------------------------------ the routines, rebuilt


def _entries(csr) -> Counter:
    """Input ``(row, col)`` pairs with multiplicity."""
    rows = np.repeat(np.arange(len(csr["indptr"]) - 1), np.diff(csr["indptr"]))
    return Counter(zip(rows.tolist(), np.asarray(csr["indices"]).tolist()))


def _summed(pairs, values) -> dict:
    out = {}
    for pair, value in zip(pairs, values):
        out[pair] = out.get(pair, 0.0) + float(value)
    return out


def _check_ell(buckets, case, idtype, padding_ok) -> Counter:
    """Pairs of a list of EllBuckets, after checking dtypes, ranges and padding values."""
    pairs = Counter()
    m, n = case["shape"]
    for bucket in buckets:
        assert bucket.row_indices.dtype == idtype and bucket.col_indices.dtype == idtype
        assert ((bucket.col_indices >= 0) & (bucket.col_indices < n)).all()
        assert ((bucket.row_indices >= 0) & (bucket.row_indices < m)).all()
        real = bucket.mask == 1
        padding_ok(bucket.data, real)
        rows = np.broadcast_to(bucket.row_indices[:, None], real.shape)
        pairs.update(zip(rows[real].tolist(), bucket.col_indices[real].tolist()))
    return pairs


def _zero_padding(data, real) -> None:
    if data is not None:
        padding = data[~real]
        assert (padding == 0).all() and not np.signbit(padding).any(), "padding not +0"


def _values_of(buckets) -> dict:
    pairs, values = [], []
    for b in buckets:
        real = b.mask == 1
        rows = np.broadcast_to(b.row_indices[:, None], real.shape)
        pairs += list(zip(rows[real].tolist(), b.col_indices[real].tolist()))
        values += b.data[real].tolist()
    return _summed(pairs, values)


def run_ell(case, args):
    buckets = csr_to_ell(*args["csr"], args["buckets"], idtype=args["idtype"])
    return _check_ell(buckets, case, np.dtype(args["idtype"]), _zero_padding), \
        _values_of(buckets)


def run_hyb(case, args):
    m, n = args["csr"][3]
    parts = column_part_hyb(m, n, *args["csr"][:2], args["parts"], args["buckets"],
                            data=args["csr"][2], idtype=args["idtype"])
    assert len(parts) == args["parts"]
    flat = [bucket for part in parts for bucket in part]
    return _check_ell(flat, case, np.dtype(args["idtype"]), _zero_padding), _values_of(flat)


def run_pad(case, args):
    indptr, indices, mask, data = csr_pad(*args["csr"], args["size"], idtype=args["idtype"])
    assert indptr.dtype == indices.dtype == args["idtype"]
    assert (np.diff(indptr) % args["size"] == 0).all()
    real = mask == 1
    _zero_padding(data, real)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    pairs = list(zip(rows[real].tolist(), indices[real].tolist()))
    return Counter(pairs), _summed(pairs, data[real])


def run_bsr(case, args):
    bs = args["size"]
    indptr, indices, blocks = csr_to_bsr(*args["csr"], bs, idtype=args["idtype"])
    assert indptr.dtype == indices.dtype == args["idtype"]
    block_row = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    k, i, j = np.nonzero(blocks)
    assert not np.signbit(blocks).any(), "a block slot holds -0"
    rows, cols = block_row[k] * bs + i, indices[k].astype(np.int64) * bs + j
    m, n = case["shape"]
    assert ((rows < m) & (cols < n)).all(), "a value outside the matrix"
    pairs = list(zip(rows.tolist(), cols.tolist()))
    return None, _summed(pairs, blocks[k, i, j])


def run_condense(case, args):
    t, g = args["size"], args["parts"]
    group_indptr, tile_indices, mask = condense(*args["csr"][:2], t, g,
                                                num_cols=args["csr"][3][1],
                                                idtype=args["idtype"])
    assert group_indptr.dtype == tile_indices.dtype == args["idtype"]
    tile_of = np.repeat(np.arange(group_indptr.size - 1), np.diff(group_indptr))
    k, r, s = np.nonzero(mask)
    pairs = set(zip((tile_of[k] * t + r).tolist(), tile_indices[k, s].tolist()))
    return Counter(dict.fromkeys(pairs, 1)), None


def run_ell3d(case, args):
    indptr_1, indices_1 = args["csr"][:2]
    m = len(indptr_1) - 1
    indptr_0 = [0] + case["rels"] + [m]
    got = csf_to_ell3d(indptr_0, args["row_ids"], indptr_1, indices_1, args["buckets"],
                       rows_per_block=args["size"], idtype=args["idtype"])
    triples = Counter()
    for indptr, rows, cols, mask in zip(*got):
        assert rows.dtype == cols.dtype == indptr.dtype == args["idtype"]
        rel = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
        b, r, w = np.nonzero(mask)
        triples.update(zip(rel[b].tolist(), rows[b, r].tolist(), cols[b, r, w].tolist()))
    return triples, None


def run_row_tiles(case, args):
    rows = np.sort(np.asarray(args["row_ids"]))
    got = row_tiles(args["row_ids"], args["csr"][3][0], args["size"], idtype=args["idtype"])
    m = case["shape"][0]
    want = [int((rows < t * args["size"]).sum()) for t in range(-(-m // args["size"]) + 1)]
    assert got.dtype == args["idtype"] and got.tolist() == want, (got.tolist(), want)
    return None, None


ROUTINES = {"csr_to_ell": run_ell, "column_part_hyb": run_hyb, "csr_pad": run_pad,
            "csr_to_bsr": run_bsr, "condense": run_condense, "csf_to_ell3d": run_ell3d,
            "row_tiles": run_row_tiles}


def expected(name: str, case: dict):
    """What the rebuilt output must equal: ``(pairs, values)`` as the runner returns them."""
    pairs = _entries(case)
    if name == "condense":
        return Counter(dict.fromkeys(pairs, 1)), None
    if name == "csf_to_ell3d":
        m = case["shape"][0]
        rel_of_row = np.repeat(np.arange(len(case["rels"]) + 1),
                               np.diff([0] + case["rels"] + [m]))
        return Counter((int(rel_of_row[r]), int(case["row_ids"][r]), c)
                       for r, c in pairs.elements()), None
    if name == "row_tiles":
        return None, None
    rows = np.repeat(np.arange(case["shape"][0]), np.diff(case["indptr"]))
    values = _summed(zip(rows.tolist(), case["indices"].tolist()), case["data"])
    return (None if name == "csr_to_bsr" else pairs), values


# ---------------------------------------------------------------------- invalid arguments


def _set(array, position, value):
    array = np.array(array, copy=True)
    array[position] = value
    return array


def breakers(name: str, case: dict, rng) -> list:
    """``(what, change)``: changes of the valid arguments that the routine must refuse."""
    ip, ix = case["indptr"], case["indices"]
    nnz, (m, n) = ix.size, case["shape"]
    out = [("indices of shape (nnz, 1)", {"indices": ix[:, None]}) if nnz else None,
           ("float indices", {"indices": ix.astype(np.float64) + 0.5}) if nnz else None,
           ("bool indices", {"indices": ix > 0}) if nnz else None,
           ("indptr of shape (m + 1, 1)", {"indptr": ip[:, None]}),
           ("float indptr", {"indptr": ip.astype(np.float32)}),
           ("negative column id", {"indices": _set(ix, 0, -1)}) if nnz else None,
           ("indptr one short", {"indptr": ip[:-1]}) if name != "condense" else None,
           ("indptr ending past nnz", {"indptr": _set(ip, -1, nnz + 1)}),
           ("idtype float32", {"idtype": np.float32}), ("idtype 'x'", {"idtype": "x"}),
           ("idtype uint32", {"idtype": np.uint32})]
    if m >= 2 and ip[-1] > 0:
        first = int(np.flatnonzero(np.diff(ip) > 0)[0])
        falling = ip.copy()
        falling[first + 1] = ip[-1] + 1 if first + 1 < m else falling[first + 1]
        if first + 1 < m:
            out.append(("indptr rising past nnz then falling", {"indptr": falling}))
    if name not in ("csr_to_ell", "column_part_hyb"):       # the routines that take a size
        out += [("size True", {"size": True}), ("size 2.5", {"size": 2.5}),
                ("size 0", {"size": 0}), ("size -3", {"size": -3})]
    if name in ("csr_to_ell", "column_part_hyb", "csr_pad", "csr_to_bsr"):
        out += [("int data", {"data": np.ones(nnz, np.int64)}),
                ("bool data", {"data": np.ones(nnz, bool)}),
                ("data of shape (nnz, 1)", {"data": case["data"][:, None]}) if nnz else None,
                ("data one short", {"data": case["data"][:-1]}) if nnz else None,
                ("complex data", {"data": case["data"] + 1j}),
                ("shape (m,)", {"shape": (m,)}), ("shape (m, 2.0)", {"shape": (m, 2.0)}),
                ("shape (m, True)", {"shape": (m, True)}),
                ("column id = n", {"indices": _set(ix, -1, n)}) if nnz else None]
    if name in ("csr_to_ell", "column_part_hyb", "csf_to_ell3d"):
        out += [("buckets []", {"buckets": []}), ("buckets [2, 1]", {"buckets": [2, 1]}),
                ("buckets [1.5]", {"buckets": [1.5]}), ("buckets [True, 2]",
                                                        {"buckets": [True, 2]}),
                ("buckets 3", {"buckets": 3})]
    if name == "column_part_hyb":
        out += [("parts 0", {"parts": 0}), ("parts 1.0", {"parts": 1.0})]
    if name == "condense":
        out += [("group False", {"parts": False}), ("num_cols below a column id",
                                                    {"shape": (m, 0)}) if nnz else None]
    if case["huge"] and nnz and name != "row_tiles":
        out.append(("column ids past int32, int32 output", {"idtype": np.int32,
                                                              "size": 1}))
    if name == "csf_to_ell3d":
        out += [("row id float", {"row_ids": case["row_ids"] + 0.5}) if m else None,
                ("row ids (m, 1)", {"row_ids": case["row_ids"][:, None]}) if m else None]
    if name == "row_tiles":
        rows = np.sort(case["row_ids"])
        out = [("row ids float", {"row_ids": rows + 0.5}) if m else None,
               ("row ids (m, 1)", {"row_ids": rows[:, None]}) if m else None,
               ("row ids unsorted", {"row_ids": rows[::-1]}) if m > 1 and rows[0] != rows[-1]
               else None,
               ("row id = m", {"row_ids": _set(rows, -1, m)}) if m else None,
               ("row id -1", {"row_ids": _set(rows, 0, -1)}) if m else None,
               ("size True", {"size": True}), ("size 2.5", {"size": 2.5}),
               ("num_rows -1", {"shape": (-1, n)}), ("idtype float32", {"idtype": np.float32})]
    return [b for b in out if b is not None]


def arguments(name: str, case: dict, change: dict, rng) -> dict:
    """The call's arguments: the case's, in random valid forms, with ``change`` applied."""
    kind = int(rng.integers(4))
    args = {"indptr": _form(case["indptr"], kind), "indices": _form(case["indices"], kind),
            "data": case["data"], "shape": case["shape"], "size": case["size"],
            "parts": case["parts"], "buckets": case["buckets"], "idtype": case["idtype"],
            "row_ids": np.sort(case["row_ids"]) if name == "row_tiles" else case["row_ids"]}
    args.update(change)
    args["csr"] = (args["indptr"], args["indices"], args["data"], args["shape"])
    return args


def main(cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    stats = {"cases": 0, "valid_right": 0, "invalid_refused": 0, "wrong": [], "silent": []}
    names = list(ROUTINES)
    for number in range(cases):
        case = random_case(rng)
        name = names[rng.integers(len(names))]
        valid = rng.random() < 0.5
        options = breakers(name, case, rng)
        what, change = ("valid", {}) if valid else options[rng.integers(len(options))]
        print(f"case {number}: {name} {case['shape']} {what}", file=sys.stderr, flush=True)
        stats["cases"] += 1
        args = arguments(name, case, change, rng)
        try:
            pairs, values = ROUTINES[name](case, args)
        except (ValueError, TypeError) as err:
            if valid:
                stats["wrong"].append(f"{name} {case['shape']}: refused a valid call: {err}")
            else:
                stats["invalid_refused"] += 1
            continue
        except Exception as err:  # noqa: BLE001  (anything else is a finding)
            stats["wrong"].append(f"{name} {case['shape']} {what}: {type(err).__name__}: {err}")
            continue
        if not valid:
            stats["silent"].append(f"{name} {case['shape']}: {what}")
            continue
        want_pairs, want_values = expected(name, case)
        same_values = want_values is None or (
            want_values.keys() == values.keys()
            and all(np.isclose(values[k], want_values[k], rtol=1e-6) for k in values))
        if (want_pairs is None or pairs == want_pairs) and same_values:
            stats["valid_right"] += 1
        else:
            stats["wrong"].append(f"{name} {case['shape']}: rebuilt output differs")
    print(json.dumps(stats))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
