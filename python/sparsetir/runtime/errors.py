"""The exception raised for arguments a compiled kernel cannot safely take."""


class ArgumentError(ValueError):
    """An argument of a :class:`~sparsetir.runtime.Kernel` call is unusable.

    Raised before the compiled code runs, for a wrong dtype, length, device,
    type or count of arguments, or for index arrays that fail validation.
    The message names the offending parameter.

    Examples
    --------
    >>> try:
    ...     kernel(indptr.astype("int64"), indices, data, x, y, m, n, nnz)
    ... except ArgumentError as err:
    ...     print(err)
    argument 'indptr': dtype int64 does not match the kernel's int32
    """


CHECK_PREFIX = "sparsetir: "
"""Start of the message of every check compiled into a kernel; the call turns such an error
into an ``ArgumentError``."""
