"""Runtime-only TVM through ctypes: load exported kernel libraries and call them on torch tensors.

Only TVM's runtime libraries are needed (``libtvm_ffi.so``, ``libtvm_runtime.so`` and, for CUDA,
``libtvm_runtime_cuda.so`` with ``libcudart.so.13``), not the compiler nor the ``tvm``/``tvm_ffi``
Python packages: their ``tvm_ffi.core`` extension is built for one CPython version, while TVM FFI's
C ABI (``tvm/ffi/c_api.h``) serves any. Tensors (torch tensors, contiguous) are passed as flat 1-D
DLTensors without a copy, integers as int64.

Example
-------
>>> rt = Runtime("lib", cuda=True)                           # doctest: +SKIP
>>> main = rt.load_module("kernels/csrmm_f32.so")["main"]
>>> main(values, x, out, indptr, indices, m, n, nnz)         # torch tensors on the GPU, ints
>>> call = main.bind(values, x, out, indptr, indices, m, n, nnz)
>>> call()                                                   # again, arguments converted once
"""

from __future__ import annotations

import ctypes
from pathlib import Path

# TVMFFITypeIndex values (c_api.h)
_INT, _BOOL, _DLTENSOR_PTR, _RAW_STR, _FUNCTION, _MODULE = 1, 2, 7, 8, 68, 73
_CPU, _CUDA = 1, 2  # DLDeviceType
_DTYPES = {"float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "int32": (0, 32),
           "int64": (0, 64)}


class TVMError(RuntimeError):
    """An error raised inside TVM (its kind and message)."""


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Value(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_ptr", ctypes.c_void_p)]


class _Any(ctypes.Structure):
    """TVMFFIAny: a type index, 4 bytes of padding, an 8-byte value."""
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32),
                ("value", _Value)]


class _ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _ErrorObject(ctypes.Structure):
    """TVMFFIObject's header followed by the start of TVMFFIErrorCell."""
    _fields_ = [("ref_count", ctypes.c_uint64), ("type_index", ctypes.c_int32),
                ("padding", ctypes.c_uint32), ("deleter", ctypes.c_void_p),
                ("kind", _ByteArray), ("message", _ByteArray)]


class Runtime:
    """TVM's runtime libraries from ``lib_dir``, loaded into this process.

    Parameters
    ----------
    lib_dir : str or Path
        Folder holding ``libtvm_ffi.so`` and ``libtvm_runtime.so`` (and ``libtvm_runtime_cuda.so``
        with ``libcudart.so.13``, found through the library's ``$ORIGIN`` run path unless a
        ``libcudart.so.13`` is loaded already, as after torch initialised CUDA).
    cuda : bool
        Also load TVM's CUDA runtime (needs ``libcuda.so.1``: the driver, or a stand-in).

    Examples
    --------
    >>> rt = Runtime("lib", cuda=False)                      # doctest: +SKIP
    >>> main = rt.load_module("kernels/csrmm_f32.cpu.so")["main"]
    >>> main(values, x, out, indptr, indices, m, n, nnz)    # torch tensors on the CPU, ints
    """

    def __init__(self, lib_dir, cuda: bool = True):
        lib_dir = Path(lib_dir).resolve()
        self._ffi = ctypes.CDLL(str(lib_dir / "libtvm_ffi.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(lib_dir / "libtvm_runtime.so"), mode=ctypes.RTLD_GLOBAL)
        if cuda:
            ctypes.CDLL(str(lib_dir / "libtvm_runtime_cuda.so"), mode=ctypes.RTLD_GLOBAL)
        ffi = self._ffi
        ffi.TVMFFIFunctionGetGlobal.argtypes = [ctypes.POINTER(_ByteArray),
                                                ctypes.POINTER(ctypes.c_void_p)]
        ffi.TVMFFIFunctionCall.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Any), ctypes.c_int32,
                                           ctypes.POINTER(_Any)]
        ffi.TVMFFIErrorMoveFromRaised.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        ffi.TVMFFIErrorMoveFromRaised.restype = None
        ffi.TVMFFIObjectDecRef.argtypes = [ctypes.c_void_p]
        ffi.TVMFFIEnvSetStream.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                           ctypes.c_void_p]
        self._load = self._global("ffi.ModuleLoadFromFile")
        self._get_function = self._global("ffi.ModuleGetFunction")

    def load_module(self, path) -> Module:
        """Load an exported library (``export_library``), device code included."""
        return Module(self, self.call(self._load, str(Path(path).resolve())))

    def set_cuda_stream(self, device_id: int, stream: int) -> None:
        """Launch CUDA kernels of device ``device_id`` on ``stream`` (a ``cudaStream_t`` as int)."""
        self._check(self._ffi.TVMFFIEnvSetStream(_CUDA, device_id, stream, None))

    def function(self, module: _Any, name: str) -> Function:
        """Function ``name`` of a loaded module (its imports, such as the CUDA code, included)."""
        result = self.call(self._get_function, module, name, True)
        if result.type_index != _FUNCTION:
            raise KeyError(f"the module has no function {name!r}")
        return Function(self, result.value.v_ptr)

    def call(self, function: int, *args) -> _Any:
        """Call the TVM function object ``function``; return its result (owned, never freed)."""
        keep = []
        array = (_Any * len(args))(*(_argument(arg, keep) for arg in args))
        return self.call_prepared(function, array)

    def call_prepared(self, function: int, array) -> _Any:
        """Call ``function`` with a ready ctypes array of TVMFFIAny."""
        result = _Any()
        self._check(self._ffi.TVMFFIFunctionCall(function, array, len(array), ctypes.byref(result)))
        return result

    def _global(self, name: str) -> int:
        handle = ctypes.c_void_p()
        encoded = name.encode()
        self._check(self._ffi.TVMFFIFunctionGetGlobal(
            ctypes.byref(_ByteArray(ctypes.cast(encoded, ctypes.c_void_p), len(encoded))),
            ctypes.byref(handle)))
        if not handle.value:
            raise TVMError(f"TVM's runtime has no global function {name!r}")
        return handle.value

    def _check(self, status: int) -> None:
        if status == 0:
            return
        handle = ctypes.c_void_p()
        self._ffi.TVMFFIErrorMoveFromRaised(ctypes.byref(handle))
        error = ctypes.cast(handle, ctypes.POINTER(_ErrorObject)).contents
        kind = ctypes.string_at(error.kind.data, error.kind.size).decode(errors="replace")
        message = ctypes.string_at(error.message.data, error.message.size).decode(errors="replace")
        self._ffi.TVMFFIObjectDecRef(handle)
        raise TVMError(f"{kind}: {message}")


