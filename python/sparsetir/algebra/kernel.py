"""``AlgebraKernel``: the kernel ``sparsetir.algebra.compile`` makes of a statement in TACO's
index notation.

The statement becomes a Stage I co-iteration (``generate``), lowered by ``lower_sparse_iter``
into ``main`` (and ``count`` when the result's pattern is assembled, ``onepass`` for a CSR
one), scheduled (the outer loop ``parallel``) and built. A call converts the operands to their
declared formats, checks that the sizes agree, and runs ``onepass`` once (every operand CSR:
room per chunk of rows bounded from the operands' row pointers, the chunks moved together after)
or ``count``, allocates, and runs ``main``. A result past int32 positions (more than
``sizes.WIDE_POSITIONS`` stored entries or dense elements) is filled by the statement's kernels
generated with int64 positions (built at the first such call, then kept), where memory holds
it. It returns the result: a
``SparseTensor`` for a sparse result (every coordinate the merge visits is kept, explicit
zeros included; a result written at every coordinate, as by dense operands only, is computed
dense and stored whole), a numpy array for a dense one, a 0-d array for a scalar.

Example
-------
>>> import numpy as np, scipy.sparse as sp
>>> from sparsetir.algebra import compile
>>> k = compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
>>> B = sp.random(4, 5, density=0.4, format="csr", random_state=0)
>>> C = sp.random(4, 5, density=0.4, format="csr", random_state=1)
>>> bool(np.allclose(k(B=B, C=C).to_scipy().toarray(), (B + C).toarray()))
True
"""

from __future__ import annotations

import mmap

import numpy as np
import tvm

from ..driver.build_module import build
from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ir.attrs import param_names
from ..ir.function import SparseFunction
from ..ir.coiteration import CoiteratedAxis
from ..ir.iteration import SparseIteration
from ..lower.lower_sparse_iter import lower_sparse_iter
from ..lower.coiterate.merge_lattice import FULL, simplify
from ..lower.coiterate.onepass import CHUNKS_PARAM
from ..lower.coiterate.plan import merge_tree
from ..lower.coiterate.workspace import WORKSPACE_CHUNKS, workspace_bytes
from ..runtime.saved import save
from ..runtime.threads import cooperate_with_torch, thread_count
from ..script import from_source
from .generate import generate
from .lattice import lattices_of
from .order import plan_order
from .sizes import (INDEX_LIMIT, check_elements, check_result_memory, check_workspace,
                    index_dtype, wider)
from .storage import Levels, level_format, to_levels, to_result
from .typed import ValueTyped

KERNEL_NAME = "kernel"
"""The generated function's and iteration's name (its blocks: ``kernel0``)."""


