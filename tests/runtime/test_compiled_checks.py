"""The compiled index checks (``runtime.compiled_checks``) accept exactly what the numpy
checks (``runtime.validate``) accept: random CSR and ELL index arrays (empty rows included),
valid and with one entry changed."""

import numpy as np
import pytest
import tvm
from tvm import tirx

from sparsetir.runtime.compiled_checks import PARALLEL_MIN, checks_module, compile_checks
from sparsetir.runtime import (ArgumentError, BufferParam, IndicesCheck, IndptrCheck,
                               ScalarParam, Signature, ValueDomainCheck)
from sparsetir.runtime.validate import run_checks
from ir_nodes import nodes

M, N, W, R = (tirx.Var(name, "int32") for name in ("m", "n", "w", "r"))
NNZ = tirx.Var("nnz", "int32")
ARRAYS = ("indptr", "indices", "ell", "etype")
SIGNATURE = Signature(
    params=(BufferParam("indptr", "int32", M + 1, False),
            BufferParam("indices", "int32", NNZ, False),
            BufferParam("ell", "int32", M * W, False),
            BufferParam("etype", "int32", NNZ, False),
            ScalarParam("m", M), ScalarParam("n", N), ScalarParam("nnz", NNZ),
            ScalarParam("w", W), ScalarParam("r", R)),
    checks=(IndptrCheck("indptr", NNZ),
            IndicesCheck("indices", N, "indptr", None, sorted=True),
            IndicesCheck("ell", N, None, W, sorted=True),
            ValueDomainCheck("etype", 0, R)))


@pytest.fixture(scope="module")
def checks():
    return compile_checks(SIGNATURE)


def _sorted_rows(rng, rows: int, n: int, lengths) -> np.ndarray:
    return np.concatenate([np.sort(rng.choice(n, size=k, replace=False)) for k in lengths]
                          + [np.zeros(0, np.int64)]).astype(np.int32)


def _case(rng) -> dict:
    m, n, w, r = int(rng.integers(0, 7)), int(rng.integers(1, 9)), int(rng.integers(1, 4)), 3
    w = min(w, n)
    lengths = rng.integers(0, n + 1, size=m) * (rng.random(m) < 0.7)      # empty rows
    arrays = {"indptr": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32),
              "indices": _sorted_rows(rng, m, n, lengths),
              "ell": _sorted_rows(rng, m, n, [w] * m)}
    arrays["etype"] = rng.integers(0, r, size=arrays["indices"].size).astype(np.int32)
    return arrays | {"m": m, "n": n, "nnz": int(lengths.sum()), "w": w, "r": r}


def _change_one(rng, case: dict) -> dict:
    name = ARRAYS[rng.integers(len(ARRAYS))]
    array = case[name].copy()
    if array.size:
        position = rng.integers(array.size)
        array[position] = rng.choice([array[position] - 1, array[position] + 1, -1,
                                      case["n"], array[max(position - 1, 0)], 10 ** 6])
    return case | {name: array}


def _numpy_accepts(case: dict) -> bool:
    env = {var: case[str(var)] for var in (M, N, NNZ, W, R)}
    try:
        run_checks(SIGNATURE.checks, {name: case[name] for name in ARRAYS}, env)
    except ArgumentError:
        return False
    return True


def _compiled_accepts(checks, case: dict) -> bool:
    values = [tvm.runtime.tensor(case[p.name]) if isinstance(p, BufferParam) else case[p.name]
              for p in SIGNATURE.params]
    return checks(values)


def test_compiled_checks_agree_with_numpy(checks):
    rng = np.random.default_rng(7)
    verdicts = []
    for _ in range(400):
        case = _case(rng)
        if rng.random() < 0.7:
            case = _change_one(rng, case)
        expected = _numpy_accepts(case)
        assert _compiled_accepts(checks, case) == expected, case
        verdicts.append(expected)
    assert 50 < sum(verdicts) < 350          # both verdicts were exercised


def _large_case(rng) -> dict:
    """Arrays past ``PARALLEL_MIN``, whose checks run in parallel parts."""
    m, n, w, r = PARALLEL_MIN // 4 + 3, 50, 5, 3
    lengths = rng.integers(0, 12, size=m) * (rng.random(m) < 0.8)           # empty rows
    indices = np.sort(rng.random((m, 12)).argsort(axis=1)[:, :12] % n, axis=1)
    arrays = {"indptr": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32),
              "indices": np.concatenate([row[:k] for row, k in zip(indices, lengths)])
              .astype(np.int32),
              "ell": np.sort(rng.permuted(np.tile(np.arange(n), (m, 1)), axis=1)[:, :w],
                             axis=1).reshape(-1).astype(np.int32)}
    arrays["etype"] = rng.integers(0, r, size=arrays["indices"].size).astype(np.int32)
    return arrays | {"m": m, "n": n, "nnz": int(lengths.sum()), "w": w, "r": r}


def test_compiled_checks_agree_with_numpy_in_parallel_parts(checks):
    """One changed entry anywhere in a long array (every part of the parallel loop, the last
    element included) is found as the numpy checks find it."""
    rng = np.random.default_rng(11)
    case = _large_case(rng)
    assert case["nnz"] >= PARALLEL_MIN and _numpy_accepts(case) and _compiled_accepts(checks, case)
    verdicts = []
    for _ in range(24):
        changed = _change_one(rng, case)
        expected = _numpy_accepts(changed)
        assert _compiled_accepts(checks, changed) == expected
        verdicts.append(expected)
    last = case["indices"].copy()
    last[-1] = case["n"]
    assert not _compiled_accepts(checks, case | {"indices": last})
    assert verdicts.count(False) > 12


def test_every_check_runs_in_one_parallel_loop():
    """All checks of a signature share one parallel loop (one launch, one barrier), its parts
    each counting a slice of every check; short arrays take the serial copy of that loop."""
    loops = [loop.kind for loop in nodes(checks_module(SIGNATURE), tirx.For)]
    assert loops.count(tirx.ForKind.PARALLEL) == 1
    # each copy: the loop over parts, a loop per sum (indptr 1, indices 2, ell 2, etype 1)
    # and the loop adding the parts' counts
    assert len(loops) == 2 * (1 + 6 + 1)


def test_a_falling_row_pointer_cannot_cancel_the_indices_count(checks):
    """Row pointers that fall (one failure) make a row start count twice in the indices'
    check (one more subtracted than there are descents): summed together the two would be
    0. Each check fails on its own count, so the arrays are refused."""
    case = {"indptr": np.array([0, 2, 1, 2, 4], np.int32),
            "indices": np.array([0, 3, 1, 2], np.int32),
            "ell": np.zeros(0, np.int32), "etype": np.zeros(4, np.int32),
            "m": 4, "n": 4, "nnz": 4, "w": 0, "r": 3}
    assert not _numpy_accepts(case) and not _compiled_accepts(checks, case)
