"""``apply_tiled_layout``: a dense buffer of a Stage II kernel stored in an XLA tiled layout.

A Stage I kernel declares its dense operands with ordinary axes (``X`` of SpMM is ``(J_detach,
K)``), and ``lower_sparse_iter`` gives each a row-major buffer. ``apply_tiled_layout(mod,
"x", layout)`` (the pass ``sparsetir.ApplyTiledLayout``) re-declares that parameter as the
flat physical array of ``layout`` (:meth:`TiledLayout.physical_size` elements, padding
included) and reads and writes every element through the layout's index map
(:meth:`TiledLayout.linear_expr`: floor divisions and modulos by the tile sizes). Only the
positions of the array's elements are ever read or written, so whatever the padding holds
never contributes. The block regions of the buffer cover all of it (its reads are
data-dependent in a sparse kernel anyway); loops and blocks are left as they are, so the
result is scheduled and built like any Stage II module, default schedule included. The
function records the layout of each parameter it re-declared (``ir.attrs.tiled_layouts``),
so the compiled kernel takes there only a 1-D array of the physical size
(``layout.to_physical(x)``), never the logical array, even one with as many elements.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 8}))

Before, X is ``T.Buffer(("n", 8), "float32")``, read at ``X[J_indices[J_indptr[vi] + vj],
vk]``:

>>> 'X: T.Buffer(("n", 8), "float32")' in mod.script()
True
>>> layout = TiledLayout.parse("{1,0:T(2,4)}")
>>> tiled = apply_tiled_layout(mod, "x", layout)

After, X is ``T.Buffer(((n + 1) // 2 * 16,), "float32")``, read at
``X[J_indices[J_indptr[vi] + vj] // 2 * 16 + vk // 4 * 8 + J_indices[J_indptr[vi] + vj] % 2 * 4
+ vk % 4]``:

>>> 'X: T.Buffer(("(n + 1) // 2 * 16",), "float32")' in tiled.script()
True
>>> kernel = sparsetir.build(tiled, "llvm")
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X, Y = np.arange(40, dtype=np.float32).reshape(5, 8), np.zeros((6, 8), np.float32)
>>> kernel(A.data, layout.to_physical(X), Y, A.indptr, A.indices, 6, 5, A.nnz)
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script.ir_builder import tirx as Tb

from ..errors import SparseTIRTypeError
from ..ir.attrs import (TILED_LAYOUTS_ATTR, index_checks, param_names, tiled_layouts,
                        value_domains)
from .param_rewrite import find_param, main_only, replace_params
from .tiled_layout import COMBINE, TiledLayout, TiledLayoutError

__all__ = ["ApplyTiledLayout", "apply_tiled_layout"]

# raised inside the pass, it crosses tvm-ffi by its class name and comes back as itself
tvm_ffi.register_error(TiledLayoutError.__name__, TiledLayoutError)


def apply_tiled_layout(mod: tvm.IRModule, param: str, layout: TiledLayout) -> tvm.IRModule:
    """``mod`` with the buffer parameter ``param`` of its ``"main"`` stored in ``layout``.

    Parameters
    ----------
    mod : tvm.IRModule
        A Stage II module (``sparsetir.lower_sparse_iter``'s), scheduled or not.
    param : str
        The parameter: its name in the Stage I kernel (``"x"``) or its Stage II buffer's
        (``"X"``).
    layout : TiledLayout
        Its layout; the rank must be the buffer's, an element type must be its dtype, and a
        shape must be its (static) shape.
    """
    if not isinstance(mod, tvm.IRModule):
        raise SparseTIRTypeError(f"mod must be an IRModule, got {type(mod).__name__}")
    return ApplyTiledLayout(param, layout)(mod)


def ApplyTiledLayout(param: str, layout: TiledLayout) -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.ApplyTiledLayout``: :func:`apply_tiled_layout` on ``"main"``."""
    if not isinstance(layout, TiledLayout):
        raise SparseTIRTypeError(f"layout must be a TiledLayout, got {type(layout).__name__}")
    if not isinstance(param, str):
        raise SparseTIRTypeError(f"param must be a parameter name, got {param!r}")

    return main_only(lambda func: _tiled_function(func, param, layout),
                     "sparsetir.ApplyTiledLayout")


def _tiled_function(func: tirx.PrimFunc, param: str, layout: TiledLayout) -> tirx.PrimFunc:
    old = find_param(func, param, TiledLayoutError)
    _refuse_checked_arrays(func, old, param)
    shape = list(old.shape)
    _check_fits(old, shape, layout, param)
    constants = [t for tile in layout.tiles for t in tile if t != COMBINE] + \
        [int(d) for d in shape if isinstance(d, tirx.IntImm)]
    if math.prod(constants) >= 2**31:
        # the constants alone multiply past int32: compute the positions in int64
        shape = [tirx.Cast("int64", d) if str(d.ty.dtype) != "int64" else d for d in shape]
    analyzer = tvm.sym.Analyzer()
    size = analyzer.simplify(layout.physical_size_expr(shape))
    new = Tb.buffer([size], old.dtype, layout=None, buffer_name=old.name,
                    align=old.data_alignment)

    def position(indices):
        return [analyzer.simplify(layout.linear_expr(list(indices), shape))]

    def on_load(load, buffer):
        return tirx.BufferLoad(buffer, position(load.indices))

    def on_store(store, buffer):
        return tirx.BufferStore(buffer, store.value, position(store.indices))

    def on_region(_region, buffer):
        return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, size)])

    tiles = set()
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: tiles.update(
        m.source.source for m in b.match_buffers)), order="pre")
    if old in tiles:
        raise TiledLayoutError(f"a block matches a tile of {param!r} (tensorize): a tiled "
                               "layout cannot be applied to it")
    tiled = replace_params(func, {old: new}, on_load, on_store, on_region)
    return tiled.with_attr(TILED_LAYOUTS_ATTR, {**tiled_layouts(func), old.name: str(layout)})


def _refuse_checked_arrays(func: tirx.PrimFunc, buf, param: str) -> None:
    """Index arrays and buffers with a declared value domain are checked at every call in
    their logical layout (``runtime.compiled_checks``): a tiled one would be read there as if
    it were not, and refused (or passed) for the wrong elements."""
    stage1 = param_names(func).get(buf.name, buf.name)
    checked = {name for check in index_checks(func) for name in (check.indptr, check.indices)}
    checked |= {domain.param for domain in value_domains(func)}
    if stage1 in checked:
        raise TiledLayoutError(f"{param!r} is an index array or has a declared value domain, "
                               "which the call checks in its logical layout: a tiled layout "
                               "applies to data buffers only")


def _check_fits(buf, shape: list, layout: TiledLayout, param: str):
    if len(shape) != len(layout.minor_to_major):
        raise TiledLayoutError(f"{param!r} has {len(shape)} dimensions, the layout {layout} "
                               f"orders {len(layout.minor_to_major)}")
    if layout.dtype is not None and str(layout.dtype) != str(buf.dtype):
        raise TiledLayoutError(f"{param!r} holds {buf.dtype}, the layout {layout} "
                               f"{layout.element_type} ({layout.dtype})")
    if layout.shape is not None:
        static = [int(d) if isinstance(d, tirx.IntImm) else None for d in shape]
        if static != list(layout.shape):
            raise TiledLayoutError(f"{param!r} has shape {shape}, the layout {layout} is for "
                                   f"{list(layout.shape)} (specialize the kernel, or give a "
                                   "layout without a shape)")
