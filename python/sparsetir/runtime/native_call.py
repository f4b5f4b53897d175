"""The common call of a bound kernel, in C: ``src/fastcall/fastcall.c``.

``FastPath`` (``fast_path.py``) recognises the common call with a few Python attribute reads and
a DLPack conversion per array, about 1.5 us each on the 2-core development machine: as long as
a small kernel. For numpy arguments the same checks (exactly ``numpy.ndarray``, C-contiguous,
the parameter's item format and size, its declared or flat shape, aligned, writable where
written, no written one overlapping another argument or a bound or protected array) run in C
through the buffer protocol, and the arrays go to the compiled function as ``DLTensor``
pointers, with no conversion object at all. The C plan reads what each parameter takes by
name from its ``acceptance.Acceptance``, the spec the Python paths check. Anything else
(torch tensors included) is declined and left to ``FastPath`` and the general path. An error
the kernel raises comes out as the exception tvm-ffi gives its kind (``_ffi_error``): a
failed compiled check as ``ArgumentError``.

The module is compiled with gcc on first use (``sparsetir.backend.native``); where that is impossible
(no gcc, no Python headers) :func:`native_plan` returns None and calls stay in Python. Set
``SPARSETIR_NATIVE_CALL=0`` to turn it off.

Example
-------
The spmm kernel of ``sparsetir.ops.kernels`` (``a, x, y, indptr, indices, m, n, nnz``) with
everything but ``x`` and ``y`` fixed, as ``Kernel.bind`` sets it up:

>>> import numpy as np, scipy.sparse, sparsetir, tvm
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.runtime.acceptance import acceptance
>>> from sparsetir.runtime.arguments import tensor_of
>>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> params = kernel.signature.params
>>> env = {params[5].var: 6, params[6].var: 5, params[7].var: A.nnz}
>>> accepts = [acceptance(params[i], i, env, tvm.cpu(), "element") for i in (1, 2)]
>>> values = [tensor_of(A.data), None, None, tensor_of(A.indptr), tensor_of(A.indices),
...           6, 5, A.nnz]
>>> plan = native_plan(kernel.executable["main"], values, accepts, [])  # None: not available
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> plan is None or plan(X, Y)        # True: ran
True
>>> plan is None or np.allclose(Y, A @ X)
True
>>> plan is not None and plan(X.astype(np.float64), Y)   # False: declined, nothing ran
False
"""

from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
from functools import lru_cache
from importlib.machinery import ExtensionFileLoader
from importlib.util import module_from_spec, spec_from_loader

import numpy as np
import tvm_ffi
import tvm_ffi.core
import tvm_ffi.libinfo

from ..backend.native import build_shared

MAX_SLOTS = 8                                # free buffer parameters a plan holds (fastcall.c)
MAX_DIMS = 4                                 # dimensions of a slot's shapes (fastcall.c)


def _ffi_error(kind: str, message: str) -> BaseException:
    """The exception tvm-ffi raises for an FFI error of ``kind`` (its registry,
    ``tvm_ffi.register_error``: ``errors.ARGUMENT_ERROR_KIND`` gives ``ArgumentError``)."""
    return tvm_ffi.core.Error(kind, message, "").py_error()


def available() -> bool:
    """Whether the C fast call can be used in this process (built, and not turned off)."""
    return _module() is not None


@lru_cache(maxsize=None)
def _module():
    """The compiled extension, set up; None where it cannot be built or is turned off."""
    if os.environ.get("SPARSETIR_NATIVE_CALL", "1") == "0":
        return None
    try:
        # the versions are in the flags (and so in the cache key): an upgrade builds anew
        path = build_shared("fastcall.c", [f"-I{sysconfig.get_paths()['include']}",
                                           f"-I{tvm_ffi.libinfo.find_include_path()}",
                                           f"-I{tvm_ffi.libinfo.find_dlpack_include_path()}",
                                           f"-DBUILT_FOR_TVM_FFI={tvm_ffi.__version__}",
                                           f"-DBUILT_FOR_PYTHON={sys.hexversion}"])
    except RuntimeError:
        return None
    loader = ExtensionFileLoader("sparsetir_fastcall", str(path))
    module = module_from_spec(spec_from_loader("sparsetir_fastcall", loader))
    loader.exec_module(module)
    lib = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi())
    module.setup(*(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value for symbol in (
        "TVMFFIFunctionCall", "TVMFFIErrorMoveFromRaised", "TVMFFIObjectDecRef")), np.ndarray,
        _ffi_error)
    return module


def native_plan(function, values: list, accepts, fixed_ranges,
                format_field: str = "buffer_format"):
    """A callable running ``function`` on ``values`` with the free arguments filled in (see
    the module docstring), or None where the native call is not available.

    ``accepts``: the ``Acceptance`` of each free buffer parameter, in call order (the C plan
    reads their fields by name); ``fixed_ranges``: ``(start, end)`` byte ranges, merged and
    sorted, that a written argument must not overlap; ``format_field``: the ``Acceptance``
    field whose buffer format an argument must have (``"torch_view_format"``: a plan for the
    numpy views of torch tensors, ``runtime.kernel.torch_as_numpy``)."""
    module = _module()
    if module is None or len(accepts) > MAX_SLOTS:
        return None
    if not all(accept.on_host and accept.dlpack_code is not None and len(accept.dims) <= MAX_DIMS
               and len(accept.passed_shape) <= MAX_DIMS for accept in accepts):
        return None
    bound = []
    for value in values:
        if value is None or isinstance(value, int):
            bound.append(value)
        elif isinstance(value, tvm_ffi.Tensor):
            bound.append(("tensor", value.__chandle__()))
        else:            # a torch tensor bound by the caller: the Python paths handle it
            return None
    return module.Plan(function.__chandle__(), (function, values), bound, tuple(accepts),
                       tuple(start for start, _ in fixed_ranges),
                       tuple(end for _, end in fixed_ranges), format_field)
