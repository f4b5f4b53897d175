"""Work for the spawned and new processes of ``test_saved_kernels``: each takes a kernel that
came through pickle (or a saved file) and calls it on ``csrmm_calls``'s arguments."""

import numpy as np

from csrmm_calls import call, make_args


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
