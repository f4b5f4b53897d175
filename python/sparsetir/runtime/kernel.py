"""A compiled kernel that converts and checks its arguments before every call."""
from __future__ import annotations

import copy
import sys
from functools import lru_cache

import numpy as np
import tvm

from .acceptance import BFLOAT16_BITS, acceptance
from .aliasing import byte_ranges, check_no_aliasing
from .arguments import (BufferConverter, ScalarConverter, host_array, in_dual_level, is_sealed,
                        outgrows_storage, private_copy, writes_inference_tensor)
from ..errors import ArgumentError, SparseTIRTypeError, SparseTIRValueError
from .fast_path import FastPath
from .saved import save
from .signature import BufferParam, IndicesCheck, ScalarParam, Signature
from .threads import SERIAL_BYTES, size_launches
from .validate import run_checks


class Kernel:
    """A compiled kernel callable with numpy arrays, torch tensors and tvm tensors.

    Every call checks each argument against the signature (count, dtype,
    length, shape of a multi-dimensional argument, device, integer scalars,
    sizes that fit the kernel's index type, no written buffer overlapping
    another argument), stages data that is not contiguous or not aligned as
    the compiled code assumes, optionally validates the index arrays, runs the
    compiled function and copies staged written buffers back, so results
    land in the caller's arrays; torch tensors it wrote get their version
    counter bumped, so autograd notices.  Bad arguments raise
    :class:`~sparsetir.runtime.ArgumentError` before any compiled code runs.

    Parameters
    ----------
    executable : tvm.runtime.Executable
        Result of ``tvm.compile``.
    signature : Signature
        The entry function's parameters and index checks.
    device : str
        ``"cpu"`` or ``"cuda"`` (``"cuda:1"`` picks another GPU).  Construction
        needs no such device; calling does.
    entry : str
        Name of the function to call.
    alignment : int or "element"
        Byte alignment the compiled function assumes for its buffers: ``"element"`` (the
        element size, as ``sparsetir.build`` declares them) or a number (64 for a function
        TVM compiled with its default buffers).
    compiled_checks : callable or None
        The signature's index checks compiled for the host (``compiled_checks``): called
        with the converted arguments, it returns False when a check fails, and the numpy
        checks (``validate``) then say which. Without it the numpy checks run on every
        validated call.
    origin : object or None
        What the kernel was made of, for ``save`` and pickling (``sparsetir.build`` gives a
        ``driver.portable.KernelOrigin``); a kernel made by hand has none and cannot be saved.

    Attributes
    ----------
    executable : tvm.runtime.Executable
    signature : Signature
    device : tvm.runtime.Device
    entry : str

    Examples
    --------
    A Stage III module of sparsetir (``lower_sparse_buffer``) compiled by TVM, with the signature
    read from it (what ``sparsetir.build`` does, with a schedule and compiled checks):

    >>> import numpy as np, scipy.sparse, sparsetir
    >>> from sparsetir.driver.build_module import signature_of
    >>> from sparsetir.ops.kernels import spmm                  # Y = A @ X over CSR
    >>> mod = sparsetir.lower_sparse_buffer(sparsetir.lower_sparse_iter(
    ...     spmm.specialize({"feat_size": 16})))
    >>> kernel = Kernel(tvm.compile(mod, "llvm"), signature_of(mod["main"]))
    >>> [param.name for param in kernel.signature.params]
    ['a', 'x', 'y', 'indptr', 'indices', 'm', 'n', 'nnz']
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
    >>> X, Y = np.ones((5, 16), np.float32), np.empty((6, 16), np.float32)
    >>> kernel(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)   # Y now holds A @ X
    >>> np.allclose(Y, A @ X)
    True
    >>> kernel(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz, validate=False)  # no index checks
    >>> seconds = kernel.time(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
    >>> kernel.save("spmm.stk")                 # made by hand: no origin to save
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRTypeError: this Kernel was made by hand from an executable: ...
    >>> built = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
    >>> built.save("spmm.stk"); same = sparsetir.load("spmm.stk")   # pickle works too
    """

    def __init__(self, executable: tvm.runtime.Executable, signature: Signature, device: str = "cpu",
                 entry: str = "main", alignment="element", compiled_checks=None, origin=None):
        self.executable = executable
        self._origin = origin
        self.signature = signature
        self.device = tvm.device(device)
        self.entry = entry
        self._function = None
        self._compiled_checks = compiled_checks
        params = signature.params
        self._scalars = [(i, ScalarConverter(p)) for i, p in enumerate(params) if isinstance(p, ScalarParam)]
        self._buffers = [(i, p) for i, p in enumerate(params) if isinstance(p, BufferParam)]
        self._alignment = alignment
        self._scalar_vars = tuple(convert.param.var for _, convert in self._scalars)
        checked = {check.param for check in signature.checks}
        checked.update(check.indptr for check in signature.checks
                       if isinstance(check, IndicesCheck) and check.indptr is not None)
        self._checked = [(param.name, i) for i, param in enumerate(params) if param.name in checked]
        self._argument_checks = ()
        self._converters = lru_cache(maxsize=256)(self._make_converters)
        self._written = [i for i, param in self._buffers if param.written]

    def __call__(self, *args, validate: bool = True) -> None:
        """Run the kernel; written buffers receive the results in place.

        Parameters
        ----------
        *args
            One argument per signature parameter, in order.
        validate : bool
            Run the signature's index checks (O(nnz)).  All other checks always run.

        Raises
        ------
        ArgumentError
            For any unusable argument; nothing has run then.
        RuntimeError
            If the kernel's device is not available.
        """
        self._entry_function()          # no device: say so before converting anything
        size_launches(sum(map(_nbytes, args)), _has_torch(args))   # the checks' loops too
        values, copy_backs = self._convert(args, validate)
        self._invoke(values, copy_backs, args)

    def save(self, path) -> None:
        """Write the kernel to the file ``path``: ``sparsetir.load(path)`` gives it back, in
        any process of a machine with the same CPU (or GPU) kind, TVM and tvm-ffi, with the
        same call contract (signature, index and argument checks), verified first
        (``runtime.saved``).

        Example
        -------
        >>> import numpy as np, scipy.sparse, sparsetir
        >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
        >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
        >>> args = (A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
        >>> kernel.save("spmm16.stk")
        >>> sparsetir.load("spmm16.stk")(*args)       # as kernel(*args)
        >>> np.allclose(Y, A @ X)
        True
        """
        save(self, path)

    def __reduce__(self):
        """Pickled as the kernel's libraries, Stage III module and argument checks
        (``driver.portable``), for ``torch.multiprocessing`` spawn and DataLoader workers."""
        if self._origin is None:
            raise SparseTIRTypeError(
                "this Kernel was made by hand from an executable: only kernels made by "
                "sparsetir.build (and so sparsetir.ops and sparsetir.algebra) can be saved or "
                "pickled")
        return self._origin.reduced(self._argument_checks)

    def take_code(self, other: "Kernel") -> None:
        """Run ``other``'s compiled code from now on: a kernel of the same signature, made of
        the same module for another CPU (``driver.upgrade`` swaps a prebuilt kernel for the one
        compiled for this machine). Kernels bound before (``bind``) follow at their next call.

        Example
        -------
        >>> import sparsetir
        >>> from sparsetir.ops.kernels import spmm
        >>> from tvm.target.codegen import llvm_get_system_cpu
        >>> spmm16 = spmm.specialize({"feat_size": 16})
        >>> prebuilt = sparsetir.build(spmm16, "llvm")          # for any CPU of the kind
        >>> host_tuned = sparsetir.build(spmm16, {"kind": "llvm", "mcpu": llvm_get_system_cpu()})
        >>> prebuilt.take_code(host_tuned)       # same arguments, same results, faster code
        """
        if repr(other.signature) != repr(self.signature) or other.device != self.device:
            raise SparseTIRValueError("take_code needs a kernel of the same signature and "
                                      "device")
        function = other._entry_function()
        self.executable, self._origin = other.executable, other._origin
        self._compiled_checks = other._compiled_checks
        self._function = function              # last: a call now runs the new code

    def __copy__(self) -> "Kernel":
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def __deepcopy__(self, memo) -> "Kernel":
        return self            # nothing in a kernel changes after it is made

    def bind(self, validate: bool = True, **fixed) -> "BoundKernel":
        """Fix some arguments once, for a kernel called many times on the same sparse data.

        The fixed arguments are converted and checked now (index checks included, unless
        ``validate=False``), and kept: each call of the result converts only the remaining
        arguments, which are still checked as in a full call (dtype, shape, device, no
        written buffer overlapping any argument, the fixed ones included).  Every scalar
        parameter and every array the index checks read must be fixed; a buffer the
        kernel writes cannot be.  The kernel keeps a private copy of each fixed array, the
        one checked, so changing the caller's array later changes nothing; only an array over
        sparsetir's sealed memory (``runtime.arguments.sealed``, as ``SparseMatrix`` keeps the
        arrays its kernels read) is used as it is.

        Returns
        -------
        BoundKernel
            Callable with the remaining parameters, in signature order.

        Examples
        --------
        >>> import numpy as np, scipy.sparse, sparsetir
        >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
        >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
        >>> spmm_a = kernel.bind(a=A.data, indptr=A.indptr, indices=A.indices, m=6, n=5, nnz=A.nnz)
        >>> spmm_a.parameters
        ['x', 'y']
        >>> spmm_a(X, Y)        # as kernel(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
        >>> np.allclose(Y, A @ X)
        True
        """
        return BoundKernel(self, fixed, validate)

    def _invoke(self, values: list, copy_backs: list, args) -> None:
        """Run the compiled function on converted ``values``, then copy staged results back
        and bump the versions of the torch tensors among ``args`` that it wrote."""
        self._run(values)
        for copy_back in copy_backs:
            copy_back()
        self._bump_versions(args)

    def _run(self, values: list) -> None:
        """Run the compiled function on converted ``values``. A check compiled into the kernel
        that fails raises ArgumentError itself (its error kind, ``errors.ARGUMENT_ERROR_KIND``,
        is registered with tvm-ffi)."""
        self._entry_function()(*values)

    def time(self, *args, number: int = 20, repeat: int = 3) -> float:
        """Mean seconds per call, measured with TVM's time evaluator.

        Arguments are converted and validated once, outside the timed region.
        The kernel runs ``number * repeat`` times (plus a warm-up run), so a
        kernel that accumulates into its output leaves the sum of all runs there.

        Parameters
        ----------
        *args
            As for a call.
        number : int
            Runs averaged in one measurement.
        repeat : int
            Measurements taken; the result is their mean.

        Returns
        -------
        float
            Mean time of one call in seconds.

        Examples
        --------
        >>> import numpy as np, scipy.sparse, sparsetir
        >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
        >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
        >>> args = (A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
        >>> print(f"one call: {kernel.time(*args) * 1e6:.1f} us")
        one call: ... us
        """
        self._entry_function()
        size_launches(sum(map(_nbytes, args)), _has_torch(args))   # timed as a call runs
        values, copy_backs = self._convert(args, validate=True)
        return self._time_values(values, copy_backs, number, repeat)

    def _time_values(self, values: list, copy_backs: list, number: int, repeat: int) -> float:
        timer = self.executable.jit().time_evaluator(self.entry, self.device, number=number, repeat=repeat)
        seconds = timer(*values).mean
        for copy_back in copy_backs:
            copy_back()
        return seconds

    def inspect_source(self, fmt: str = "ll") -> str:
        """Generated code: the source of the imported module of kind `fmt` (``"cuda"``),
        otherwise the host module's source in format `fmt` (``"ll"``, ``"asm"``).

        Examples
        --------
        >>> import sparsetir
        >>> from sparsetir.ops.kernels import spmm
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> "define" in kernel.inspect_source("ll")
        True
        """
        host = self.executable.mod
        source = next((module.inspect_source() for module in host.imports
                       if module.kind == fmt), None)
        source = host.inspect_source(fmt) if source is None else source
        if not source:
            raise SparseTIRValueError(
                f"this kernel holds no {fmt!r} source: it was loaded from a compiled library "
                "(the disk cache, build(..., cache=True), or a saved kernel), which keeps "
                "machine code only; build it with cache=False to read the generated code")
        return source

    def with_argument_check(self, check, reads) -> "Kernel":
        """This kernel with one more check of its arguments, for an assumption its signature
        cannot state (a format's own rule, e.g. that the hyb kernel's row tiles never share a
        row). ``check(arguments)`` gets the parameters ``reads`` by name (arrays as numpy,
        scalars as ints) whenever the index checks run (``validate=True``, and once at
        ``bind``, which must then fix them) and raises ``ValueError`` naming the argument; the
        call raises it as an ``ArgumentError`` before any compiled code runs.

        Example
        -------
        >>> import numpy as np, scipy.sparse, sparsetir
        >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
        >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
        >>> def short_rows(a):          # an assumption of the caller: rows of <= 4 nonzeros
        ...     if np.diff(a["indptr"]).max() > 4:
        ...         raise ValueError("indptr: a row holds more than 4 nonzeros")
        >>> checked = kernel.with_argument_check(short_rows, ["indptr"])
        >>> B = scipy.sparse.csr_matrix(np.ones((6, 5), np.float32))     # rows of 5
        >>> checked(B.data, X, Y, B.indptr, B.indices, 6, 5, B.nnz)
        Traceback (most recent call last):
        ...
        sparsetir.errors.ArgumentError: indptr: a row holds more than 4 nonzeros
        >>> kernel(B.data, X, Y, B.indptr, B.indices, 6, 5, B.nnz)     # the kernel itself runs it
        """
        names = [param.name for param in self.signature.params]
        unknown = sorted(set(reads) - set(names))
        if unknown:
            raise SparseTIRValueError(f"the kernel has no parameter {', '.join(unknown)}")
        kernel = copy.copy(self)
        kernel._argument_checks = (*self._argument_checks, (check, tuple(reads)))
        kernel._checked = self._checked + [(name, names.index(name)) for name in reads
                                           if name not in dict(self._checked)]
        return kernel

    def _entry_function(self):
        if self._function is None:
            if not self.device.exist:
                raise RuntimeError(f"this kernel runs on {self.device}, but no such device is available")
            self._function = self.executable[self.entry]
        return self._function

    def _make_converters(self, scalars: tuple) -> tuple:
        """A converter per buffer parameter, holding its ``Acceptance`` for these scalar
        arguments."""
        env = dict(zip(self._scalar_vars, scalars))
        return tuple(BufferConverter(acceptance(param, i, env, self.device, self._alignment))
                     for i, param in self._buffers)

    def _convert(self, args: tuple, validate: bool) -> tuple[list, list]:
        """Convert all arguments; return the values to pass and the copy-backs to run after the call."""
        params = self.signature.params
        if len(args) != len(params):
            names = ", ".join(param.name for param in params)
            raise ArgumentError(f"the kernel takes {len(params)} arguments ({names}), got {len(args)}")
        values = list(args)
        for i, convert in self._scalars:
            values[i] = convert(args[i])
        scalars = tuple(values[i] for i, _ in self._scalars)
        copy_backs, passed = self._convert_buffers(self._converters(scalars), args, values)
        check_no_aliasing(byte_ranges(passed))
        if validate and self._checked:
            self._validate(values, args, scalars)
        return values, copy_backs

    @staticmethod
    def _convert_buffers(converters, args, values: list) -> tuple[list, list]:
        """Convert ``args[i]`` into ``values[i]`` for the position ``i`` of each converter;
        return the copy-backs and what passed as is."""
        copy_backs, passed = [], []
        for convert in converters:
            i = convert.accept.position
            values[i], copy_back = convert(args[i])
            if copy_back is not None:
                copy_backs.append(copy_back)
            else:  # passed as is (a staged input is a private copy: no overlap possible)
                passed.append((convert.accept, values[i], convert.accept.itemsize))
        return copy_backs, passed

    def _validate(self, values: list, args, scalars: tuple) -> None:
        """Run the index checks, then the argument checks, on the converted ``values``
        (``args``: as the caller gave them)."""
        if self._compiled_checks is None or not self._compiled_checks(values):
            arrays = {name: host_array(args[i]) for name, i in self._checked}
            run_checks(self.signature.checks, arrays, dict(zip(self._scalar_vars, scalars)))
            if self._compiled_checks is not None:
                raise ArgumentError("the index arrays failed the kernel's compiled checks")
        scalar_positions = {i for i, _ in self._scalars}
        for check, reads in self._argument_checks:
            named = {name: values[i] if i in scalar_positions else host_array(args[i])
                     for name, i in self._checked if name in reads}
            try:
                check(named)
            except ValueError as err:
                raise ArgumentError(str(err)) from None

    def _bump_versions(self, args) -> None:
        """Tell autograd that the torch tensors this kernel wrote have changed."""
        torch = sys.modules.get("torch")
        if torch is None:
            return
        for i in self._written:
            if isinstance(args[i], torch.Tensor):
                torch.autograd.graph.increment_version(args[i])


