"""Stage II -> Stage III: named ``tvm.transform`` passes that turn a scheduled module into flat
buffers ready to compile, composed in ``pipeline.stage3_passes``.

``lower_sparse_buffer`` (``DecomposeConditionalInits`` from ``complete_inits``: every init
runs, empty rows included; then ``LowerSparseBuffer``: flat buffers), ``atomic`` (blocks marked
atomic, for reductions into shared outputs: CUDA atomics, CPU extern atomic adds),
``horizontal_fusion`` (nests marked ``"horizontal_fuse"`` become one parallel loop or launch),
``function_fusion`` (SparseTIR's ``HorizontalFusion`` of a function with the
``horizontal_fuse`` attribute, run by the compile pipeline) and ``device_checks`` (assertions
become ``__trap()`` on CUDA). Each module offers its pass (``LowerAtomicBlocks("cuda")``) and
the plain function (``lower_atomic_blocks(mod, "cuda")``).

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.schedule import default_schedule
>>> stage2 = sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 16}))
>>> scheduled_stage2_module = default_schedule(stage2, "llvm").mod
>>> flat = sparsetir.lower_sparse_buffer(scheduled_stage2_module)
>>> 'Y: T.Buffer(("m * 16",), "float32", align=4)' in flat.script()      # was ("m", 16)
True
>>> flat = sparsetir.transform.stage3_passes("llvm")(scheduled_stage2_module)   # all passes
"""
from .atomic import CheckAtomicInits, LowerAtomicBlocks, lower_atomic_blocks
from .complete_inits import DecomposeConditionalInits, decompose_conditional_inits
from .device_checks import LowerDeviceChecks, lower_device_checks
from .function_fusion import HorizontalFusion, fuse_function
from .horizontal_fusion import HorizontalFuse, horizontal_fuse
from .lower_sparse_buffer import LowerSparseBuffer, lower_sparse_buffer
from .pipeline import stage3_passes

__all__ = ["CheckAtomicInits", "DecomposeConditionalInits", "HorizontalFuse",
           "HorizontalFusion", "LowerAtomicBlocks", "LowerDeviceChecks", "LowerSparseBuffer",
           "decompose_conditional_inits", "fuse_function", "horizontal_fuse", "lower_atomic_blocks",
           "lower_device_checks", "lower_sparse_buffer", "stage3_passes"]
