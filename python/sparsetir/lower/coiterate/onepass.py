"""The one-pass kernel of a CSR result (function ``onepass``): no count, rows appended per chunk.

A mixin of ``coiterate_emit.Emitter``. The rows are cut into ``n_chunks`` chunks (a scalar
parameter: the caller passes its thread count), the parallel loop. The caller gives each chunk
room for an upper bound of its entries (the sum of the chunk's rows in the operands the merge
walks) and passes the start of that room as ``indptr[first row of the chunk]``; the chunk
appends its rows there in order, writing each row's start into ``indptr[row]`` and the end of
the chunk into ``<output>_ends[chunk]``. The caller then closes the gaps between the chunks
(none with one chunk). This merges once where ``count`` then ``main`` merge twice.

Example
-------
>>> import sparsetir
>>> import sparsetir.algebra as alg
>>> csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
>>> mod = sparsetir.lower_sparse_iter(alg.compile("A(i,j) = B(i,j) + C(i,j)", formats=csr).func)
>>> [line.strip() for line in mod["onepass"].script().splitlines()
...  if "for chunk" in line or '"kernel0"' in line]
['for chunk in range(n_chunks):', 'with T.sblock("kernel0"):']
"""

from __future__ import annotations

from contextlib import contextmanager

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from .tir import INT

CHUNKS_PARAM = "n_chunks"
"""The scalar parameter of ``onepass``: how many chunks of rows (parallel iterations)."""


def has_onepass(plan) -> bool:
    """Whether ``plan`` gets a ``onepass`` function: a CSR result under a dense outer loop (the
    caller bounds the rows from the operands' row pointers) of two variables (the rows, then
    the merged columns) with nothing summed, or assembled in a row workspace (SpGEMM)."""
    return plan.outer_for and (plan.out_mode == "workspace" or (
        plan.out_mode == "rows" and len(plan.vars) == 2 and not plan.reduce))


class OnePassRows:
    """The ``onepass`` parts of an emitter (``self.plan``, slots, ``level_cases``, buffers)."""

    def declare_chunks(self) -> None:
        """The ``n_chunks`` scalar and the ``<output>_ends`` array it sizes."""
        self.n_chunks = Tb.arg(CHUNKS_PARAM, tirx.Var(CHUNKS_PARAM, INT))
        self.stage1_names[CHUNKS_PARAM] = CHUNKS_PARAM
        name = f"{self.plan.out.buf.name}_ends"
        handle = Tb.arg(name, tirx.Var(name, "handle"))
        self.ends = IRBuilder.name(name, Tb.match_buffer(handle, (self.n_chunks,), INT))
        self.stage1_names[name] = name

    @contextmanager
    def chunk_block(self, reads, chunks):
        """The parallel loop over ``chunks`` chunks of rows and its block (regions, locals):
        yields the block variable."""
        with Tb.serial(0, chunks) as c:
            IRBuilder.name("chunk", c)
            with Tb.sblock(f"{self.plan.name}0"):
                vc = IRBuilder.name("vchunk", Tb.axis.spatial(chunks, c))
                self.regions(reads, None)
                self.locals()
                yield vc

    def onepass_body(self, reads) -> None:
        """For each chunk (the parallel loop): its rows appended from ``indptr[first row]``."""
        plan = self.plan
        rows = plan.vars[0].base_axis.length
        chunks = self.n_chunks
        chunk = (rows + chunks - 1) // chunks
        axis = self.out_compressed()[0].axis
        with self.chunk_block(reads, chunks) as vc:
            self.start_outputs()
            first = tirx.min(vc * chunk, rows)
            self.set(self.counter[1], self.indptr(axis)[first])
            r = self.slot()
            self.set(r, first)
            with Tb.While(tirx.And(self.get(r) < first + chunk, self.get(r) < rows)):
                self.level_cases(0, self.root_env(), set(plan.operands), self.get(r))
                self.set(r, self.get(r) + 1)
            Tb.buffer_store(self.ends, self.get(self.counter[1]), [vc])
