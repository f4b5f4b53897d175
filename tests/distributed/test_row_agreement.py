"""``row_agreement``: the formats the ranks' history predicts, how trailers settle an
exchange, and formats that tell apart shapes the first sizes do not."""

import pytest
import torch

from sparsetir.distributed.row_agreement import (RowAgreement, decode, describe, row_format,
                                                 trailer)
from sparsetir.errors import SparseTIRValueError


def fmt(*shape, dtype=torch.float32):
    return row_format(torch.zeros((2,) + shape, dtype=dtype))


@pytest.mark.parametrize("history, expected", [
    ([], None),
    ([fmt(8)], None),                                  # one call: no period yet
    ([fmt(8)] * 2, fmt(8)),
    ([fmt(8), fmt(4), fmt(8)], None),
    ([fmt(8), fmt(4)] * 2, fmt(8)),
    ([fmt(8)] * 6 + [fmt(4)], None),                   # the period just broke
    ([fmt(w) for w in range(1, 10)] * 2, None),        # period 9: longer than MAX_PERIOD
    ([fmt(w) for w in range(1, 9)] * 2, fmt(1)),
    ([fmt(8, dtype=torch.int32)] * 2, None),           # no dtype code: checked every time
])
def test_expected_continues_the_shortest_period(history, expected):
    agreement = RowAgreement()
    for seen in history:
        agreement.record(seen)
    assert agreement.expected() == expected


def test_settle_uses_rows_makes_again_or_refuses_on_every_rank():
    agreement = RowAgreement()
    assert agreement.settle(fmt(8), [(fmt(8), True)] * 3) is None
    assert agreement.history == [fmt(8)]
    assert agreement.settle(fmt(8), [(fmt(4), False)] * 3) == fmt(4)
    assert agreement.history == [fmt(8)]              # recorded when made again
    with pytest.raises(SparseTIRValueError, match=r"rank 0: rows of shape \(n, 8\) of "
                       r"torch.float32; rank 1: rows of shape \(n, 2, 2\) of torch.float64"):
        agreement.settle(fmt(8), [(fmt(8), True), (fmt(2, 2, dtype=torch.float64), False)])
    assert agreement.history == [fmt(8)]


def test_formats_tell_apart_shapes_past_the_sizes_they_list():
    assert fmt(1, 1, 1, 1, 2, 3) != fmt(1, 1, 1, 1, 3, 2)
    assert describe(fmt(1, 1, 1, 1, 2, 3)) == "rows of shape (n, 1, 1, 1, 1, ...) of torch.float32"
    assert fmt(8) != fmt(8, dtype=torch.float64) and fmt(8) != fmt(8, 1)


def test_a_trailer_reads_back():
    for shape, dtype, holds in (((7,), torch.float32, True), ((), torch.bfloat16, False),
                                ((3, 1, 4, 1, 5), torch.float64, True)):
        rows = torch.zeros((3,) + shape, dtype=dtype)
        assert decode(trailer(row_format(rows), holds)) == (row_format(rows), holds)
