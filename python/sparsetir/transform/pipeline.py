"""Stage II -> Stage III as one ``tvm.transform.Sequential`` of named passes.

``stage3_passes(target_kind, horizontal_fuse)`` is what ``sparsetir.build`` runs on a scheduled
Stage II module before compiling it:

1. ``sparsetir.CheckAtomicInits``: refuse an ``"atomic"`` block with an init (``atomic``);
2. ``sparsetir.DecomposeConditionalInits``: every init runs, empty reductions included
   (``complete_inits``);
3. ``sparsetir.LowerSparseBuffer``: flat buffers (``lower_sparse_buffer``);
4. ``sparsetir.HorizontalFuse``, when asked or when the function has SparseTIR's
   ``horizontal_fuse`` attribute: nests share one launch (``horizontal_fusion``; on CUDA the
   attribute's whole-function fusion runs later, in the compile pipeline: ``function_fusion``);
5. ``sparsetir.LowerAtomicBlocks``: atomic adds on CUDA, identity inits removed (``atomic``);
6. ``sparsetir.LowerDeviceChecks``: assertions become ``__trap()`` on CUDA (``device_checks``).

The passes raise sparsetir's own errors (``AtomicBlockError``...), which ``sparsetir.errors``
registers with tvm-ffi, so that they come out of the ``Sequential`` as the same classes.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 16}))
>>> flat = stage3_passes("llvm")(mod)
>>> 'Y: T.Buffer(("m * 16",), "float32", align=4)' in flat.script()
True

TVM's instruments see each pass:

>>> @tvm.instrument.pass_instrument
... class Names:
...     def __init__(self):
...         self.seen = []
...     def run_before_pass(self, mod, info):
...         self.seen.append(info.name)
>>> names = Names()
>>> with tvm.transform.PassContext(instruments=[names]):
...     flat = stage3_passes("llvm")(mod)
>>> names.seen
['sparsetir.Stage2ToStage3', 'sparsetir.CheckAtomicInits',
 'sparsetir.DecomposeConditionalInits', 'sparsetir.LowerSparseBuffer',
 'sparsetir.HorizontalFuse', 'sparsetir.LowerAtomicBlocks', 'sparsetir.LowerDeviceChecks']
"""

from __future__ import annotations

import tvm

from .atomic import CheckAtomicInits, LowerAtomicBlocks
from .complete_inits import DecomposeConditionalInits
from .device_checks import LowerDeviceChecks
from .horizontal_fusion import HorizontalFuse
from .lower_sparse_buffer import LowerSparseBuffer

def stage3_passes(target_kind: str, horizontal_fuse: bool = False) -> tvm.transform.Pass:
    """The Stage II -> Stage III passes for ``target_kind`` (``"llvm"`` or ``"cuda"``), as one
    pass named ``sparsetir.Stage2ToStage3``."""
    passes = [CheckAtomicInits(), DecomposeConditionalInits(), LowerSparseBuffer(),
              HorizontalFuse(target_kind, requested=horizontal_fuse),
              LowerAtomicBlocks(target_kind), LowerDeviceChecks(target_kind)]
    return tvm.transform.Sequential(passes, name="sparsetir.Stage2ToStage3")
