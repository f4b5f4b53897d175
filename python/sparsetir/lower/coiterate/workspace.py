"""Gustavson's row workspace for a CSR result with an output variable under a sum (SpGEMM).

A mixin of ``coiterate_emit.Emitter``: the rows are cut into ``WORKSPACE_CHUNKS`` chunks, the
parallel loop; each chunk allocates a value array, a marker per column (the row that last
touched it) and the list of the row's columns. ``count`` counts each row's distinct columns into
``indptr[i + 1]``; ``main`` adds the products into the workspace, orders the row's columns
(the columns each walk of the last output variable lists are sorted runs, merged pairwise;
or a scan of the marker when the row holds many of them) and writes the row. ``onepass`` does
what ``main`` does over ``n_chunks`` chunks, appending the rows from the room the caller gave
each chunk (``coiterate_onepass``): no count.

Example
-------
>>> import sparsetir
>>> import sparsetir.algebra as alg
>>> csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
>>> mod = sparsetir.lower_sparse_iter(alg.compile("A(i,j) = B(i,k) * C(k,j)", formats=csr).func)
>>> lines = [line.strip() for line in mod["main"].script().splitlines()]
>>> [line for line in lines if "for chunk" in line or '"kernel0"' in line]
['for chunk in range(64):', 'with T.sblock("kernel0"):']
>>> [line.split(" = ")[0] for line in lines if "sblock_alloc_buffer((n_j,)" in line]
['workspace', 'marker', 'touched', 'merged']
"""

from __future__ import annotations

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from .tir import INT, and_then

WORKSPACE_CHUNKS = 64
"""Chunks of rows a workspace (Gustavson) kernel runs in parallel, each with its own workspace."""
DENSE_SCAN_RATIO = 8
"""A workspace row holding more than 1/8 of the columns is read off its marker in order
instead of sorted."""


def workspace_bytes(width: int, itemsize: int) -> int:
    """The bytes one chunk's workspace allocates in ``main`` or ``onepass`` (``count`` less)
    for a result of ``width`` columns and values of ``itemsize`` bytes: the values, the marker,
    the list of columns, the merge's second list and the runs (``width + 1``), all below.

    Example
    -------
    >>> workspace_bytes(1000, 8)
    24004
    """
    return width * itemsize + 4 * width * 3 + 4 * (width + 1)


