"""Arrays sparsetir hands to users that nobody can make writable.

An array that owns its memory can be made writable again (``a.flags.writeable = True``), so a
read-only flag alone does not keep a ``SparseTensor``'s or ``SparseMatrix``'s arrays from
changing under what was computed from them. ``frozen`` copies an array into an immutable bytes
object and gives a view of it: numpy refuses to make such a view writable, and the view's
``base`` is immutable too. (``torch.from_numpy`` ignores numpy's flag; that is why the arrays
kernels bind are kept apart, see ``SparseMatrix``.)

Example
-------
>>> import numpy as np
>>> a = frozen(np.arange(6).reshape(2, 3), np.int32)
>>> a.tolist(), a.flags.writeable
([[0, 1, 2], [3, 4, 5]], False)
>>> a.flags.writeable = True
Traceback (most recent call last):
...
ValueError: cannot set WRITEABLE flag to True of this array
"""

from __future__ import annotations

import numpy as np


class _Frozen(bytes):
    """The memory of ``frozen`` arrays: a bytes object of sparsetir's own type, so it is never
    one of the small bytes objects Python shares between unrelated users."""


def frozen(array, dtype=None) -> np.ndarray:
    """A copy of ``array`` (as ``dtype``: default its own, in the machine's byte order), same
    shape, that cannot be made writable; None stays None."""
    if array is None:
        return None
    array = np.asarray(array)
    dtype = np.dtype(dtype if dtype is not None else array.dtype).newbyteorder("=")
    contiguous = np.asarray(array, dtype, order="C")
    raw = _Frozen(contiguous.reshape(-1).view(np.uint8))     # one copy, into immutable bytes
    return np.frombuffer(raw, dtype).reshape(contiguous.shape)
