"""sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel.

Stage I (coordinate space, ``sparsetir.ir``) is written with ``sparsetir.script.tir`` and
rewritten in place by ``sparsetir.stage1`` (``Schedule``, ``format_decompose``);
``lower_sparse_iter`` (``sparsetir.lower``) turns it into schedulable TensorIR (Stage II,
scheduled with ``tvm.s_tir.Schedule`` or ``sparsetir.schedule``), ``lower_sparse_buffer``
(``sparsetir.transform``) into flat buffers (Stage III), and ``build`` (``sparsetir.driver``,
compiling through ``sparsetir.backend``) into a callable kernel (``sparsetir.runtime``).
``sparsetir.ops`` are the operators made that way; every error is a ``SparseTIRError``.
"""
import os as _os

__version__ = "0.1.0"

# TVM's CPU thread pool uses one thread unless told otherwise (TVM_NUM_THREADS); use the
# threads this process is given (OMP_NUM_THREADS, which torchrun sets to 1 for each rank), else
# the cores it may run on, unless the user chose a number.
_omp_threads = _os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
_os.environ.setdefault("TVM_NUM_THREADS", _omp_threads if _omp_threads.isdigit() and int(
    _omp_threads) > 0 else str(len(_os.sched_getaffinity(0))))

from . import (  # noqa: E402  (after the thread setting, before TVM's pool starts)
                        format,  # noqa: E402  pylint: disable=redefined-builtin
                        ir,
                        ops,
                        script,
)
from .driver import build  # noqa: E402
from .errors import (  # noqa: E402
                        ArgumentError,
                        AtomicBlockError,
                        BufferReferenceError,
                        FormatRewriteError,
                        FormatTypeError,
                        HorizontalFusionError,
                        InitPlacementError,
                        KernelFileError,
                        KernelPathError,
                        LayoutError,
                        LoweringError,
                        SparseScheduleError,
                        SparseScriptError,
                        SparseTIRError,
                        SparseTIRMemoryError,
                        SparseTIRTypeError,
                        SparseTIRValueError,
)
from .ir import SparseFunction  # noqa: E402
from .lower import lower_sparse_iter  # noqa: E402
from .runtime.saved import load  # noqa: E402
from .stage1 import (  # noqa: E402
                        FormatRewriteRule,
                        Schedule,
                        format_decompose,
)
from .transform import lower_sparse_buffer  # noqa: E402
from .transform.preprocess import extract_preprocess, remove_preprocess  # noqa: E402
from .transform.specialize_buffer import specialize_buffer  # noqa: E402
from .warmup import WarmupReport, warmup  # noqa: E402
from .driver.compile_log import configure_from_env as _configure_log  # noqa: E402

_configure_log()        # SPARSETIR_LOG=info: compile records on stderr

__all__ = ["ArgumentError", "AtomicBlockError", "BufferReferenceError", "FormatRewriteError",
           "FormatRewriteRule", "FormatTypeError", "HorizontalFusionError", "InitPlacementError",
           "KernelFileError", "KernelPathError", "LayoutError", "LoweringError", "Schedule", "SparseFunction",
           "SparseScheduleError", "SparseScriptError", "SparseTIRError", "SparseTIRMemoryError", "SparseTIRTypeError",
           "SparseTIRValueError", "build",
           "extract_preprocess", "format", "format_decompose", "ir", "load", "lower_sparse_buffer",
           "lower_sparse_iter", "ops", "remove_preprocess", "script", "specialize_buffer", "warmup", "WarmupReport"]
