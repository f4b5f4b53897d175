"""One Stage II rewrite shared by the storage passes: buffer parameters re-declared.

``apply_tiled_layout`` (a dense array in a tiled layout) and lowering's ``index_storage``
(index arrays stored in narrower integers than the axes compute with) both replace some buffer
parameters by new buffers and rewrite every load, store and block region of the old ones; this
module walks the function once for them, so each states only how an access changes.

Example
-------
The kernel's X, of shape (n, 8), read as a flat array of n * 8 floats:

>>> import sparsetir
>>> from tvm.script.ir_builder import tirx as Tb
>>> from sparsetir.ops.kernels import spmm
>>> func = sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 8}))["main"]
>>> X = find_param(func, "x")                 # the Stage I name, or the Stage II one "X"
>>> X.name, X.shape
('X', (n, 8))
>>> X_flat = Tb.buffer([X.shape[0] * 8], "float32", layout=None, buffer_name="X")
>>> flat = replace_params(func, {X: X_flat},
...     load=lambda ld, new: tirx.BufferLoad(new, [ld.indices[0] * 8 + ld.indices[1]]),
...     region=lambda rg, new: tirx.BufferRegion(new, [tvm.ir.Range(0, new.shape[0])]))
>>> text = flat.script()
>>> 'X: T.Buffer(("n * 8",), "float32")' in text, "X[J_indices[J_indptr[vi] + vj] * 8 + vk]" in text
(True, True)
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from ..errors import SparseTIRValueError
from ..ir.attrs import param_names
from ..ir.utils import structural_map


def find_param(func: tirx.PrimFunc, name: str, error=SparseTIRValueError):
    """The buffer parameter called ``name`` in Stage II (``"X"``) or, through the lowering's
    record of names, in the Stage I kernel (``"x"``); ``error`` (a class) when there is none."""
    stage1 = param_names(func)
    buffers = [p for p in func.params if tirx.is_buffer_var(p)]
    for buf in buffers:
        if name in (buf.name, stage1.get(buf.name)):
            return buf
    names = sorted({b.name for b in buffers} | {stage1.get(b.name, b.name) for b in buffers})
    raise error(f"{name!r} is not a buffer parameter of the kernel, which has "
                f"{', '.join(names)}")


def replace_params(func: tirx.PrimFunc, new: dict, load, store=None, region=None):
    """``func`` with each buffer parameter ``old`` of ``new`` replaced by ``new[old]``.

    ``load(old_load, new_buffer)`` gives the expression a load becomes; ``store(old_store,
    new_buffer)`` the statement a store becomes (None: a store is left to ``load`` of its value
    only, which suits read-only arrays) and ``region(old_region, new_buffer)`` a block's read or
    write region (None: the same ranges of the new buffer).
    """
    def on_load(old_load):
        buffer = new.get(old_load.source)
        return old_load if buffer is None else load(old_load, buffer)

    def on_store(old_store):
        buffer = new.get(old_store.buffer)
        return old_store if buffer is None or store is None else store(old_store, buffer)

    def on_region(old_region):
        buffer = new.get(old_region.source)
        if buffer is None:
            return old_region
        if region is None:
            return tirx.BufferRegion(buffer, list(old_region.region))
        return region(old_region, buffer)

    def on_block(block):
        return s_tir.SBlock(block.iter_vars, [on_region(r) for r in block.reads],
                            [on_region(r) for r in block.writes], block.name_hint, block.body,
                            block.init, block.alloc_buffers, block.match_buffers,
                            block.annotations)

    body = structural_map(func.body, [(tvm.ir.TensorLoad, on_load),
                                      (tirx.BufferStore, on_store),
                                      (s_tir.SBlock, on_block)], order="post")
    return tirx.PrimFunc([new.get(p, p) for p in func.params], body, func.ret_type, func.attrs)


def main_only(rewrite_main, name: str) -> tvm.transform.Pass:
    """A module pass named ``name`` applying ``rewrite_main(func)`` to the function ``"main"``."""
    def rewrite(mod, _ctx):
        funcs = {gv: rewrite_main(f) if gv.name_hint == "main" else f
                 for gv, f in mod.functions.items()}
        return tvm.IRModule(funcs, attrs=mod.attrs)

    return tvm.transform.module_pass(rewrite, opt_level=0, name=name)
