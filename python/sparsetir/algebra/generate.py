"""From a statement in index notation and its operands' formats to a Stage I co-iteration.

Each index variable is one coordinate axis (``I = T.dense_fixed(n_i)``); each operand's
compressed level is a ``T.sparse_variable`` under the level before it (under ``R =
T.dense_fixed(1)`` when the first level is compressed, read at index 0). The loop order is the
output's level order followed by the summed variables in order of appearance. For every
variable, the merge of the expression (TACO's rule: ``+``/``-`` is a union, ``*``/``/`` an
intersection, a term without the variable makes a sum whole) becomes ``T.coiterate`` when it
holds a compressed level; otherwise the variable walks its whole axis. A term without the
variable is the axis itself in the union (``C(i,j) * E(i,j) + 1``: ``T.coiterate(J,
T.union(T.intersect(C, E), J))``): the walk is whole, and the product is still computed only
where ``C`` stores (elsewhere the sum is 1, NaN in ``E`` or not). A summed variable merges
the terms that use a summed variable only: the others are the sum's initial value
(``s = 2 + B(i,j)`` walks ``B``'s entries and starts from 2).

Example
-------
>>> from sparsetir.algebra.notation import parse
>>> from sparsetir.algebra.storage import level_format
>>> stmt = parse("A(i,j) = B(i,j) * C(i,j)")
>>> fmts = {n: level_format("CSR", 2, n) for n in "ABC"}
>>> gen = generate(stmt, fmts, "float64")
>>> [line.strip() for line in gen.text.splitlines() if "sp_iter" in line]
['with T.sp_iter([I, T.coiterate(J, T.intersect(B, C))], "SS", "kernel") as [i, j]:']
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, replace

from ..lower.coiterate.merge_lattice import FULL
from ..lower.coiterate.onepass import CHUNKS_PARAM

from .notation import Access, Binary, Const, Neg, NotationError, Statement, signed_terms
from .order import plan_order

DENSE = FULL
"""Every coordinate: the merge of a term that does not depend on the variable in a sum of terms
that do (a leaf of the sum's union, which makes it whole; the Stage I names the co-iterated
axis there), and of a quotient whose dividend does not (``1 / E(i,j)``)."""


@dataclass
class Generated:
    """The Stage I text and what a call needs to pass arguments by name."""

    text: str
    loop_vars: tuple
    tensors: dict        # name -> LevelFormat
    names: dict          # name -> {"vals": param, "pos": [..], "crd": [..], "nnz": [..]}
    merges: dict         # index variable -> merge tree (names, DENSE) or None


def generate(stmt: Statement, formats: dict, dtype: str, name: str = "kernel",
             index_dtype: str = "int32", loop: tuple = None) -> Generated:
    """The Stage I function text of ``stmt`` over operands in ``formats`` (name -> LevelFormat),
    its sizes, positions and coordinates in ``index_dtype`` (``"int32"``, or ``"int64"`` for
    results past the int32 positions: ``algebra.sizes``), with loops in the order ``loop``
    (default: ``loop_order``'s)."""
    lhs = stmt.lhs
    out_fmt = formats[lhs.name]
    tensors = {lhs.name: out_fmt}
    for access in stmt.accesses:
        tensors.setdefault(access.name, formats[access.name])
    _check_divisors(stmt.rhs, tensors, stmt.text)
    _check_index_names(stmt)
    accesses = {lhs.name: lhs, **{a.name: a for a in stmt.accesses}}
    loop = loop_order(stmt, tensors) if loop is None else loop
    if out_fmt.is_dense:             # a dense result is stored in loop order (and transposed)
        out_fmt = replace(out_fmt, dims=tuple(sorted(range(len(lhs.indices)),
                                                     key=lambda d: loop.index(lhs.indices[d]))))
        tensors[lhs.name] = out_fmt
    script = _ScriptNames(name, tensors, loop)
    axis_names = script.axes
    merges = {v: _merge(stmt.rhs, v) for v in loop}
    if stmt.reduction_vars:       # the terms without summed indices are the init: not merged
        summed_terms = _split_terms(stmt.rhs, set(stmt.reduction_vars))[1]
        merges.update({v: _sum_merge(*[_merge(term, v) for _, term in summed_terms])
                       for v in stmt.reduction_vars})
    lines, params, names, sizes = [], [], {}, []
    uses_root = False
    decls = []
    for tname, fmt in tensors.items():
        buf = script.buffers[tname]
        low = buf.lower() if buf.lower() != buf else buf + "_"
        entry = {"buffer": buf, "vals": script.fresh(f"{low}_vals"), "pos": [], "crd": [],
                 "nnz": []}
        params.append(entry["vals"])
        axes = []
        parent = None
        for l, kind in enumerate(fmt.kinds):
            var = accesses[tname].indices[fmt.dims[l]]
            if kind == "dense":
                parent = axis_names[var]
                axes.append(parent)
                for key in ("pos", "crd", "nnz"):
                    entry[key].append(None)
                continue
            if parent is None:
                uses_root = True
                parent = script.root
                axes.append(parent)
            axis = script.fresh(f"{buf}{l}")
            pos, crd, nnz = (script.fresh(f"{low}{l}_{key}") for key in ("pos", "crd", "nnz"))
            params += [pos, crd]
            sizes.append(nnz)
            entry["pos"].append(pos)
            entry["crd"].append(crd)
            entry["nnz"].append(nnz)
            decls.append(f'{axis} = T.sparse_variable({parent}, (n_{var}, {nnz}), ({pos}, {crd}), '
                         f'"{index_dtype}")')
            parent = axis
            axes.append(axis)
        if not fmt.kinds:
            uses_root = True
            axes.append(script.root)
        decls.append(f'{buf} = T.match_sparse_buffer({entry["vals"]}, ({", ".join(axes)},), '
                     f'"{dtype}")')
        names[tname] = entry
    scalars = [f"n_{v}" for v in loop] + sizes
    sig = ", ".join([f"{p}: T.handle" for p in params] + [f"{s}: T.{index_dtype}" for s in scalars])
    lines.append("@T.prim_func")
    lines.append(f"def {name}({sig}):")
    body = ['T.func_attr({"global_symbol": "main", "tir.noalias": True})']
    if uses_root:
        body.append(f"{script.root} = T.dense_fixed(1)")
    body += [f"{axis_names[v]} = T.dense_fixed(n_{v})" for v in loop]
    body += decls
    iter_axes = []
    for v in loop:
        tree = merges[v]
        # co-iterated where an operand is compressed at v, even where the merge is whole or
        # leaves it out (F(i,j) * (C(i,j) * E(i,j) + 1), F dense: "F"): its absent entries
        # are then no term of the expression, as in every merge
        if tree is not None and any(_is_compressed_at(tensors[a.name], a, v)
                                    for a in stmt.accesses):
            merge = _merge_text(("union", [tree]) if isinstance(tree, str) else tree,
                                {**script.buffers, DENSE: axis_names[v]})
            iter_axes.append(f"T.coiterate({axis_names[v]}, {merge})")
        else:
            iter_axes.append(axis_names[v])
    kinds = "".join("S" if v in lhs.indices else "R" for v in loop)
    body.append(f'with T.sp_iter([{", ".join(iter_axes)}], "{kinds}", "{name}") as '
                f'[{", ".join(script.vars[v] for v in loop)}]:')
    out_ref = _ref(lhs, out_fmt, script)
    rhs = _expr_text(stmt.rhs, tensors, dtype, script)
    if stmt.reduction_vars:
        once, summed = _split_terms(stmt.rhs, set(stmt.reduction_vars))
        first = " + ".join(_term_text(t, tensors, dtype, script) for t in once) or \
            f"T.{dtype}(0)"
        body.append("    with T.init():")
        body.append(f"        {out_ref} = {first}")
        added = " + ".join(_term_text(t, tensors, dtype, script) for t in summed)
        body.append(f"    {out_ref} = {out_ref} + "
                    f"{added if len(summed) == 1 else f'({added})'}")
    else:
        body.append(f"    {out_ref} = {rhs}")
    lines += ["    " + b for b in body]
    return Generated("\n".join(lines) + "\n", loop, tensors, names, merges)


def loop_order(stmt: Statement, tensors: dict) -> tuple:
    """The loop order (``order.plan_order``'s): every read of every sparse tensor in its level
    order, the output's variables first where free, then the summed ones in order of
    appearance. ``NotationError`` when the sparse tensors' level orders contradict (``compile``
    converts such tensors first; ``generate`` takes the formats a kernel reads)."""
    plan = plan_order(stmt, tensors)
    if plan.conversions:
        raise NotationError(f"column 1: the sparse operands' level orders contradict each other "
                            f"in {stmt.text!r}; plan_order converts "
                            f"{', '.join(name for name, _, _ in plan.conversions)}")
    return plan.loop


def _split_terms(expr, summed_vars: set):
    """The additive terms of ``expr`` (with signs) that use no summed variable, and the rest."""
    once, summed = [], []
    for sign, term in signed_terms(expr):
        uses = any(v in summed_vars for a in _accesses_of(term) for v in a.indices)
        (summed if uses else once).append((sign, term))
    return once, summed


def _accesses_of(expr):
    if isinstance(expr, Access):
        return [expr]
    if isinstance(expr, Neg):
        return _accesses_of(expr.operand)
    if isinstance(expr, Binary):
        return _accesses_of(expr.a) + _accesses_of(expr.b)
    return []


def _term_text(term, tensors, dtype, script) -> str:
    sign, expr = term
    text = _expr_text(expr, tensors, dtype, script)
    return text if sign > 0 else f"(T.{dtype}(0) - {text})"


class _ScriptNames:
    """Distinct Python names for everything the generated script declares, so that no tensor
    or index name of the statement (``T``, ``R``, a keyword, an index named like a tensor)
    shadows another: each is the wanted name, or it with ``_`` appended until it is free. The
    size parameters ``n_<index>`` keep their names (a call passes them by these)."""

    def __init__(self, func_name: str, tensors: dict, loop: tuple):
        self.taken = {"T", func_name, CHUNKS_PARAM} | {f"n_{v}" for v in loop}
        out = next(iter(tensors))
        self.buffers = {out: self.fresh(out)}
        self.taken |= {f"{self.buffers[out]}_{role}" for role in ("counts", "ends")}
        self.buffers.update({t: self.fresh(t) for t in tensors if t != out})
        self.root = self.fresh("R")
        self.axes = {v: self.fresh(v.upper()) for v in loop}
        self.vars = {v: self.fresh(v) for v in loop}

    def fresh(self, want: str) -> str:
        """``want``, or ``want`` with ``_`` appended until no other name is the same."""
        while keyword.iskeyword(want) or want in self.taken:
            want += "_"
        self.taken.add(want)
        return want


def _is_compressed_at(fmt, access: Access, v: str) -> bool:
    return any(access.indices[d] == v and k == "compressed" for k, d in zip(fmt.kinds, fmt.dims))


def _ref(access: Access, fmt, script: _ScriptNames) -> str:
    idx = [script.vars[access.indices[d]] for d in fmt.dims]
    if not fmt.kinds or fmt.kinds[0] == "compressed":
        idx = ["0"] + idx
    return f"{script.buffers[access.name]}[{', '.join(idx)}]"


def _expr_text(expr, tensors, dtype, script: _ScriptNames) -> str:
    if isinstance(expr, Access):
        return _ref(expr, tensors[expr.name], script)
    if isinstance(expr, Const):
        return f"T.{dtype}({expr.value!r})"
    if isinstance(expr, Neg):
        return f"(T.{dtype}(0) - {_expr_text(expr.operand, tensors, dtype, script)})"
    return (f"({_expr_text(expr.a, tensors, dtype, script)} {expr.op} "
            f"{_expr_text(expr.b, tensors, dtype, script)})")


def _check_index_names(stmt: Statement) -> None:
    """Refuse an index whose size parameter ``n_<index>`` is the one-pass kernel's chunk count
    (the only generated name a statement's name cannot be moved away from)."""
    for access in (stmt.lhs,) + stmt.accesses:
        for v, column in zip(access.indices, access.index_columns):
            if f"n_{v}" == CHUNKS_PARAM:
                raise NotationError(f"column {column}: the index name {v!r} is reserved (its "
                                    f"size parameter would be {CHUNKS_PARAM}, the one-pass "
                                    f"kernel's chunk count); rename it in {stmt.text!r}")


def _check_divisors(expr, tensors: dict, text: str) -> None:
    """Refuse ``x / y`` where ``y`` reads a sparse operand. Unstored entries are structural
    zeros: an expression is computed only where the merge visits, which is right for a product
    (a zero factor's product is zero) but not for a quotient, whose value at a divisor's
    unstored entry (x / 0: inf or nan) is not zero and would be skipped."""
    if isinstance(expr, Neg):
        _check_divisors(expr.operand, tensors, text)
    elif isinstance(expr, Binary):
        _check_divisors(expr.a, tensors, text)
        _check_divisors(expr.b, tensors, text)
        for access in _accesses_of(expr.b) if expr.op == "/" else ():
            if "compressed" in tensors[access.name].kinds:
                raise NotationError(
                    f"column {access.column}: {expr} divides by {access.name}, whose format is "
                    f"sparse: its unstored entries are structural zeros, which the merge skips, "
                    f"but x / 0 there is inf or nan, not zero; division is by a dense operand "
                    f"only (leave {access.name} out of formats) in {text!r}")


def _merge(expr, v):
    """TACO's merge of ``expr`` over index ``v``: a tensor name, ``(op, [kids])``, ``DENSE``
    (every coordinate) or None (``expr`` does not depend on ``v``). A whole merge (``_whole``)
    drops out of an intersection, as a dense operand does.

    Example
    -------
    >>> from sparsetir.algebra.notation import parse
    >>> _merge(parse("A(i,j) = C(i,j) * E(i,j) + 1").rhs, "j") == ("union", [
    ...     ("intersect", ["C", "E"]), DENSE])
    True
    >>> _merge(parse("A(i,j) = C(i,j) * (E(i,j) + 1)").rhs, "j")
    'C'
    """
    if isinstance(expr, Access):
        return expr.name if v in expr.indices else None
    if isinstance(expr, Const):
        return None
    if isinstance(expr, Neg):
        return _merge(expr.operand, v)
    a, b = _merge(expr.a, v), _merge(expr.b, v)
    if expr.op in "+-":
        return _sum_merge(a, b)
    if expr.op == "/" and b is not None:     # 1 / y is nowhere 0: every coordinate
        a = DENSE if a is None else a
        return a if _whole(a) else _flat("intersect", a, b)
    if a is None or (b is not None and _whole(a)):
        return b
    if b is None or _whole(b):
        return a
    return _flat("intersect", a, b)


def _sum_merge(*merges):
    """The merge of a sum of terms whose merges are ``merges``: None where no term depends on
    the variable, else the union of the terms' merges, with ``DENSE`` for the terms that do not
    depend on it (each is added at every coordinate: the union is whole)."""
    if all(m is None for m in merges):
        return None
    out = None
    for m in merges:
        m = DENSE if m is None else m
        out = m if out is None else _flat("union", out, m)
    return out


def _whole(merge) -> bool:
    """Whether ``merge`` holds every coordinate: ``DENSE``, or a union with it."""
    return merge == DENSE or (isinstance(merge, tuple) and merge[0] == "union"
                              and DENSE in merge[1])


def _flat(op, a, b):
    kids = []
    for x in (a, b):
        for kid in x[1] if isinstance(x, tuple) and x[0] == op else [x]:
            if kid != DENSE or DENSE not in kids:
                kids.append(kid)
    return (op, kids)


def _merge_text(tree, names: dict) -> str:
    """``tree`` in TVMScript, each leaf by its name in ``names`` (a tensor's buffer, the
    axis for ``DENSE``)."""
    if isinstance(tree, str):
        return names[tree]
    return f"T.{tree[0]}({', '.join(_merge_text(k, names) for k in tree[1])})"