class AlgebraKernel(ValueTyped):
    """A compiled statement: ``.func`` (Stage I), ``.lattices``, ``.plan`` (loop order and
    level-order conversions), ``rebuild(func)``, and a call with the operands by name."""

    _wide = None        # the kernels with int64 positions, once a call needs them
    _rebuilt = False    # from rebuild: its function has int32 positions only
    whole = None
    """The declared format of a sparse result written at every coordinate (computed dense,
    stored whole in it); None otherwise."""

    def __init__(self, stmt, formats: dict, dtype: str):
        self.statement = stmt
        self.plan = plan_order(stmt, formats)
        formats = self.formats = self.plan.formats
        self.dtype = dtype
        compiled = _compiled(stmt, formats, dtype, self.plan.loop)
        if compiled is None:    # computed as a dense result, stored whole in its format
            self.whole = formats[stmt.lhs.name]
            compiled = _compiled(stmt, self._kernel_formats, dtype, self.plan.loop)
        self.generated, self.func, self._kernels, self.lattices = compiled

    @property
    def _kernel_formats(self) -> dict:
        """The formats the kernels compute in (name -> ``LevelFormat``): ``formats``, with a
        result stored ``whole`` computed dense (the int64 kernels are generated from these too).

        Example
        -------
        >>> from sparsetir.algebra import compile
        >>> k = compile("A(i,j) = B(i,j) + 1", formats={"A": "CSR", "B": "CSR"})
        >>> k.formats["A"].kinds, k._kernel_formats["A"].kinds
        (('dense', 'compressed'), ('dense', 'dense'))
        """
        if self.whole is None:
            return self.formats
        lhs = self.statement.lhs
        return {**self.formats, lhs.name: level_format(None, len(lhs.indices), lhs.name)}

    def rebuild(self, func) -> "AlgebraKernel":
        """The kernel for ``func``: a rewritten Stage I function, or a Stage II module from
        ``lower_sparse_iter(self.func)`` that you scheduled (built as it is; a call runs its
        ``onepass`` where it has one and the operands allow, else ``count`` and ``main``)."""
        if not isinstance(func, (SparseFunction, tvm.IRModule)):
            raise SparseTIRTypeError("rebuild takes a SparseFunction or the IRModule of "
                                     f"lower_sparse_iter, got {type(func).__name__}")
        clone = object.__new__(AlgebraKernel)
        clone.__dict__.update(self.__dict__)
        clone.infers_dtype = False             # computes in its function's type only
        clone.__dict__.pop("_typed", None)
        if isinstance(func, SparseFunction):
            clone.func = func
        clone._kernels = _build(func)
        clone._wide, clone._rebuilt = None, True
        missing = [name for name in self._kernels if name != "onepass"
                   and name not in clone._kernels]
        if missing:
            raise SparseTIRValueError(
                f"rebuild: the module has no {' or '.join(map(repr, missing))}; "
                f"lower_sparse_iter(k.func) gives {', '.join(map(repr, self._kernels))}: "
                "schedule them, do not remove them (only 'onepass' may be left out)")
        return clone

    def _retyped(self, dtype: str) -> "AlgebraKernel":
        return AlgebraKernel(self.statement, self.formats, dtype)

    def save(self, path) -> None:
        """Write the compiled statement to the file ``path``; ``sparsetir.load(path)`` gives it
        back (its kernels as ``Kernel.save`` keeps them). Pickles carry the same.

        Example
        -------
        >>> import numpy as np, scipy.sparse as sp, sparsetir
        >>> k = sparsetir.algebra.compile("A(i,j) = B(i,j) + C(i,j)",
        ...                               formats={"A": "CSR", "B": "CSR", "C": "CSR"})
        >>> B = sp.random(4, 5, density=0.4, format="csr", random_state=0)
        >>> C = sp.random(4, 5, density=0.4, format="csr", random_state=1)
        >>> k.save("add.stk")
        >>> A = sparsetir.load("add.stk")(B=B, C=C)       # as k(B=B, C=C)
        >>> bool(np.allclose(A.to_dense(), (B + C).toarray()))
        True
        """
        save(self, path)

    def __call__(self, **operands):
        typed = self.for_operands(operands)
        if typed is not self:
            return typed(**operands)
        stmt, gen = self.statement, self.generated
        out_name = stmt.lhs.name
        levels = read_operands(stmt, gen.tensors, self.dtype, operands)
        sizes = _sizes(stmt, levels)
        _check_row_pointers(stmt, gen, sizes)
        out_fmt = gen.tensors[out_name]
        out_shape = tuple(sizes[v] for v in stmt.lhs.indices)
        args = {f"n_{v}": sizes[v] for v in gen.loop_vars}
        for name, lv in levels.items():
            _bind(args, gen.names[name], lv)
        names = gen.names[out_name]
        operand_index = index_dtype(max((len(lv.vals) for lv in levels.values()), default=0))
        if out_fmt.is_dense:
            elements = int(np.prod(out_shape, dtype=object))
            index = wider(operand_index, index_dtype(elements))
            check_result_memory(stmt, index, 0 if self.whole is None else 2 * elements, elements,
                                self.dtype, "elements")   # a whole result: coordinates too
            stored = np.empty([out_shape[d] for d in out_fmt.dims], self.dtype)
            args[names["vals"]] = stored.reshape(-1)        # main writes every element
            self._run("main", args, index=index)
            dense = stored.transpose(np.argsort(out_fmt.dims))
            return dense if self.whole is None else to_result(
                stored_whole(dense, self.whole), self.whole)
        self._check_workspace(sizes)
        bounds = _row_bounds(stmt, gen, levels, self._kernels) if operand_index == "int32" \
            else None
        if bounds is not None:
            out = _assemble_once(self, args, names, out_shape, bounds)
        else:
            out = _assemble(self, args, names, out_fmt, out_shape, operand_index)
        return to_result(out, out_fmt)

    def _check_workspace(self, sizes: dict) -> None:
        """``MemoryError`` before a call whose row workspaces (a CSR result with an output
        index under a sum: Gustavson) cannot fit in memory at once."""
        stmt, loop = self.statement, self.generated.loop_vars
        out = stmt.lhs.indices
        if set(loop[:len(out)]) == set(out):          # no output index under a sum
            return
        width = sizes[max(out, key=loop.index)]
        rows = sizes[loop[0]]
        per_chunk = workspace_bytes(width, np.dtype(self.dtype).itemsize)
        check_workspace(stmt, per_chunk, min(rows, WORKSPACE_CHUNKS), thread_count())

    def _kernels_of(self, index: str) -> dict:
        """The kernels with ``index`` positions (``"int32"``: those compiled; ``"int64"``:
        generated again with int64 positions at the first call that needs them, without
        ``onepass``, whose room is bounded in int32)."""
        if index == "int32":
            return self._kernels
        if self._wide is None:
            if self._rebuilt:
                raise SparseTIRValueError(
                    f"{self.statement.text!r}: this call needs kernels with int64 positions "
                    f"(more than {INDEX_LIMIT} positions), which a kernel from rebuild does "
                    "not have (its function addresses int32 positions); call the kernel of "
                    "sparsetir.algebra.compile")
            wide = generate(self.statement, self._kernel_formats, self.dtype, KERNEL_NAME,
                            index_dtype="int64", loop=self.plan.loop)
            self._wide = _build(from_source(wide.text), without=("onepass",))
        return self._wide

    def _run(self, which: str, args: dict, validate: bool = True,
             index: str = "int32") -> None:
        """Run kernel ``which`` with ``index`` positions; for int64 ones the int32 index
        arrays (the operands': the caller allocates the results' arrays as int64) are
        widened."""
        kernel, params = self._kernels_of(index)[which]
        values = [args[p] for p in params]
        if index == "int64":
            values = [v.astype(np.int64) if isinstance(v, np.ndarray) and v.dtype == np.int32
                      else v for v in values]
        try:
            kernel(*values, validate=validate)
        except Exception as err:  # noqa: BLE001  (TVM raises bad_alloc as an InternalError)
            if "bad_alloc" not in str(err):
                raise
            raise MemoryError(f"{self.statement.text!r}: {which} could not allocate its "
                              f"workspace (std::bad_alloc); sizes {_size_text(args)}") from None