def _has_torch(args) -> bool:
    """Whether any of a call's arguments is a torch tensor (the call is part of a torch
    program: ``threads.size_launches`` runs it on torch's threads)."""
    torch = sys.modules.get("torch")
    return torch is not None and any(isinstance(value, torch.Tensor) for value in args)


def _nbytes(value) -> int:
    """The bytes of an array argument (a numpy array or a dense torch tensor), 0 for a scalar,
    ``SERIAL_BYTES`` for anything else (counted as large: its launches keep their team). Never
    raises: an argument the call will refuse is refused there, by name."""
    if type(value) is np.ndarray:
        return value.nbytes
    if isinstance(value, (int, float, np.generic)):
        return 0
    torch = sys.modules.get("torch")
    if torch is not None and type(value) is torch.Tensor:
        try:
            if value.layout == torch.strided:
                return value.numel() * value.element_size()
        except (RuntimeError, TypeError):
            pass
    return SERIAL_BYTES


def torch_as_numpy(args: tuple):
    """``args`` with every torch tensor replaced by the numpy array over its memory (a
    bfloat16 tensor, which numpy has no dtype for, by the uint16 view of its bits:
    ``acceptance.BFLOAT16_BITS``), or None when there is none, torch refuses one (see
    ``BoundKernel.call_fast``), one requires grad (the bits' view would not) or a forward-mode
    dual level is open (the general path refuses such tensors by name), or an argument is a
    uint16 tensor or array (which the views of bfloat16 bits could be taken for). For the C
    plan of torch calls (``BoundKernel.call_native(..., torch_views=True)``).

    Example
    -------
    >>> import torch
    >>> x = torch.ones(3, dtype=torch.bfloat16)
    >>> torch_as_numpy((x, np.zeros(3, np.float32)))[0].dtype
    dtype('uint16')
    """
    torch = sys.modules.get("torch")
    if torch is None or in_dual_level():
        return None
    arrays, found = [], False
    for value in args:
        if type(value) is torch.Tensor:
            try:      # a functorch or sparse tensor has no pointer or storage to read
                if not value.data_ptr() or outgrows_storage(value) or value.requires_grad \
                        or value.dtype is torch.uint16:      # numpy() would not see it
                    return None
                value = value.view(torch.uint16).numpy() if value.dtype is torch.bfloat16 \
                    else value.numpy()
            except (RuntimeError, TypeError):
                return None
            found = True
        elif getattr(value, "dtype", None) == BFLOAT16_BITS:
            return None
        arrays.append(value)
    return arrays if found else None


