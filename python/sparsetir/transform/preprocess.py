"""Split a kernel's preprocess from its compute: SparseTIR's ``ExtractPreprocess`` and
``RemovePreprocess``, on Stage I functions and on Stage II modules.

A Stage I function (``format_decompose``'s result) has ``preprocess`` iterations that fill a new
format from the old one: ``extract_preprocess`` keeps only them, ``remove_preprocess`` drops
them (``stage1.format_decompose``). A Stage II module (``lower_sparse_iter``'s result, scheduled
or not) has top-level loop nests whose blocks are annotated ``preprocess``, such as the row
search ``<block>_search<n>`` of a fused loop, which fills a table (``<searched buffer>_pos``)
the kernel allocates. ``extract_preprocess(mod)`` keeps only those nests and makes each table
they write an output parameter, appended after the others; ``remove_preprocess(mod)`` keeps the
other nests and makes the same tables input parameters, in the same order. So the two run as
SparseTIR's did: the preprocess once, then the compute any number of times on its tables. The
other parameters stay in both, each kernel checking its arguments as before. A table the
compute reads is now the caller's, so every access indexed through it is checked when the
kernel runs (``ArgumentError`` naming the table) instead of reading out of bounds.

Example
-------
SpMM through BSR blocks: the preprocess copies the CSR values into the blocks (``A_bsr``), the
compute multiplies with them:

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> from sparsetir.stage1.bsr import bsr_rule
>>> func = sparsetir.format_decompose(csrmm.specialize({"feat_size": 16}), [bsr_rule("bsr", 2)])
>>> mod = sparsetir.lower_sparse_iter(func)
>>> pre = sparsetir.build(extract_preprocess(mod), "llvm", cache=True)
>>> compute = sparsetir.build(remove_preprocess(mod), "llvm", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> indptr_b, indices_b, blocks = sparsetir.format.csr_to_bsr(A.indptr, A.indices, A.data,
...                                                         A.shape, 2)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> a_bsr = np.zeros_like(blocks)                  # the preprocess fills it
>>> values = dict(a=A.data, x=X, y=Y, indptr=A.indptr, indices=A.indices, m=6, n=5,
...               nnz=A.nnz, a_bsr=a_bsr, indptr_bsr=indptr_b, indices_bsr=indices_b,
...               mb_bsr=3, nb_bsr=3, nnzb_bsr=indices_b.size)
>>> args = [values[p.name] for p in func.params]
>>> pre(*args)
>>> np.array_equal(a_bsr, blocks)
True
>>> compute(*args)                                 # any number of times on a_bsr
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ir.attrs import LOWERED_LOOPS_ATTR, PARAM_NAMES_ATTR, PREPROCESS_ANNOTATION
from ..ir.function import SparseFunction
from ..stage1.format_decompose import extract_preprocess as stage1_extract
from ..stage1.format_decompose import remove_preprocess as stage1_remove
from .index_guards import guard_blocks
from .search_tables import guard_table_reads, search_of


def ExtractPreprocess() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.ExtractPreprocess`` (``extract_preprocess`` on a module)."""
    return tvm.transform.module_pass(lambda mod, _ctx: extract_preprocess(mod), opt_level=0,
                                     name="sparsetir.ExtractPreprocess")


def RemovePreprocess() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.RemovePreprocess`` (``remove_preprocess`` on a module)."""
    return tvm.transform.module_pass(lambda mod, _ctx: remove_preprocess(mod), opt_level=0,
                                     name="sparsetir.RemovePreprocess")


def extract_preprocess(kernel):
    """Only the preprocess of ``kernel`` (a Stage I ``SparseFunction`` or a Stage II
    ``IRModule``; see the module docstring)."""
    if isinstance(kernel, SparseFunction):
        return stage1_extract(kernel)
    return _split(kernel, keep_preprocess=True, what="extract_preprocess")


def remove_preprocess(kernel):
    """``kernel`` without its preprocess (a Stage I ``SparseFunction`` or a Stage II
    ``IRModule``; see the module docstring)."""
    if isinstance(kernel, SparseFunction):
        return stage1_remove(kernel)
    return _split(kernel, keep_preprocess=False, what="remove_preprocess")


def _split(mod, keep_preprocess: bool, what: str) -> tvm.IRModule:
    if not isinstance(mod, tvm.IRModule) or "main" not in [g.name_hint for g in mod.functions]:
        raise SparseTIRTypeError(f"{what} takes a SparseFunction (Stage I) or the IRModule "
                                 "lower_sparse_iter gives (Stage II), got "
                                 f"{type(mod).__name__}")
    func = mod["main"]
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize) or realize.block.name_hint != "root":
        raise SparseTIRValueError(f"{what}: main has no root block; pass the module "
                                  "lower_sparse_iter gives, before lower_sparse_buffer")
    root = realize.block
    nests = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    marked = [_is_preprocess(nest) for nest in nests]
    tables = [buf for buf in root.alloc_buffers
              if any(m and _writes(nest, buf) for nest, m in zip(nests, marked))]
    kept = [nest for nest, m in zip(nests, marked) if m == keep_preprocess]
    if not keep_preprocess:
        kept = [guard_blocks(nest, tables, _table_message) for nest in kept]
        searches = [search_of([n for n, m in zip(nests, marked) if m], table, list(func.params))
                    for table in tables]
        for search in filter(None, searches):
            message = (f"the table {search.table.name} (an input since remove_preprocess) "
                       "holds an entry that is not the search's result for its position; pass "
                       "the table the extracted preprocess wrote")
            kept = [guard_table_reads(nest, search, message) for nest in kept]
    if not kept:
        raise SparseTIRValueError(f"{what}: main has no " + (
            "nest annotated preprocess" if keep_preprocess else "nest besides its preprocess"))
    body = kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                            root.init, [b for b in root.alloc_buffers
                                        if not any(b.same_as(t) for t in tables)],
                            root.match_buffers, root.annotations)
    new_func = tirx.PrimFunc(list(func.params) + tables,
                             s_tir.SBlockRealize(realize.iter_values, realize.predicate,
                                                 new_root),
                             func.ret_type, func.attrs)
    blocks = _block_names(body)
    loops = {k: v for k, v in (func.attrs.get(LOWERED_LOOPS_ATTR) or {}).items()
             if str(k) in blocks}
    names = {**dict(func.attrs.get(PARAM_NAMES_ATTR) or {}),
             **{str(t.name): str(t.name) for t in tables}}
    new_func = new_func.with_attr(LOWERED_LOOPS_ATTR, loops).with_attr(PARAM_NAMES_ATTR, names)
    out = dict(mod.functions)
    out[mod.get_global_var("main")] = new_func
    return tvm.IRModule(out, attrs=mod.attrs)


def _table_message(table: str, buffer: str) -> str:
    return (f"the table {table} (an input since remove_preprocess) holds a value that puts an "
            f"index of {buffer} out of range; pass the table the extracted preprocess wrote")


def _is_preprocess(nest) -> bool:
    found = []
    tvm_ffi.structural_walk(nest, (s_tir.SBlock, lambda b: found.append(
        PREPROCESS_ANNOTATION in (b.annotations or {}))), order="pre")
    return any(found)


def _writes(nest, buf) -> bool:
    found = []
    tvm_ffi.structural_walk(nest, (tirx.BufferStore, lambda s: found.append(
        s.buffer.same_as(buf))), order="pre")
    return any(found)


def _block_names(stmt) -> set:
    names = set()
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: names.add(str(b.name_hint))),
                            order="pre")
    return names
