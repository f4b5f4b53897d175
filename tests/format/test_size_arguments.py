"""Every size argument of every ``sparsetir.format`` routine is refused by its own name, and no
size reaches numpy's allocator past ``MAX_ELEMENTS`` (2**40 elements): the routine computes
what it would build, exactly, and refuses it with a ``ValueError`` naming the argument and the
size it would need (it was ``MemoryError: 8 TiB``, or ``OverflowError`` past int64)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from sparsetir.format import (column_part_hyb, condense, csf_to_ell3d, csr_pad, csr_to_bsr,
                              csr_to_ell, row_tiles)

# two rows, one nonzero each, one column
IP, IX, D, SHAPE = [0, 1, 2], [0, 0], [1.0, 2.0], (2, 1)

# (routine, argument) -> the routine called with that argument set to v, the others valid
CALLS = {
    ("csr_to_bsr", "shape[0]"): "csr_to_bsr(IP, IX, D, (v, 1), 2)",
    ("csr_to_bsr", "shape[1]"): "csr_to_bsr(IP, IX, D, (2, v), 2)",
    ("csr_to_bsr", "bs"): "csr_to_bsr(IP, IX, D, SHAPE, v)",
    ("csr_to_ell", "shape[0]"): "csr_to_ell(IP, IX, D, (v, 1), [1])",
    ("csr_to_ell", "shape[1]"): "csr_to_ell(IP, IX, D, (2, v), [1])",
    ("csr_to_ell", "buckets"): "csr_to_ell(IP, IX, D, SHAPE, [v])",
    ("csr_pad", "shape[0]"): "csr_pad(IP, IX, D, (v, 1), 2)",
    ("csr_pad", "shape[1]"): "csr_pad(IP, IX, D, (2, v), 2)",
    ("csr_pad", "multiple"): "csr_pad(IP, IX, D, SHAPE, v, idtype=np.int64)",
    ("column_part_hyb", "num_rows"): "column_part_hyb(v, 1, IP, IX, 1, [1])",
    ("column_part_hyb", "num_cols"): "column_part_hyb(2, v, IP, IX, 1, [1])",
    ("column_part_hyb", "num_col_parts"): "column_part_hyb(2, 1, IP, IX, v, [1])",
    ("column_part_hyb", "buckets"): "column_part_hyb(2, 1, IP, IX, 1, [v])",
    ("condense", "tile"): "condense(IP, IX, v, 2)",
    ("condense", "group"): "condense(IP, IX, 2, v)",
    ("condense", "num_cols"): "condense(IP, IX, 2, 2, num_cols=v)",
    ("csf_to_ell3d", "buckets"): "csf_to_ell3d([0, 2], [0, 1], IP, IX, [v])",
    ("csf_to_ell3d", "rows_per_block"): "csf_to_ell3d([0, 2], [0, 1], IP, IX, [2], rows_per_block=v)",
    ("row_tiles", "num_rows"): "row_tiles([0, 1], v, 1)",
    ("row_tiles", "tile_rows"): "row_tiles([0, 1], 2, v)",
}


NAMESPACE = dict(np=np, IP=IP, IX=IX, D=D, SHAPE=SHAPE, **{f.__name__: f for f in (
    column_part_hyb, condense, csf_to_ell3d, csr_pad, csr_to_bsr, csr_to_ell, row_tiles)})


def _call(routine, arg, v):
    return eval(CALLS[routine, arg], NAMESPACE, {"v": v})   # noqa: S307 (our own table)


@pytest.mark.parametrize("routine, arg", CALLS)
@pytest.mark.parametrize("value", [True, 17.0, 2.5, -1])
def test_a_bad_size_is_refused_by_the_callers_own_name(routine, arg, value):
    """column_part_hyb and condense called num_rows / num_cols shape[0] / shape[1]."""
    with pytest.raises(ValueError) as refused:       # FormatTypeError is also a ValueError
        _call(routine, arg, value)
    assert str(refused.value).startswith(arg), str(refused.value)
    assert isinstance(refused.value, TypeError) == (value != -1)


# (routine, argument, value, what the refusal must say besides the argument's name)
HUGE = [
    ("csr_to_bsr", "bs", 2**20, "bs = 1048576: 1 blocks of bs x bs would need 1099511627776"),
    ("csr_to_bsr", "bs", 2**64, "a dimension of the output"),
    ("csr_to_ell", "buckets", 2**39, "buckets[0] = 549755813888: 2 ELL rows of that width "
                                     "would need 1099511627776"),
    ("csr_to_ell", "buckets", 2**64, "below 2**40"),
    ("csr_pad", "multiple", 2**40, "multiple = 1099511627776 would need 2199023255552"),
    ("csr_pad", "multiple", 2**64, "more than idtype int64 holds"),
    ("column_part_hyb", "num_col_parts", 2**40, "1099511627776 EllBuckets"),
    ("column_part_hyb", "buckets", 2**39, "would need 1099511627776"),
    ("column_part_hyb", "num_rows", 2**64, "num_rows = 18446744073709551616 rows needs"),
    ("condense", "tile", 2**64, "a dimension of the output"),
    ("condense", "group", 2**40, "a dimension of the output"),
    ("condense", "group", 2**39, "group = 549755813888: 1 groups of tile x group would need "
                                 "1099511627776"),
    ("csf_to_ell3d", "buckets", 2**39, "would need 1099511627776"),
    ("csf_to_ell3d", "rows_per_block", 2**40, "a dimension of the output"),
    ("csf_to_ell3d", "rows_per_block", 2**39, "rows_per_block = 549755813888, buckets[0] = 2: "
                                              "1 blocks"),
    ("row_tiles", "num_rows", 2**40, "tile_rows = 1: a tile_indptr of 1099511627777 entries"),
]

# Run in a child whose address space is capped at 4 GiB: a refusal that comes too late is a
# MemoryError there (np.zeros of 1 TiB would otherwise succeed lazily), not a swapping machine.
CHILD = """
import json, resource, sys
import numpy as np
from sparsetir.format import *
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
IP, IX, D, SHAPE = [0, 1, 2], [0, 0], [1.0, 2.0], (2, 1)
out = []
for call, v in json.loads(sys.stdin.read()):
    try:
        eval(call, globals(), {"v": v})
        out.append(["returned", ""])
    except Exception as err:
        out.append(["ValueError" if isinstance(err, ValueError) else type(err).__name__,
                    str(err)])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def huge_refusals():
    cases = [[CALLS[routine, arg], v] for routine, arg, v, _ in HUGE]
    done = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(cases), text=True,
                          capture_output=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", range(len(HUGE)),
                         ids=[f"{r}-{a}-{v}" for r, a, v, _ in HUGE])
