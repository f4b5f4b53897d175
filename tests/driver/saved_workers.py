"""Work for the spawned and new processes of ``test_saved_kernels`` (and ``test_compile_log``):
each takes a kernel that came through pickle (or a saved file) and calls it on
``csrmm_calls``'s arguments; ``CHILD_PATH`` is the ``PYTHONPATH`` such a process gets."""

import os
from pathlib import Path

import numpy as np

import sparsetir
from csrmm_calls import call, make_args

# what a child process needs on its path: this sparsetir, this folder and tests/ (not the whole
# sys.path of the pytest worker, which may hold folders whose modules shadow standard ones)
CHILD_PATH = os.pathsep.join(str(folder) for folder in (
    Path(sparsetir.__file__).resolve().parents[1], Path(__file__).resolve().parent,
    Path(__file__).resolve().parents[1]))


def spmm_error(kernel) -> float:
    """The largest difference between the kernel's result and scipy's (NaN-filled output)."""
    args = make_args()
    return float(np.abs(call(kernel, args) - args["expected"]).max())


def refuses_bad_indices(kernel) -> bool:
    """Whether the kernel still checks its index arrays (an index past the columns)."""
    import sparsetir  # pylint: disable=import-outside-toplevel
    args = make_args()
    indices = args["indices"].copy()
    indices[0] = 99
    try:
        call(kernel, args, indices=indices)
    except sparsetir.ArgumentError:
        return True
    return False