class _Protected:
    """A protected array in alias checks (``BoundKernel.protect``): named, never written."""
    written = False

    def __init__(self, name: str):
        self.name = name


class BoundKernel:
    """A :class:`Kernel` with some arguments converted and checked once (``Kernel.bind``).

    Calls take the remaining parameters in signature order and cost their conversion only.

    Examples
    --------
    >>> import numpy as np, scipy.sparse, sparsetir
    >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
    >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
    >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
    >>> spmm_a = kernel.bind(a=A.data, indptr=A.indptr, indices=A.indices, m=6, n=5, nnz=A.nnz)
    >>> spmm_a(X, Y)                       # converts and checks X and Y only
    >>> np.allclose(Y, A @ X)
    True
    """

    def __init__(self, kernel: Kernel, fixed: dict, validate: bool):
        params = kernel.signature.params
        names = [param.name for param in params]
        unknown = sorted(set(fixed) - set(names))
        if unknown:
            raise SparseTIRValueError(f"the kernel has no parameter {', '.join(unknown)} "
                             f"(its parameters: {', '.join(names)})")
        unbound = [convert.param.name for _, convert in kernel._scalars
                   if convert.param.name not in fixed]
        unbound += [name for name, _ in kernel._checked if validate and name not in fixed]
        if unbound:
            raise SparseTIRValueError(f"bind {', '.join(unbound)} too: a bound kernel needs every "
                             "scalar and every array its index checks read")
        written = [name for name in fixed if getattr(params[names.index(name)], "written", False)]
        if written:
            raise SparseTIRValueError(f"the kernel writes {', '.join(written)}: pass it at each call")
        kernel._entry_function()        # no device: say so before converting anything
        self.kernel = kernel
        self._values = [fixed.get(name) for name in names]
        scalars = []
        for i, convert in kernel._scalars:
            self._values[i] = convert(fixed[names[i]])
            scalars.append(self._values[i])
        converters = kernel._converters(tuple(scalars))
        bound = [c for c in converters if c.accept.name in fixed]
        self._free = [c for c in converters if c.accept.name not in fixed]
        args = [fixed.get(name) for name in names]
        # staged copies of fixed inputs are kept with the values; nothing is written back
        _, passed = Kernel._convert_buffers(bound, args, self._values)
        # a written argument must not overlap the caller's fixed arrays either: their memory
        # is kept (``passed``: torch's old storage too, when a tensor is given a new one), so
        # the ranges stay theirs
        self._fixed_ranges = byte_ranges(passed)
        self._fixed_args, self._caller_memory = args, passed
        check_no_aliasing(self._fixed_ranges)
        # the kernel reads its own copy of each bound array: the caller may change theirs
        for i in (c.accept.position for c in bound):
            if not is_sealed(args[i]):
                self._values[i] = private_copy(self._values[i])
        if validate and kernel._checked:   # checked after the copy: what the kernel will read
            kernel._validate(self._values, self._values, tuple(scalars))
        self._free_positions = [c.accept.position for c in self._free]
        self.parameters = [params[i].name for i in self._free_positions]
        self._code = kernel._function
        self._fast = self._fast_path()
        self._written_free = [k for k, c in enumerate(self._free) if c.accept.written]
        self._fixed_bytes = sum(_nbytes(fixed[name]) for name in fixed)

    def __reduce__(self):
        raise SparseTIRTypeError(
            "a bound kernel is not pickled (it holds pointers into this process): pickle its "
            "Kernel (bound.kernel) and the arrays, and bind them again where they arrive")

    def protect(self, **arrays) -> "BoundKernel":
        """Refuse calls whose written arguments overlap ``arrays`` too: arrays the kernel does
        not read that must not change either (the other arrays of a matrix whose arrays are
        bound). Returns ``self``.

        Examples
        --------
        >>> import numpy as np, scipy.sparse, sparsetir
        >>> from sparsetir.ops.kernels import spmm    # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
        >>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
        >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
        >>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
        >>> spmm_a = kernel.bind(a=A.data, indptr=A.indptr, indices=A.indices, m=6, n=5, nnz=A.nnz)
        >>> values_copy = np.zeros((6, 16), np.float32)     # not read, but must not change
        >>> spmm_a = spmm_a.protect(values_copy=values_copy)
        >>> spmm_a(X, values_copy)
        Traceback (most recent call last):
        ...
        sparsetir.errors.ArgumentError: argument 'y' shares memory with argument 'values_copy'; ...
        """
        self._fixed_ranges = self._fixed_ranges + [
            (_Protected(name), value.ctypes.data, value.ctypes.data + value.nbytes)
            for name, value in arrays.items() if value.nbytes]
        self._fast = self._fast_path()
        return self

    @property
    def native_call(self) -> bool:
        """Whether common calls are checked and made in C (``runtime.native_call``); set it to
        False to make them take the Python fast path (to compare the two, or to debug)."""
        return self._fast.native is not None

    @native_call.setter
    def native_call(self, enabled: bool) -> None:
        if not enabled:
            self._fast.native = self._fast.native_torch = None
        elif self._fast.native is None:
            self._fast = self._fast_path()
            if self._fast.native is None:
                raise RuntimeError("the native call is not available here (no gcc or Python "
                                   "headers, or SPARSETIR_NATIVE_CALL=0)")

    def _fast_path(self) -> FastPath:
        return FastPath([c.accept for c in self._free], self._values, self._fixed_ranges,
                        self.kernel._entry_function())

    def __call__(self, *args) -> None:
        """Run the kernel with the free arguments (``self.parameters``, in order)."""
        if not self.call_fast(args):
            values, copy_backs, full = self._convert(args)
            self.kernel._invoke(values, copy_backs, full)

    def call_fast(self, args: tuple) -> bool:
        """Run the kernel on ``args`` if they are the common call (contiguous, writable numpy
        arrays or CPU torch tensors of the right dtype and shape, no written array
        overlapping another), checked in C where the native module is available
        (``native_call``; a torch tensor as the numpy view ``torch_as_numpy`` gives, none for
        tensors that require grad, carry a negative or conjugate bit or a forward-mode
        tangent, or are not on the CPU), else in Python (``fast_path.FastPath``); return
        False, with nothing run, for any other call."""
        size_launches(self._fixed_bytes + sum(map(_nbytes, args)), _has_torch(args))
        if self.call_native(args):
            return True
        if self._writes_inference_tensor(args):
            return False                                   # refused by name by the general path
        if self._fast.native_torch is not None:
            arrays = torch_as_numpy(args)
            if arrays is not None and self.call_native(arrays, torch_views=True):
                self._bump_written(args)
                return True
        values = self._fast.values(args)
        if values is None:
            return False
        self.kernel._run(values)
        self._bump_written(args)
        return True

    def call_native(self, args: tuple, torch_views: bool = False) -> bool:
        """Run the kernel on ``args`` through its C plan alone (``call_fast``'s first try, for
        callers that know the arguments are numpy arrays and have sized the launch with
        ``threads.size_launches``) and return True; False, with nothing run, when the plan
        declines them or there is none (``native_call``). ``torch_views``: ``args`` are what
        ``torch_as_numpy`` made of torch tensors (a bfloat16 one as its bits)."""
        if self.kernel._function is not self._code:      # the kernel took new code
            self._follow_code()
        native = self._fast.native_torch if torch_views else self._fast.native
        return native is not None and native(*args)

    @property
    def fixed_bytes(self) -> int:
        """The bytes of the bound arrays, which a launch's size counts with the call's."""
        return self._fixed_bytes

    def _follow_code(self) -> None:
        """Call the kernel's new code (``Kernel.take_code``), natively if calls were native."""
        native = self._fast.native is not None
        self._code = self.kernel._function
        self._fast = self._fast_path()
        if not native:
            self._fast.native = self._fast.native_torch = None

    def _writes_inference_tensor(self, args: tuple) -> bool:
        """Whether a written argument is a torch inference tensor outside inference mode."""
        for k in self._written_free:
            if k < len(args) and type(args[k]) is not np.ndarray:    # a miscount: general path
                is_inference = getattr(args[k], "is_inference", None)
                if is_inference is not None and is_inference() \
                        and writes_inference_tensor(args[k]):
                    return True
        return False

    def _bump_written(self, args: tuple) -> None:
        """Tell autograd that the torch tensors among the written ``args`` have changed."""
        for k in self._written_free:
            if type(args[k]) is not np.ndarray:
                sys.modules["torch"].autograd.graph.increment_version(args[k])

    def time(self, *args, number: int = 20, repeat: int = 3) -> float:
        """Mean seconds per run of the compiled function alone, as ``Kernel.time``."""
        values, copy_backs, _ = self._convert(args)
        size_launches(self._fixed_bytes + sum(map(_nbytes, args)), _has_torch(args))
        return self.kernel._time_values(values, copy_backs, number, repeat)

    def _convert(self, args: tuple) -> tuple[list, list, list]:
        """The values to pass, the copy-backs, and the full argument list as a caller's."""
        if len(args) != len(self._free_positions):
            raise ArgumentError(f"the bound kernel takes {len(self._free_positions)} arguments "
                                f"({', '.join(self.parameters)}), got {len(args)}")
        full = list(self._fixed_args)
        for i, value in zip(self._free_positions, args):
            full[i] = value
        values = list(self._values)
        copy_backs, passed = Kernel._convert_buffers(self._free, full, values)
        check_no_aliasing(byte_ranges(passed), self._fixed_ranges)
        return values, copy_backs, full
