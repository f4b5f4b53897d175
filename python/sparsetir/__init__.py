"""sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel.

Stage I (coordinate space, ``sparsetir.ir``) is written with ``sparsetir.script.tir``;
``lower_sparse_iter`` turns it into schedulable TensorIR (Stage II), ``lower_sparse_buffer`` into
flat buffers (Stage III), and ``build`` into a callable kernel.
"""
import os as _os

__version__ = "0.1.0"

# TVM's CPU thread pool uses one thread unless told otherwise (TVM_NUM_THREADS); use the cores
# this process may run on, unless the user chose a number.
_os.environ.setdefault("TVM_NUM_THREADS", str(len(_os.sched_getaffinity(0))))

from . import (  # noqa: E402  (after the thread setting, before TVM's pool starts)
                        format,  # noqa: E402  pylint: disable=redefined-builtin
                        ir,
                        ops,
                        script,
)
from .build import build  # noqa: E402
from .ir import SparseFunction  # noqa: E402
from .sparse_schedule import Schedule, SparseScheduleError  # noqa: E402
from .transform import (  # noqa: E402
                        AtomicBlockError,
                        InitPlacementError,
                        LoweringError,
                        lower_sparse_buffer,
                        lower_sparse_iter,
)
from .transform.format_decompose import (  # noqa: E402
                        FormatRewriteError,
                        FormatRewriteRule,
                        extract_preprocess,
                        format_decompose,
                        remove_preprocess,
)

__all__ = ["AtomicBlockError", "FormatRewriteError", "FormatRewriteRule", "InitPlacementError",
           "LoweringError", "Schedule", "SparseFunction", "SparseScheduleError", "build",
           "extract_preprocess", "format", "format_decompose", "ir", "lower_sparse_buffer",
           "lower_sparse_iter", "ops", "remove_preprocess", "script"]
