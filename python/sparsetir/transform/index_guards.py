"""Run-time bounds checks for accesses indexed through a buffer the kernel now trusts less.

Lowering proves or checks every computed coordinate of a Stage II kernel (``lower.
coordinate_checks``). A Stage II rewrite that changes where a coordinate comes from (a
preprocess table made a parameter by ``remove_preprocess``, an index array replaced by a
formula by ``specialize_buffer``) calls :func:`guard_blocks` first: each block gets, before its
body (and its init, when the init has such an access), one assertion per index that reads one
of the named buffers, ``0 <= index < extent`` of the accessed buffer's dimension. A failed check
stops the kernel with an ``ArgumentError``. The rewrite then edits the asserted indices like
any other expression; an assertion it makes provable can be dropped with
:func:`without_proven`.

Example
-------
The row table of SDDMM's fused loop (``J_indptr_pos``: see ``search_tables``) as the caller's:

>>> import sparsetir
>>> from sparsetir.ops.kernels import sddmm_fused
>>> func = sparsetir.lower_sparse_iter(sddmm_fused.specialize({"feat_size": 16}))["main"]
>>> table, nest = func.body.block.alloc_buffers[0], func.body.block.body.seq[1]
>>> nest = guard_blocks(nest, [table], lambda read, buf: f"{read} puts {buf} out of range")
>>> [line.strip() for line in nest.script().splitlines() if "assert" in line]
['assert J_indptr_pos[vj] - 1 >= 0 and J_indptr_pos[vj] - 1 < m, ("sparsetir.ArgumentError", ["J_indptr_pos puts X out of range"])']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.utils import structural_map
from ..lower.coordinate_checks import assertion


def guard_blocks(stmt, sources: list, message):
    """``stmt`` with the assertions of the module docstring in every block; ``message(read,
    buffer)`` is the error text for an index reading ``read`` (a name in ``sources``' buffers)
    into ``buffer``."""

    def on_block(block):
        checks = _checks(block.body, sources, message)
        init_checks = _checks(block.init, sources, message) if block.init is not None else []
        if not checks and not init_checks:
            return block
        init = tirx.SeqStmt(init_checks + [block.init]) if init_checks else block.init
        body = tirx.SeqStmt(checks + [block.body]) if checks else block.body
        return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body,
                            init, block.alloc_buffers, block.match_buffers, block.annotations)

    return structural_map(stmt, (s_tir.SBlock, on_block), order="post")


def without_proven(block):
    """``block`` without the assertions in front of its body that TVM's analyzer proves from
    the ranges of its block variables."""
    if not isinstance(block.body, tirx.SeqStmt):
        return block
    analyzer = tvm.sym.Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    kept = [s for s in block.body.seq
            if not (isinstance(s, tirx.AssertStmt) and analyzer.can_prove(s.condition))]
    body = kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
    return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body,
                        block.init, block.alloc_buffers, block.match_buffers, block.annotations)


def _checks(stmt, sources: list, message) -> list:
    own = structural_map(stmt, (s_tir.SBlockRealize, lambda _: tirx.Evaluate(0)), order="post")
    accesses = []
    tvm_ffi.structural_walk(own, [
        (tirx.BufferStore, lambda st: accesses.append((st.buffer, list(st.indices)))),
        (tvm.ir.TensorLoad, lambda ld: accesses.append((ld.source, list(ld.indices))))],
        order="pre")
    checks = {}
    for buf, indices in accesses:
        for extent, index in zip(buf.shape, indices):
            read = reads_of(index, sources)
            key = f"{index} < {extent}"
            if read and key not in checks:
                checks[key] = assertion(tirx.all(index >= 0, index < extent),
                                        message(read[0], buf.name))
    return list(checks.values())


def reads_of(expr, sources: list) -> list:
    """The names of the buffers of ``sources`` that ``expr`` loads from."""
    names = []
    tvm_ffi.structural_walk(tirx.const(0, "int32") + expr, (tvm.ir.TensorLoad, lambda ld: (
        names.extend(str(b.name) for b in sources if ld.source.same_as(b)))), order="pre")
    return names