def test_an_absurd_size_is_refused_by_name_before_allocating(huge_refusals, case):
    routine, arg, _, says = HUGE[case]
    kind, message = huge_refusals[case]
    assert kind == "ValueError", (kind, message)
    assert arg in message and says in message, message


def test_sizes_past_int64_that_build_little_still_work():
    """Divisors and paddings past int64 overflowed numpy; what they build is small."""
    assert row_tiles([0, 1, 2], 3, 2**64).tolist() == [0, 3]
    assert row_tiles([0, 2], 2**65, 2**64).tolist() == [0, 2, 2]
    ip, ix, mask, data = csr_pad([0, 0], [], [], (1, 1), 2**64)
    assert ip.tolist() == [0, 0] and ix.size == mask.size == data.size == 0
    parts = column_part_hyb(2, 2**100, IP, [0, 2**62], 3, [1], idtype=np.int64)
    assert parts[0][0].col_indices.tolist() == [[0], [2**62]]
    assert all(b.row_indices.size == 0 for part in parts[1:] for b in part)
    gi, ti, mask = condense(IP, IX, 1, 1, num_cols=2**100)
    assert gi.tolist() == [0, 1, 2] and ti.tolist() == [[0], [0]]


def test_the_limit_counts_elements_not_sizes():
    """An empty matrix in blocks of 2**20 x 2**20 builds an empty array, and passes."""
    assert csr_to_bsr([0, 0], [], [], (1, 1), 2**20)[2].shape == (0, 2**20, 2**20)
