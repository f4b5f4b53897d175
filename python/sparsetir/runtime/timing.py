"""Wall-clock timing of whole calls, as the examples and benchmarks report them.

Example
-------
>>> seconds = median_seconds(lambda: sum(range(1000)), repeat=5)
>>> seconds > 0
True
"""

from __future__ import annotations

import time

import numpy as np


def median_seconds(fn, repeat: int = 20) -> float:
    """Median wall time of ``fn()`` over ``repeat`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
