"""Every error sparsetir raises, under one base: ``except sparsetir.SparseTIRError`` catches them.

Each class also keeps the builtin base it has always had (``ArgumentError`` is a ``ValueError``,
``SparseScriptError`` a ``SyntaxError``...), so code written against those keeps working. The
classes are grouped by the stage that raises them.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> issubclass(sparsetir.ArgumentError, (sparsetir.SparseTIRError, ValueError))
True
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X = np.ones((5, 16), np.float32)
>>> try:
...     sparsetir.ops.spmm(A, X.astype("float64"))
... except sparsetir.SparseTIRError as err:    # or TypeError, as before
...     print(type(err).__name__)
SparseTIRTypeError

Plain refusals of an argument's value or type are ``SparseTIRValueError`` /
``SparseTIRTypeError``; the classes below say more where a caller may want to tell them apart.
"""

import tvm_ffi
from tvm.s_tir import ScheduleError as _TVMScheduleError


class SparseTIRError(Exception):
    """The base of every sparsetir error."""


# Stage I: the script front end and Stage I -> Stage I rewrites

class SparseScriptError(SparseTIRError, SyntaxError):
    """A sparse kernel that cannot be parsed; the message names the line and the problem."""


class SparseScheduleError(SparseTIRError, ValueError, _TVMScheduleError):
    """A Stage I schedule primitive refused its arguments; the message says why. Also a
    ``tvm.s_tir.ScheduleError``, what TVM's own primitives raise (SparseTIR's Stage I
    primitives raised ``tvm.tir.ScheduleError``)."""


# Stage I -> Stage II: lowering

class LoweringError(SparseTIRError, ValueError):
    """A Stage I function that cannot be lowered; the message names the construct."""


class FormatRewriteError(LoweringError):
    """A rule that does not describe a rewrite of the function it is applied to."""


class MergeTooLargeError(LoweringError):
    """A co-iteration whose merge cases pass the emitter's limit (``lower.coiterate.emit.MAX_CASES``):
    raised while emitting, before anything is compiled."""


class LayoutError(SparseTIRError, ValueError):
    """A sparse buffer whose axes do not describe a storage layout."""


# Stage II -> Stage III and the backend

class InitPlacementError(SparseTIRError, ValueError):
    """A reduction whose init may not run and which TVM cannot decompose."""


class AtomicBlockError(SparseTIRError, ValueError):
    """An ``"atomic"`` block that cannot be compiled as asked."""


class HorizontalFusionError(LoweringError):
    """Nests that cannot share one launch."""


class BufferReferenceError(SparseTIRError, RuntimeError):
    """A buffer is used but never allocated, and no allocated buffer can stand for it."""


# Inputs every stage checks: the value or type of an argument

class SparseTIRValueError(SparseTIRError, ValueError):
    """An argument with a value sparsetir cannot take; the message names the argument."""


class SparseTIRTypeError(SparseTIRError, TypeError):
    """An argument of a type sparsetir cannot take; the message names the argument."""


# Calling a kernel, and the data given to it

class ArgumentError(SparseTIRError, ValueError):
    """An argument of a :class:`~sparsetir.runtime.Kernel` call is unusable.

    Raised before the compiled code runs, for a wrong dtype, length, device,
    type or count of arguments, or for index arrays that fail validation.
    The message names the offending parameter.

    Examples
    --------
    >>> import numpy as np, scipy.sparse, sparsetir
    >>> from sparsetir.ops.kernels import spmm       # params: a, x, y, indptr, indices, m, n, nnz
    >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
    >>> x, y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
    >>> try:
    ...     kernel(A.data, x, y, A.indptr.astype("int64"), A.indices, 6, 5, A.nnz)
    ... except ArgumentError as err:
    ...     print(err)
    argument 'indptr': dtype int64 does not match the kernel's int32
    """


class SparseTIRMemoryError(SparseTIRError, MemoryError):
    """A computation whose arrays cannot fit in this machine's memory, refused before they are
    allocated; the message names them, their bytes and the memory."""


class KernelFileError(SparseTIRError, ValueError):
    """A file given to ``sparsetir.load`` that is not what ``save`` wrote (damaged, cut short,
    altered, not a saved kernel) or that this installation cannot load (saved with another
    TVM); nothing of it is loaded.

    Examples
    --------
    >>> import sparsetir
    >>> with open("notes.txt", "w") as file:
    ...     _ = file.write("not a kernel")
    >>> sparsetir.load("notes.txt")
    Traceback (most recent call last):
    ...
    sparsetir.errors.KernelFileError: notes.txt is not a file saved by sparsetir (Kernel.save, AlgebraKernel.save, GroupedKernel.save)
    """


class KernelPathError(SparseTIRError, OSError):
    """A path ``sparsetir.load`` cannot read or ``save`` cannot write (missing, a directory,
    not writable): ``errno`` and ``filename`` are the path's, and the error raised is also the
    builtin ``OSError`` subclass of its problem (``FileNotFoundError``, ``IsADirectoryError``,
    ``PermissionError``, ...), so ``except FileNotFoundError`` keeps working.

    Examples
    --------
    >>> import sparsetir
    >>> sparsetir.load("missing.stk")
    Traceback (most recent call last):
    ...
    sparsetir.runtime.saved.KernelPathFileNotFoundError: [Errno 2] sparsetir.load cannot read the saved kernel: No such file or directory: 'missing.stk'
    >>> try:
    ...     sparsetir.load("missing.stk")
    ... except KernelPathError as err:             # the class above is KernelPathError and FileNotFoundError
    ...     print(isinstance(err, FileNotFoundError), err.errno, err.filename)
    True 2 missing.stk
    """


class FormatTypeError(SparseTIRError, TypeError, ValueError):
    """An argument of the wrong kind (float or bool indices, a size of 2.5, integer values):
    a ``TypeError`` that is also the ``ValueError`` every check here raises."""


# sparsetir.distributed

class PartitionFileError(SparseTIRError, ValueError):
    """A saved partition (``sparsetir.distributed.load``) that cannot be read as it was
    written: a missing, truncated, corrupt or foreign part file, or a rank it does not have."""


class CommunicationError(SparseTIRError, RuntimeError):
    """A collective of ``sparsetir.distributed`` that failed or timed out (a peer that died or
    hangs); the message names this rank, the operation and, where known, the peer."""


ARGUMENT_ERROR_KIND = "sparsetir.ArgumentError"
"""The error kind of every check compiled into a kernel (``tirx.AssertStmt``'s kind). It is
registered with tvm-ffi (``tvm_ffi.register_error``), which then raises an error of that kind
coming out of compiled code as an :class:`ArgumentError` with the assertion's message: no
message is parsed."""

tvm_ffi.register_error(ARGUMENT_ERROR_KIND, ArgumentError)

# An error raised inside a tvm.transform pass (or any FFI callback) crosses tvm-ffi by its kind,
# the class name; registered, it comes back out of the pass as the same class.
for _error in (SparseTIRValueError, SparseTIRTypeError, SparseScriptError, SparseScheduleError,
               LoweringError, FormatRewriteError, MergeTooLargeError,
               LayoutError, InitPlacementError, AtomicBlockError,
               HorizontalFusionError, BufferReferenceError, FormatTypeError,
               PartitionFileError, CommunicationError):
    tvm_ffi.register_error(_error.__name__, _error)