def _merges_an_output_index(func: SparseFunction) -> bool:
    """Whether an output index of ``func``'s iteration walks a merge (``T.coiterate``) that
    is not its whole axis by a term without the index; where none does, every coordinate of
    the result is written (a merge of summed indices only, as in ``A(i,j) = B(i,j) + C(i,k)``,
    still writes every ``(i, j)``, and so does ``T.union(B, J)``, ``A(i,j) = B(i,j) + 1``)."""
    return any(isinstance(v.axis, CoiteratedAxis) and not v.is_reduction
               and simplify(merge_tree(v.axis.merge), full=set()) != FULL
               for it in func.body if isinstance(it, SparseIteration) for v in it.sp_iter_vars)


def _compiled(stmt, formats: dict, dtype: str, loop=None):
    """``(generated, func, kernels, lattices)`` of ``stmt`` in ``formats``; None for a sparse
    result that every term writes at every coordinate (dense operands only, or a term without
    one of its indices): nothing merges there, so no kernel counts the result's pattern."""
    generated = generate(stmt, formats, dtype, KERNEL_NAME, loop=loop)
    func = from_source(generated.text)
    sparse_result = not formats[stmt.lhs.name].is_dense
    if sparse_result and not _merges_an_output_index(func):
        return None
    kernels = _build(func)      # before the lattices: a merge too large stops it
    if sparse_result and "count" not in kernels:
        return None
    return generated, func, kernels, lattices_of(stmt, generated)


