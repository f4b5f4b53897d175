"""Accumulators that start from what the output already holds, or add into it atomically.

A sub-kernel of ``format_decompose`` adds into an output that another sub-kernel has started
(a row split over column partitions or over several ELL rows, or zeroed by a nest of its own):
its reduction's init keeps the output as it is, ``Y[r, k] = Y[r, k]``. To sum such a row in
registers the schedule does what it does for any reduction, ``cache_write`` into a small buffer
then ``decompose_reduction``, but TVM rewrites every ``Y`` of the block, so the init becomes
``Y_cache[c] = Y_cache[c]``: the accumulator would start from uninitialised memory.
:func:`start_from_output` gives such an init back its meaning: it loads the accumulator from the
output element the cache's write-back block stores it to (``Y_cache[c] = Y[g(c)]``, where the
write-back is ``Y[g(v)] = Y_cache[v]``; TVM may have shrunk the cache to the region a block
writes, so ``g`` adds that region's offset), the only change to TVM's result.

:func:`add_into_output` does the same for an ``"atomic"`` reduction, whose output other
threads add into at the same time (a row's segments in ``ops.kernels.spmm_segments``): the
accumulator starts from zero (``C[c] = 0``), the write-back adds it to the output
(``Y[g(v)] = Y[g(v)] + C[v]``) and becomes the one atomic block, and the blocks around the
accumulation lose their ``"atomic"`` annotation (the cache is the thread's own: one atomic add
per element of the sum, not per term).

Example
-------
A row of an ELL bucket of the hyb SpMM (``ops.hyb``) summed in a buffer of its own:

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.ops.hyb import HybConfig, HybLayout, hyb_function
>>> func = hyb_function(HybConfig(parts=1, widths=(2,), tiles=1), 16)
>>> sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(func))
>>> update = sch.get_sblock("spmm_p0b01")
>>> rows, nonzeros, features = sch.get_loops(update)
>>> acc = sch.cache_write(update, 0, "global"); sch.reverse_compute_at(acc, rows)
>>> init = sch.decompose_reduction(update, nonzeros)
>>> name = sch.get(init).name_hint
>>> str(sch.get(init).body).splitlines()[-1]          # from uninitialised memory
'Y_global[I_p0b0_indices[I_p0b0_indptr[vo] + vi], vk] = Y_global[I_p0b0_indices[I_p0b0_indptr[vo] + vi], vk]'
>>> mod = start_from_output(sch.mod, [name])
>>> after = tvm.s_tir.Schedule(mod)
>>> str(after.get(after.get_sblock(name)).body).splitlines()[-1]
'Y_global[I_p0b0_indices[I_p0b0_indptr[vo] + vi], vk] = Y[I_p0b0_indices[I_p0b0_indptr[vo] + vi], vk]'
>>> kernel = sparsetir.build(mod, "llvm", schedule="none", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)
>>> layout = HybLayout.of(M, parts=1, widths=(2,), tiles=1)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> kernel(*layout.arguments(func.params, M, X, Y))
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.attrs import ATOMIC_ANNOTATION
from ..ir.utils import structural_map, substitute
from ..ir.utils import is_identity_store
from ..errors import SparseTIRValueError


def start_from_output(mod: tvm.IRModule, init_names) -> tvm.IRModule:
    """``mod`` with the identity stores of the blocks named in ``init_names`` (the inits
    ``decompose_reduction`` made, ``C[c] = C[c]`` into a cache ``C``) loading the output
    element that ``C[c]`` is written back to. A block of that name that is not such an
    identity store, or whose cache has no single write-back block, is refused with a
    ValueError."""
    names = set(init_names)
    found = set()
    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            write_backs = _write_backs(func.body)
            func = func.with_body(structural_map(
                func.body, (s_tir.SBlock, lambda block: _load_from_output(block, names, found,
                                                                          write_backs))))
        funcs[gv] = func
    missing = names - found
    if missing:
        raise SparseTIRValueError(f"no init block named {', '.join(sorted(missing))}")
    return tvm.IRModule(funcs, attrs=mod.attrs)


def add_into_output(mod: tvm.IRModule, init_names) -> tvm.IRModule:
    """``mod`` with the identity inits of the blocks named in ``init_names`` (``C[c] = C[c]``,
    what ``decompose_reduction`` makes of an ``"atomic"`` reduction's init after
    ``cache_write``) starting the cache ``C`` from zero, ``C``'s single write-back block adding
    into the output as the one ``"atomic"`` block, and the annotation removed from the blocks
    that store into ``C`` or enclose such a store. ``C`` must be ``"local"`` (a thread's
    own), and its write-back must follow the reduction loop, not sit inside it (each
    iteration would add the running sum). Refusals (a ValueError) as ``start_from_output``'s,
    and a cache in another scope or written back inside the reduction loop.

    Example
    -------
    >>> import sparsetir
    >>> from sparsetir.ops.kernels import spmm_segments
    >>> func = spmm_segments.specialize({"feat_size": 4})
    >>> sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(func))
    >>> update = sch.get_sblock("spmm1")
    >>> nonzeros, features = sch.get_loops(update)
    >>> sch.reorder(features, nonzeros)               # the write-back then follows the sum
    >>> sch.reverse_compute_at(sch.cache_write(update, 0, "local"), features)
    >>> init = sch.decompose_reduction(update, nonzeros)
    >>> mod = add_into_output(sch.mod, [sch.get(init).name_hint])
    >>> blocks = {block.name_hint: block for block in _blocks(mod["main"].body)}
    >>> str(blocks["spmm1_init"].body).splitlines()[-1]       # from zero
    'Y_local[0, vk] = T.float32(0.0)'
    >>> str(blocks["Y_local"].body).splitlines()[-1]           # added to the output
    'Y[I_indices[vo + vi] + v0, v1] = Y[I_indices[vo + vi] + v0, v1] + Y_local[v0, v1]'
    >>> [name for name, b in blocks.items() if ATOMIC_ANNOTATION in b.annotations]
    ['Y_local']
    """
    names = set(init_names)
    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(_add_into_output(func.body, names))
        funcs[gv] = func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def _add_into_output(body, names: set):
    inits = {block.name_hint: block for block in _blocks(body) if block.name_hint in names}
    missing = names - set(inits)
    if missing:
        raise SparseTIRValueError(f"no init block named {', '.join(sorted(missing))}")
    caches = []
    for name, block in inits.items():
        if not is_identity_store(block.body):
            raise SparseTIRValueError(f"block {name} is not an init that keeps its cache as it "
                                      "is (C[c] = C[c])")
        cache = block.body.buffer
        if cache.scope() != "local":
            raise SparseTIRValueError(f"the cache {cache.name} that block {name} initialises is "
                                      f"in {cache.scope()!r} memory, not a thread's own "
                                      "('local'): other threads would add into it unguarded")
        caches.append(cache)

    def is_write_back(store) -> bool:
        return any(store.value.source.same_as(cache) for cache in caches)

    backs = [store for store in _write_backs(body) if is_write_back(store)]
    for cache in caches:
        if sum(store.value.source.same_as(cache) for store in backs) != 1:
            raise SparseTIRValueError(f"the cache {cache.name} has no single write-back block "
                                      "C[v] -> output")

    _refuse_write_backs_inside_reductions(body, caches)

    def stores_into_cache(block) -> bool:
        found = []

        def on_store(store):
            if any(store.buffer.same_as(cache) for cache in caches):
                found.append(store)
        tvm_ffi.structural_walk(block.body, (tirx.BufferStore, on_store), order="pre")
        return bool(found)

    def rewrite(block):
        store = block.body
        if block.name_hint in names:
            zero = tirx.BufferStore(store.buffer, tirx.const(0, store.buffer.dtype),
                                    list(store.indices))
            return _with(block, body=zero, reads=[])
        if _is_copy(store) and is_write_back(store):
            output = tirx.BufferLoad(store.buffer, list(store.indices))
            region = tirx.BufferRegion(store.buffer, [tvm.ir.Range.from_min_extent(i, 1)
                                                      for i in store.indices])
            added = tirx.BufferStore(store.buffer, output + store.value, list(store.indices))
            return _with(block, body=added, reads=[*block.reads, region],
                         annotations={**block.annotations, ATOMIC_ANNOTATION: True})
        if ATOMIC_ANNOTATION in block.annotations and stores_into_cache(block):
            return _with(block, annotations={key: value for key, value in
                                             block.annotations.items()
                                             if key != ATOMIC_ANNOTATION})
        return block

    return structural_map(body, (s_tir.SBlock, rewrite))


def _refuse_write_backs_inside_reductions(body, caches: list) -> None:
    """Refuse a write-back of one of ``caches`` inside a loop that a reduction into it
    iterates: the write-back would add the running sum once per iteration."""
    reduction_loops = set()

    def on_realize(realize):
        store = realize.block.body
        if (isinstance(store, tirx.BufferStore) and not _is_copy(store)
                and any(store.buffer.same_as(cache) for cache in caches)):
            for var, value in zip(realize.block.iter_vars, realize.iter_values):
                if var.iter_type == tirx.IterVar.CommReduce:
                    tvm_ffi.structural_walk(value, (tirx.Var, reduction_loops.add), order="pre")
    tvm_ffi.structural_walk(body, (s_tir.SBlockRealize, on_realize), order="pre")
    inside = []

    def on_loop(loop):
        if any(loop.loop_var.same_as(var) for var in reduction_loops):
            inside.extend(block.name_hint for block in _blocks(loop.body)
                          if _is_copy(block.body) and any(
                              block.body.value.source.same_as(cache) for cache in caches))
    tvm_ffi.structural_walk(body, (tirx.For, on_loop), order="pre")
    if inside:
        raise SparseTIRValueError(f"the write-back block {inside[0]} is inside the loop of the "
                                  "reduction into its cache: it must follow that loop")


def _blocks(body) -> list:
    """Every block of ``body``, outermost first."""
    blocks = []
    tvm_ffi.structural_walk(body, (s_tir.SBlock, blocks.append), order="pre")
    return blocks


def _with(block, body=None, reads=None, annotations=None):
    """``block`` with another body, read regions or annotations."""
    return s_tir.SBlock(block.iter_vars, block.reads if reads is None else reads, block.writes,
                        block.name_hint, block.body if body is None else body, block.init,
                        block.alloc_buffers, block.match_buffers,
                        block.annotations if annotations is None else annotations)


def _write_backs(body) -> list:
    """Every block store ``B[g(v)] = C[v]`` (a plain copy from another buffer ``C``)."""
    stores = []

    def on_block(block):
        if _is_copy(block.body):
            stores.append(block.body)
    tvm_ffi.structural_walk(body, (s_tir.SBlock, on_block), order="pre")
    return stores


def _is_copy(store) -> bool:
    """Whether ``store`` is ``B[g(v)] = C[v]``, a plain copy from another buffer ``C``."""
    return (isinstance(store, tirx.BufferStore) and isinstance(store.value, tvm.ir.TensorLoad)
            and not store.value.source.same_as(store.buffer))


def _load_from_output(block, names: set, found: set, write_backs: list):
    if block.name_hint not in names:
        return block
    store = block.body
    if not is_identity_store(store):
        raise SparseTIRValueError(f"block {block.name_hint} is not an init that keeps its cache as it "
                         "is (C[c] = C[c])")
    backs = [w for w in write_backs if w.value.source.same_as(store.buffer)]
    if len(backs) != 1 or not all(isinstance(i, tirx.Var) for i in backs[0].value.indices):
        raise SparseTIRValueError(f"the cache {store.buffer.name} that block {block.name_hint} "
                         "initialises has no single write-back block C[v] -> output")
    back = backs[0]
    to_cache = dict(zip(back.value.indices, store.indices))
    indices = [substitute(index, to_cache) for index in back.indices]
    found.add(block.name_hint)
    reads = [tirx.BufferRegion(back.buffer, [tvm.ir.Range.from_min_extent(i, 1) for i in indices])]
    return s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint,
                        tirx.BufferStore(store.buffer, tirx.BufferLoad(back.buffer, indices),
                                         list(store.indices)),
                        block.init, block.alloc_buffers, block.match_buffers, block.annotations)