class Module:
    """A loaded library; ``module["main"]`` is one of its functions.

    The module and its functions live as long as the process.
    """

    def __init__(self, runtime: Runtime, handle: _Any):
        if handle.type_index != _MODULE:
            raise TVMError(f"loading gave a value of type index {handle.type_index}, not a module")
        self._runtime = runtime
        self._handle = handle

    def __getitem__(self, name: str) -> Function:
        return self._runtime.function(self._handle, name)


class Function:
    """A function of a loaded module: call it with torch tensors and ints."""

    def __init__(self, runtime: Runtime, handle: int):
        self._runtime = runtime
        self._handle = handle

    def __call__(self, *args) -> None:
        self._runtime.call(self._handle, *args)

    def bind(self, *args) -> BoundCall:
        """This call with ``args`` converted once, to repeat it at the least cost."""
        return BoundCall(self._runtime, self._handle, args)


class BoundCall:
    """A function call with its arguments converted: calling it runs the function again.

    It holds the tensors and passes the data pointers they had when bound, so use it only while
    they are not resized or replaced.
    """

    def __init__(self, runtime: Runtime, handle: int, args: tuple):
        self._runtime = runtime
        self._handle = handle
        self._keep = []
        self._array = (_Any * len(args))(*(_argument(arg, self._keep) for arg in args))

    def __call__(self) -> None:
        self._runtime.call_prepared(self._handle, self._array)


def _argument(arg, keep: list) -> _Any:
    """A TVMFFIAny viewing ``arg``, appending to ``keep`` what must outlive the call.

    ``arg`` is a TVMFFIAny (an object handle), a bool, an int, a str or a contiguous tensor.
    """
    if isinstance(arg, _Any):
        return arg
    if isinstance(arg, bool):
        return _Any(_BOOL, 0, _Value(v_int64=int(arg)))
    if isinstance(arg, int):
        return _Any(_INT, 0, _Value(v_int64=arg))
    if isinstance(arg, str):
        text = ctypes.c_char_p(arg.encode())
        keep.append(text)
        return _Any(_RAW_STR, 0, _Value(v_ptr=ctypes.cast(text, ctypes.c_void_p).value))
    if not hasattr(arg, "data_ptr"):
        raise TypeError(f"kernel arguments are ints and tensors, got {type(arg).__name__}")
    if not arg.is_contiguous():
        raise ValueError("tensor arguments must be contiguous")
    dtype = str(arg.dtype).rsplit(".", 1)[-1]
    if dtype not in _DTYPES:
        raise TypeError(f"unsupported tensor dtype {dtype}")
    if arg.device.type not in ("cuda", "cpu"):
        raise ValueError(f"tensors must be on the CPU or a CUDA GPU, not {arg.device}")
    cuda = arg.device.type == "cuda"
    device = _Device(_CUDA, arg.device.index or 0) if cuda else _Device(_CPU, 0)
    shape = (ctypes.c_int64 * 1)(arg.numel())
    tensor = _DLTensor(arg.data_ptr(), device, 1, _DataType(*_DTYPES[dtype], 1), shape, None, 0)
    keep.extend((arg, shape, tensor))
    return _Any(_DLTENSOR_PTR, 0, _Value(v_ptr=ctypes.addressof(tensor)))