def stored_whole(dense: np.ndarray, fmt) -> Levels:
    """The storage in ``fmt`` of every coordinate of the result ``dense`` (its zeros kept, as a
    merge keeps every coordinate it visits): each compressed level holds all of its
    dimension's coordinates under every parent position, in int64 where they pass int32.

    Example
    -------
    >>> from sparsetir.algebra.storage import level_format
    >>> lv = stored_whole(np.arange(6.).reshape(2, 3), level_format("DCSR", 2, "A"))
    >>> [p.tolist() for p in lv.pos], [c.tolist() for c in lv.crd], lv.vals.tolist()
    ([[0, 2], [0, 3, 6]], [[0, 1], [0, 1, 2, 0, 1, 2]], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    """
    pos, crd, parents = [], [], 1
    for kind, dim in zip(fmt.kinds, fmt.dims):
        size = dense.shape[dim]
        if kind == "compressed":
            index = np.dtype(index_dtype(parents * size))
            pos.append(np.arange(parents + 1, dtype=index) * index.type(size))
            crd.append(np.tile(np.arange(size, dtype=index), parents))
        else:
            pos.append(None)
            crd.append(None)
        parents *= size
    return Levels(dense.shape, pos, crd, np.ascontiguousarray(dense.transpose(fmt.dims)).reshape(-1))


def read_operands(stmt, formats: dict, dtype: str, operands: dict) -> dict:
    """Each operand of ``stmt`` (by name) as ``Levels`` in its format (``formats``: name ->
    ``LevelFormat``); unknown or missing names, types and dtypes refused by name."""
    wanted = [n for n in formats if n != stmt.lhs.name]
    for name in operands:
        if name not in wanted:
            raise SparseTIRValueError(f"unknown operand {name!r}; {stmt.text!r} reads "
                                      f"{', '.join(wanted)}")
    levels = {}
    for name in wanted:
        if name not in operands:
            raise SparseTIRValueError(f"missing operand {name!r} of {stmt.text!r}")
        rank = len(next(a for a in stmt.accesses if a.name == name).indices)
        levels[name] = to_levels(operands[name], formats[name], dtype, name, rank)
    return levels


def _build(func, without=()) -> dict:
    """The kernels (``main``, and ``count``, ``onepass``) of a Stage I function or a Stage II
    module but those named in ``without``, each with its parameters' Stage I names in call
    order."""
    cooperate_with_torch()       # parallel loops on sparsetir's task pool (as ops does)
    mod = lower_sparse_iter(func) if isinstance(func, SparseFunction) else func
    scheduled = isinstance(func, tvm.IRModule)
    kernels = {}
    for gv in mod.functions:
        if gv.name_hint in without:
            continue
        prim = mod[gv.name_hint]
        single = tvm.IRModule({"main": prim.with_attr("global_symbol", "main")})
        if not scheduled:
            single = _default_schedule(single)
        names = param_names(prim)
        params = [names.get(p.name, p.name) for p in prim.params]
        kernels[gv.name_hint] = (build(single, "llvm", schedule="none", cache=True), params)
    return kernels


def _default_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """The outer loop of the top-level block parallel where it walks an output index (each
    iteration owns its rows); serial where it is summed (a scalar result: ``s = 2 + B(i,j)``
    over dense walks, every iteration adds into ``s``)."""
    sch = tvm.s_tir.Schedule(mod)
    block = sch.get_sblock(f"{KERNEL_NAME}0")
    loops = sch.get_loops(block)
    iter_vars = sch.get(block).iter_vars
    if loops and iter_vars and iter_vars[0].iter_type == tvm.tirx.IterVar.DataPar:
        sch.parallel(loops[0])
    return sch.mod


def _check_row_pointers(stmt, gen, sizes: dict) -> None:
    """A compressed level under a dense one has a row pointer of the dense index's size + 1
    entries: refused where that passes int32 (2**31 - 1 rows; larger sizes are refused by the
    call's own check of its size arguments)."""
    for access in (stmt.lhs,) + stmt.accesses:
        kinds, dims = gen.tensors[access.name].kinds, gen.tensors[access.name].dims
        for l in range(len(kinds) - 1):
            if kinds[l] == "dense" and kinds[l + 1] == "compressed":
                v = access.indices[dims[l]]
                if sizes[v] <= INDEX_LIMIT:
                    check_elements(f"of {access.name} over {v}", (sizes[v] + 1,),
                                   "the row pointer")