class WorkspaceRows:
    """The workspace parts of an emitter (``self.plan``, slots, ``level_cases``, buffers)."""

    def workspace_body(self, reads) -> None:
        """Gustavson: rows in ``WORKSPACE_CHUNKS`` (``onepass``: ``n_chunks``) parallel chunks,
        each with a dense row
        workspace (values, a marker per column, the list of columns touched, and for ``main``
        the sorted runs of that list and a second list to merge them into)."""
        plan = self.plan
        rows = plan.vars[0].base_axis.length
        width = plan.vars[max(lv.var for lv in plan.out.levels)].base_axis.length
        chunks = self.n_chunks if self.mode == "onepass" else WORKSPACE_CHUNKS
        chunk = (rows + chunks - 1) // chunks
        with self.chunk_block(reads, chunks) as vc:
            if self.mode == "onepass":    # appended from the chunk's room (coiterate_onepass)
                self.appended = self.slot()
                self.set(self.appended,
                         self.indptr(self.out_compressed()[0].axis)[tirx.min(vc * chunk, rows)])
            dtype = plan.out.buf.dtype
            self.ws = IRBuilder.name("workspace", Tb.sblock_alloc_buffer((width,), dtype))
            self.mark = IRBuilder.name("marker", Tb.sblock_alloc_buffer((width,), INT))
            self.touched = IRBuilder.name("touched", Tb.sblock_alloc_buffer((width,), INT))
            if self.mode != "count":
                self.merged = IRBuilder.name("merged", Tb.sblock_alloc_buffer((width,), INT))
                runs = tirx.Cast("int64", width) + 1       # width may be 2**31 - 1
                self.runs = IRBuilder.name("runs", Tb.sblock_alloc_buffer((runs,), INT))
                self.n_runs = self.slot()
            z = self.slot()
            self.set(z, tirx.const(0, INT))
            with Tb.If(vc * chunk < rows):      # a chunk past the last row touches nothing
                with Tb.Then():
                    with Tb.While(self.get(z) < width):
                        Tb.buffer_store(self.mark, tirx.const(-1, INT), [self.get(z)])
                        self.set(z, self.get(z) + 1)
            r = self.slot()
            self.set(r, tirx.const(0, INT))
            with Tb.While(tirx.And(self.get(r) < chunk, vc * chunk + self.get(r) < rows)):
                row = vc * chunk + self.get(r)
                self.ws_len = self.slot()
                self.set(self.ws_len, tirx.const(0, INT))
                if self.mode != "count":
                    self.set(self.n_runs, tirx.const(0, INT))
                self.row = row
                self.level_cases(0, self.root_env(), set(plan.operands), row)
                self.finish_workspace_row(row)
                self.set(r, self.get(r) + 1)
            if self.mode == "onepass":
                Tb.buffer_store(self.ends, self.get(self.appended), [vc])

    def finish_workspace_row(self, row) -> None:
        axis = self.out_compressed()[0].axis
        count = self.get(self.ws_len)
        if self.mode == "count":
            Tb.buffer_store(self.indptr(axis), count, [row + 1])
            return
        if self.mode == "onepass":
            Tb.buffer_store(self.indptr(axis), self.get(self.appended), [row])
        width = self.mark.shape[0]
        with Tb.If(count * DENSE_SCAN_RATIO > width):
            with Tb.Then():                 # many columns: read them off the marker in order
                self.scan_marker(row, width)
            with Tb.Else():
                self.merge_runs(count)
        q = self.slot()
        self.set(q, tirx.const(0, INT))
        start = self.get(self.appended) if self.mode == "onepass" else self.indptr(axis)[row]
        with Tb.While(self.get(q) < count):
            col = self.touched[self.get(q)]
            at = start + self.get(q)
            Tb.buffer_store(self.indices(axis), col, [at])
            Tb.buffer_store(self.values(self.plan.out), self.ws[col], [at])
            self.set(q, self.get(q) + 1)
        if self.mode == "onepass":
            self.set(self.appended, self.get(self.appended) + count)

    def scan_marker(self, row, width) -> None:
        """The row's columns in order: those whose marker holds the row."""
        j, q = self.slot(), self.slot()
        self.set(j, tirx.const(0, INT))
        self.set(q, tirx.const(0, INT))
        with Tb.While(self.get(j) < width):
            with Tb.If(self.mark[self.get(j)] == row):
                with Tb.Then():
                    Tb.buffer_store(self.touched, self.get(j), [self.get(q)])
                    self.set(q, self.get(q) + 1)
            self.set(j, self.get(j) + 1)

    def start_run(self) -> None:
        """Entering the walk of the last output variable: the columns it lists next are sorted
        (a new run, unless the last run is still empty)."""
        if self.mode == "count":
            return
        n, runs, length = self.get(self.n_runs), self.runs, self.get(self.ws_len)
        with Tb.If(tirx.Or(n == 0, and_then(n > 0, runs[n - 1] < length))):
            with Tb.Then():
                Tb.buffer_store(runs, length, [n])
                self.set(self.n_runs, n + 1)

    def merge_runs(self, count) -> None:
        """Sort the row's columns ``touched[0:count]``: merge its sorted runs pairwise, back and
        forth between ``touched`` and ``merged``, until one is left (in ``touched``)."""
        with Tb.While(self.get(self.n_runs) > 1):
            self.merge_pass(self.touched, self.merged, count)
            with Tb.If(self.get(self.n_runs) > 1):
                with Tb.Then():
                    self.merge_pass(self.merged, self.touched, count)
                with Tb.Else():
                    self.copy(self.merged, self.touched, count)

    def merge_pass(self, src, dst, count) -> None:
        """Merge runs 2m and 2m+1 of ``src`` into ``dst``, for every m (halves the runs)."""
        m, q, x, y, o, mid, stop = (self.slot() for _ in range(7))
        runs, n = self.runs, self.get(self.n_runs)
        self.set(m, tirx.const(0, INT))
        self.set(q, tirx.const(0, INT))
        with Tb.While(self.get(m) < n):
            start = runs[self.get(m)]
            middle = tirx.if_then_else(self.get(m) + 1 < n, runs[self.get(m) + 1], count)
            end = tirx.if_then_else(self.get(m) + 2 < n, runs[self.get(m) + 2], count)
            self.set(x, start)
            self.set(o, start)
            self.set(y, middle)
            self.set(mid, middle)
            self.set(stop, end)
            mid_v, end_v = self.get(mid), self.get(stop)
            with Tb.While(tirx.And(self.get(x) < mid_v, self.get(y) < end_v)):
                with Tb.If(src[self.get(x)] < src[self.get(y)]):
                    with Tb.Then():
                        Tb.buffer_store(dst, src[self.get(x)], [self.get(o)])
                        self.set(x, self.get(x) + 1)
                    with Tb.Else():
                        Tb.buffer_store(dst, src[self.get(y)], [self.get(o)])
                        self.set(y, self.get(y) + 1)
                self.set(o, self.get(o) + 1)
            for rest, stop in ((x, mid_v), (y, end_v)):
                with Tb.While(self.get(rest) < stop):
                    Tb.buffer_store(dst, src[self.get(rest)], [self.get(o)])
                    self.set(rest, self.get(rest) + 1)
                    self.set(o, self.get(o) + 1)
            Tb.buffer_store(runs, start, [self.get(q)])
            self.set(q, self.get(q) + 1)
            self.set(m, self.get(m) + 2)
        self.set(self.n_runs, self.get(q))

    def copy(self, src, dst, count) -> None:
        """``dst[0:count] = src[0:count]``."""
        k = self.slot()
        self.set(k, tirx.const(0, INT))
        with Tb.While(self.get(k) < count):
            Tb.buffer_store(dst, src[self.get(k)], [self.get(k)])
            self.set(k, self.get(k) + 1)

    def scatter_workspace(self, value, col) -> None:
        """Add ``value`` at column ``col`` of the row's workspace (first touch: list it)."""
        with Tb.If(self.mark[col] != self.row):
            with Tb.Then():
                Tb.buffer_store(self.mark, self.row, [col])
                Tb.buffer_store(self.touched, col, [self.get(self.ws_len)])
                self.set(self.ws_len, self.get(self.ws_len) + 1)
                if self.mode != "count":
                    Tb.buffer_store(self.ws, value, [col])
            if self.mode != "count":
                with Tb.Else():
                    Tb.buffer_store(self.ws, self.ws[col] + value, [col])
