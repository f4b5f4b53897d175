"""The common call of a bound kernel, checked in a few attribute reads (numpy calls are
checked in C first where the native module is available: ``native_call``).

A :class:`~sparsetir.runtime.kernel.BoundKernel` is called again and again with arrays of one
shape: C-contiguous, writable numpy arrays or contiguous CPU torch tensors of the parameter's
dtype. :class:`FastPath` recognises exactly that case and hands the arrays to the compiled
function with nothing converted but what DLPack needs; any argument it does not recognise
(another type or dtype, a strided or read-only array, a torch tensor that requires grad,
carries a negative or conjugate bit or is a functorch or sparse one, an output overlapping
another argument, a kernel that does not run on the CPU) sends the call down the general
path, which copies what must be copied and raises the errors. The fast path never decides
that a call is wrong, and it reads what each parameter takes from the same
``acceptance.Acceptance`` the general path checks, so the two cannot disagree.

Example
-------
The spmm kernel of ``sparsetir.ops.kernels`` (``a, x, y, indptr, indices, m, n, nnz``) with
everything but ``x`` and ``y`` fixed, as ``Kernel.bind`` sets it up:

>>> import numpy as np, scipy.sparse, sparsetir, tvm
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.runtime.acceptance import acceptance
>>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> params = kernel.signature.params
>>> env = {params[5].var: 6, params[6].var: 5, params[7].var: A.nnz}
>>> accepts = [acceptance(params[i], i, env, tvm.cpu(), "element") for i in (1, 2)]
>>> fixed_values = [tensor_of(A.data), None, None, tensor_of(A.indptr),
...                 tensor_of(A.indices), 6, 5, A.nnz]
>>> fast = FastPath(accepts, fixed_values, [], kernel.executable["main"])
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> values = fast.values((X, Y))   # None: take the general path
>>> if values is not None:
...     kernel.executable["main"](*values)
>>> np.allclose(Y, A @ X)
True
>>> fast.values((np.ones((5, 32), np.float32)[:, ::2], Y)) is None   # strided: general path
True
"""
from __future__ import annotations

import sys
from bisect import bisect_right

import numpy as np

from .acceptance import BFLOAT16_BITS
from .arguments import in_dual_level, outgrows_storage, tensor_of
from .native_call import native_plan


class FastPath:
    """Checks and converts the free arguments of a bound kernel in the common case.

    Parameters
    ----------
    accepts : list of Acceptance
        What each parameter a call passes must be (``acceptance.Acceptance``: the spec the
        general path checks too), in call order.
    fixed_values : list
        The converted values of every parameter (free ones are filled in per call).
    fixed_ranges : list of (param, start, end)
        Byte ranges of the bound arrays passed without a copy (``aliasing.byte_ranges``).
    function : tvm_ffi.Function, optional
        The compiled function: given, numpy calls are checked and made in C where the
        native module is available (``native_call``; ``self.native``, else None), and so
        are calls on the numpy views of torch tensors (``self.native_torch``: the same plan,
        each parameter taking its ``Acceptance.torch_view_format``, so a bfloat16 one the
        uint16 view of a bfloat16 tensor's bits that ``runtime.kernel.torch_as_numpy`` makes;
        that function declines every uint16 array or tensor, so nothing else passes for one).

    The fast path is off (``enabled`` False) for a kernel that does not run on the CPU
    (arrays must be moved) or a parameter without elements.
    """

    def __init__(self, accepts, fixed_values: list, fixed_ranges, function=None):
        self._accepts = list(accepts)
        self._torch_dtypes = None          # torch's dtypes, looked up at the first torch call
        self._values = fixed_values
        self._count = len(self._accepts)
        merged = []
        for _, start, end in sorted(fixed_ranges, key=lambda r: r[1]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._fixed_starts = [start for start, _ in merged]
        self._fixed_ends = [end for _, end in merged]
        self.enabled = all(accept.on_host and accept.length > 0 for accept in self._accepts)
        ranges = list(zip(self._fixed_starts, self._fixed_ends))
        plan = self.enabled and function is not None
        self.native = native_plan(function, fixed_values, self._accepts, ranges) \
            if plan else None
        self.native_torch = self.native
        if plan and any(a.torch_view_format != a.buffer_format for a in self._accepts):
            self.native_torch = native_plan(
                function, fixed_values, self._accepts, ranges, "torch_view_format") \
                if not any(a.dtype == BFLOAT16_BITS for a in self._accepts) \
                else None           # a uint16 parameter could not tell the bits views apart

    def values(self, args: tuple):
        """The values to pass for ``args``, or None when a call must take the general path."""
        if not self.enabled or len(args) != self._count:
            return None
        dual = in_dual_level()             # a tangent is refused by name on the general path
        values = self._values.copy()
        spans, written = [], []
        torch = sys.modules.get("torch")
        for k, (accept, value) in enumerate(zip(self._accepts, args)):
            kind = type(value)
            if kind is np.ndarray:
                flags = value.flags
                if value.dtype != accept.dtype or not (flags.c_contiguous and flags.writeable):
                    return None
                shape = value.shape
                if shape != accept.passed_shape:
                    if value.size != accept.length or not accept.shape_fits(shape):
                        return None
                    value = value.reshape(accept.passed_shape)
                value = tensor_of(value)
            elif torch is not None and kind is torch.Tensor and not dual:
                if self._torch_dtypes is None:
                    self._torch_dtypes = [getattr(torch, a.dtype.name) for a in self._accepts]
                try:     # a functorch-wrapped tensor has no storage to look at
                    if (not value.is_cpu or value.requires_grad
                            or value.layout is not torch.strided
                            or value.dtype != self._torch_dtypes[k] or not value.is_contiguous()
                            or value.is_neg() or value.is_conj() or value._is_zerotensor()
                            or outgrows_storage(value)):
                        return None
                except RuntimeError:
                    return None
                shape = value.shape
                if shape != accept.passed_shape:
                    if value.numel() != accept.length or not accept.shape_fits(shape):
                        return None
                    # view(-1) costs a third of view(shape) in torch 2.13
                    value = value.view(-1) if len(accept.passed_shape) == 1 \
                        else value.view(accept.passed_shape)
            else:
                return None
            start = value.data_ptr()
            if not start or not accept.aligned(start):     # no memory (a freed torch storage)
                return None
            values[accept.position] = value
            span = (start, start + accept.nbytes)
            spans.append(span)
            if accept.written:
                written.append(span)
        return values if self._disjoint(spans, written) else None

    def _disjoint(self, spans: list, written: list) -> bool:
        """No written span overlaps another of ``spans`` (which holds it too) or a bound array."""
        for start, end in written:
            overlaps = 0
            for other_start, other_end in spans:
                if start < other_end and other_start < end:
                    overlaps += 1
            if overlaps > 1:
                return False
            i = bisect_right(self._fixed_ends, start)
            if i < len(self._fixed_starts) and self._fixed_starts[i] < end:
                return False
        return True