def _size_text(args: dict) -> str:
    """The size arguments of a call (``n_i = 4, n_j = 2147483647``), for an error message."""
    return ", ".join(f"{k} = {v}" for k, v in args.items() if k.startswith("n_"))


def _sizes(stmt, levels: dict) -> dict:
    sizes = {}
    for access in stmt.accesses:
        shape = levels[access.name].shape
        for dim, v in enumerate(access.indices):
            if sizes.setdefault(v, shape[dim]) != shape[dim]:
                raise SparseTIRValueError(
                    f"column {access.column}: {access.name}'s dimension {dim} ({v}) has size "
                    f"{shape[dim]}, but {v} has size {sizes[v]} elsewhere in {stmt.text!r}")
    return sizes


def _bind(args: dict, names: dict, lv: Levels) -> None:
    args[names["vals"]] = lv.vals
    for pos, crd, nnz, p, c in zip(names["pos"], names["crd"], names["nnz"], lv.pos, lv.crd):
        if pos is not None:
            args[pos], args[crd], args[nnz] = p, c, len(c)


def _assemble(kernel: AlgebraKernel, args: dict, names: dict, fmt, shape,
              operand_index: str) -> Levels:
    """Count (with the operands' index type), check the memory, allocate, fill (with int64
    positions where the result passes int32): the result's arrays."""
    compressed = [l for l, k in enumerate(fmt.kinds) if k == "compressed"]
    for l in compressed:
        args[names["nnz"][l]] = 0
    if fmt.kinds[0] == "dense":                       # rows: count writes each row's count
        rows = shape[fmt.dims[0]]
        lengths = np.zeros(rows + 1, operand_index)   # a row's count fits: at most n_j
        args[names["pos"][1]] = lengths
        kernel._run("count", args, index=operand_index)
        total = np.cumsum(lengths, dtype=np.int64)
        nnz = [None, int(total[-1])]
        sizes = [rows + 1]
    else:                                             # appended: count writes each level's total
        counts = np.zeros(len(compressed), np.int64)      # counted in int64: never wraps
        args[f"{names['buffer']}_counts"] = counts
        kernel._run("count", args, index=operand_index)
        nnz = [int(c) for c in counts]
        sizes = [parents + 1 for parents in [1] + nnz[:-1]]
    index = wider(operand_index, index_dtype(max(n for n in nnz if n is not None)))
    positions = sum(sizes) + sum(n for n in nnz if n is not None)
    check_result_memory(kernel.statement, index, positions, nnz[-1], kernel.dtype)
    if fmt.kinds[0] == "dense":
        pos = [None, total.astype(index, copy=False)]
        args[names["pos"][1]] = pos[1]
    else:
        pos = [np.zeros(size, index) for size in sizes]
        for l, p in zip(compressed, pos):
            args[names["pos"][l]] = p
    crd = [None if n is None else np.zeros(n, index) for n in nnz]
    vals = np.empty(nnz[-1], kernel.dtype)                # main writes every slot
    for l in compressed:
        args[names["crd"][l]], args[names["nnz"][l]] = crd[l], nnz[l]
    args[names["vals"]] = vals
    kernel._run("main", args, validate=False, index=index)   # count checked the same index arrays
    return Levels(shape, pos, crd, vals)



def _row_bounds(stmt, gen, levels: dict, kernels: dict):
    """For the one-pass kernel: a bound on the result's entries before each row (``rows + 1``
    numbers, int64), or None (count, then fill). Every operand is CSR with its indices in loop
    order; with two loop indices a row holds at most what its merge visits (a union: the sum
    of the operands' row lengths, an intersection: the least of them); for
    ``X(i,k) * Y(k,j)`` (SpGEMM) at most the lengths of the rows of ``Y`` that row ``i`` of
    ``X`` names; and no row holds more than the result's columns (on Facebook's SpGEMM, that
    cuts the room from 149M entries to 15.2M for 6.9M stored)."""
    if "onepass" not in kernels:
        return None
    loop = tuple(gen.loop_vars)
    for access in stmt.accesses:
        fmt = gen.tensors[access.name]
        order = tuple(access.indices[d] for d in fmt.dims)
        if fmt.kinds != ("dense", "compressed") or \
                [v for v in loop if v in order] != list(order):
            return None
    pos = {a.name: levels[a.name].pos[1].astype(np.int64) for a in stmt.accesses}
    last = stmt.accesses[-1].name
    columns = levels[last].shape[gen.tensors[last].dims[-1]]      # the inner loop's size
    if len(loop) == 2:
        lengths = _merged_lengths(gen.merges.get(loop[-1]),
                                  {name: np.diff(p) for name, p in pos.items()})
    else:
        x, y = (stmt.accesses + (None, None))[:2]
        i, k, j = loop
        if len(stmt.accesses) != 2 or x.indices != (i, k) or y.indices != (k, j) or \
                gen.merges.get(k) != ("intersect", [x.name, y.name]):
            return None
        products = np.concatenate([[0], np.cumsum(np.diff(pos[y.name])[levels[x.name].crd[1]])])
        lengths = np.diff(products[pos[x.name]])
    bound = np.concatenate([[0], np.cumsum(np.minimum(lengths, columns))])
    return bound if index_dtype(int(bound[-1])) == "int32" else None


def _merged_lengths(tree, lengths: dict) -> np.ndarray:
    """A bound on each row's length under the merge ``tree`` (a tensor name or ``(op, kids)``)
    of operands with row lengths ``lengths``; every operand's sum where the tree is not one."""
    if isinstance(tree, str):
        return lengths[tree]
    if isinstance(tree, tuple) and tree[0] in ("union", "intersect"):
        kids = [_merged_lengths(kid, lengths) for kid in tree[1]]
        return sum(kids) if tree[0] == "union" else np.minimum.reduce(kids)
    return sum(lengths.values())


def _assemble_once(kernel: AlgebraKernel, args: dict, names: dict, shape, bounds) -> Levels:
    """A CSR result in one pass: each chunk of rows (one per thread) appends into room for the
    bound of its entries; the chunks are then moved together, or copied out when they fill
    less than half the room."""
    rows = len(bounds) - 1
    total = int(bounds[-1])
    chunks = max(1, min(thread_count(), rows))
    per = -(-rows // chunks)
    firsts = np.minimum(np.arange(chunks + 1) * per, rows)
    starts = bounds[firsts]
    indptr = np.empty(rows + 1, np.int32)
    indptr[firsts[:-1]] = starts[:-1]
    ends = np.empty(chunks, np.int32)
    crd, vals = _paged_in(total, np.int32), _paged_in(total, kernel.dtype)
    args.update({names["pos"][1]: indptr, names["crd"][1]: crd, names["nnz"][1]: total,
                 names["vals"]: vals, CHUNKS_PARAM: chunks, f"{names['buffer']}_ends": ends})
    kernel._run("onepass", args)
    lengths = ends - starts[:-1]
    finals = np.concatenate([[0], np.cumsum(lengths)])
    for c in range(1, chunks):             # chunk c follows chunk c - 1
        indptr[firsts[c]:firsts[c + 1]] -= starts[c] - finals[c]
    nnz = int(finals[-1])
    indptr[rows] = nnz
    if 2 * nnz < total:                    # copied out: the room is freed
        pieces = [slice(starts[c], ends[c]) for c in range(chunks)]
        return Levels(shape, [None, indptr], [None, np.concatenate([crd[p] for p in pieces])],
                      np.concatenate([vals[p] for p in pieces]))
    for c in range(1, chunks):
        if starts[c] != finals[c] and lengths[c]:
            crd[finals[c]:finals[c + 1]] = crd[starts[c]:ends[c]]
            vals[finals[c]:finals[c + 1]] = vals[starts[c]:ends[c]]
    return Levels(shape, [None, indptr], [None, crd[:nnz]], vals[:nnz])


def _paged_in(size: int, dtype) -> np.ndarray:
    """An uninitialised array whose pages this thread has touched: page faults taken by the
    kernel's threads at once into fresh memory cost about 75 ms of system time per call on
    Facebook's SpGEMM (2 threads, transparent huge pages), faults taken here about 5 ms (that
    call: 96 ms against 90-150 ms untouched; with 4 KiB pages instead, 127 ms, and Email-Enron's
    A + B 257 ms against 48). The whole room becomes resident, written or not: for SpGEMM at
    most the sum over rows of min(products, columns) entries."""
    array = np.empty(size, dtype)
    array[::max(1, mmap.PAGESIZE // array.itemsize)] = 0
    return array
