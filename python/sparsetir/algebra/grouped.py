"""A statement whose merge is too large for one kernel, computed as a chain of smaller kernels.

A sum of many sparse operands (``A = B + C + D + E + F + ...``) has a merge lattice of
2^k - 1 points, and one kernel evaluating it at every case takes minutes to compile (the
emitter refuses past ``lower.coiterate.emit.MAX_CASES`` with ``MergeTooLargeError``). ``split``
cuts the statement's additive terms, left to right, into the longest runs that stay under the
limit: the first run is summed into a temporary ``T0`` in the result's format, the next run is
``T1 = T0 + ...`` and so on, the last run giving the result. The terms keep their order and
are added from the left (``((B + C) + D) + E`` exactly), so a result has the one kernel's
pattern, explicit zeros included, and, up to ``notation.BALANCE_AFTER`` terms, its rounding
(a longer sum the parser reads as a balanced tree; the chain still adds from the left). Each part names its operands ``X0, X1, ...`` in order,
so parts of the same shape are one compiled kernel (the build cache): a sum of 8 CSR operands
compiles a 4-way and a 2-way union. A statement with summed indices (``a(i) = B0(i,j) *
c(j) + ...``) sums each run on its own and then adds the runs' results in a chain (a result
carried into a run would be a term without the summed indices, which walks them densely);
the sums are then grouped by run, so only rounding differs. A single term that is too large
alone (a product of many sums) is refused with the emitter's error.

Example
-------
>>> import numpy as np, scipy.sparse as sp
>>> from sparsetir.algebra import compile
>>> k = compile("A(i,j) = B(i,j) + C(i,j) + D(i,j) + E(i,j) + F(i,j)",
...             formats=dict.fromkeys("ABCDEF", "CSR"))
>>> [p.statement.text for p in k.parts]
['Y(i,j) = X0(i,j) + X1(i,j) + X2(i,j) + X3(i,j)', 'Y(i,j) = X0(i,j) + X1(i,j)']
>>> operands = {name: sp.random(4, 5, density=0.4, format="csr", random_state=seed)
...             for seed, name in enumerate("BCDEF")}
>>> bool(np.allclose(k(**operands).to_dense(), sum(M.toarray() for M in operands.values())))
True
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import MergeTooLargeError, SparseTIRError, SparseTIRValueError
from ..format import SparseTensor
from ..lower.lower_sparse_iter import lower_sparse_iter
from ..runtime.saved import save
from ..script import from_source
from .generate import generate
from .kernel import KERNEL_NAME, AlgebraKernel, _sizes, read_operands
from .notation import Access, Const, Neg, _accesses, parse, signed_terms
from .order import plan_order
from .typed import ValueTyped

PART_OUTPUT = "Y"
"""The result's name in every part's statement (its inputs are ``X0, X1, ...``)."""


class GroupedKernel(ValueTyped):
    """A statement computed by ``AlgebraKernel`` parts (``parts``, in order): a chain, each
    adding a run of its terms to the previous part's result, or, for a statement with summed
    indices, each run summed on its own and a chain adding the runs' results. Called like
    ``AlgebraKernel`` (operands by name), it checks every operand once, by its name, then runs
    the parts (and adds the runs' sums of a scalar result in order)."""

    def __init__(self, stmt, formats: dict, dtype: str, parts: list):
        self.statement, self.formats, self.dtype = stmt, formats, dtype
        self.plan = plan_order(stmt, formats)
        self.parts = tuple(kernel for kernel, _, _ in parts)
        self._steps = tuple((inputs, output) for _, inputs, output in parts)

    @property
    def lattices(self) -> str:
        """Each part's statement and lattices."""
        return "\n".join(f"{p.statement.text}\n{p.lattices}" for p in self.parts)

    @property
    def func(self):
        raise SparseTIRValueError(
            f"{self.statement.text!r} is computed by {len(self.parts)} kernels (its merge is too "
            "large for one): each of .parts has its .func")

    def rebuild(self, func):
        raise SparseTIRValueError(
            f"{self.statement.text!r} is computed by {len(self.parts)} kernels: rebuild one of "
            ".parts (part.rebuild(...)) and call the parts in order")

    def _retyped(self, dtype: str) -> "GroupedKernel":
        parts = [(part.typed(dtype), inputs, output)
                 for part, (inputs, output) in zip(self.parts, self._steps)]
        return GroupedKernel(self.statement, self.formats, dtype, parts)

    def save(self, path) -> None:
        """Write the compiled statement (its parts) to the file ``path``; ``sparsetir.load(path)``
        gives it back, as ``AlgebraKernel.save`` does. Pickles carry the same.

        Example
        -------
        >>> import numpy as np, scipy.sparse as sp, sparsetir
        >>> k = sparsetir.algebra.compile("A(i,j) = B(i,j) + C(i,j) + D(i,j) + E(i,j) + F(i,j)",
        ...                               formats=dict.fromkeys("ABCDEF", "CSR"))
        >>> operands = {name: sp.random(4, 5, density=0.4, format="csr", random_state=seed)
        ...             for seed, name in enumerate("BCDEF")}
        >>> k.save("sum5.stk")
        >>> result = sparsetir.load("sum5.stk")(**operands)       # as k(**operands)
        >>> bool(np.allclose(result.to_dense(), k(**operands).to_dense()))
        True
        """
        save(self, path)

    def __call__(self, **operands):
        typed = self.for_operands(operands)
        if typed is not self:
            return typed(**operands)
        levels = read_operands(self.statement, self.formats, self.dtype, operands)
        _sizes(self.statement, levels)
        values = {name: _as_operand(lv, self.formats[name]) for name, lv in levels.items()}
        result, scalar = None, None
        for part, (inputs, output) in zip(self.parts, self._steps):
            result = part(**{f"X{n}": result if name is None else values[name]
                             for n, name in enumerate(inputs)})
            if output == "":            # a run's sum of a scalar result: added in order
                scalar = result if scalar is None else np.add(scalar, result)
            elif output is not None:
                values[output] = result
        return result if scalar is None else np.asarray(scalar)


def split(stmt, formats: dict, dtype: str, error: MergeTooLargeError) -> GroupedKernel:
    """``stmt`` (its one kernel refused with ``error``) as parts under the limit; ``error``
    again where a single term is too large alone, or a run must hold every index of the
    result and cannot, or where a part cannot be compiled for another reason. A statement with
    summed indices sums each run on its own (a previous result carried in would be a term
    without the summed indices, which walks them densely) and then adds the runs' results."""
    lhs = stmt.lhs
    temp = replace(formats[lhs.name], result=None)      # temporaries: the stored format
    known = {}
    if not stmt.reduction_vars:
        parts = _runs(stmt, formats, formats[lhs.name], temp, dtype, error, known, True)
        return GroupedKernel(stmt, formats, dtype, parts)
    parts = _runs(stmt, formats, temp, temp, dtype, error, known, False)
    if not lhs.indices:                 # scalars: the runs' sums added in order by the call
        return GroupedKernel(stmt, formats, dtype, [(k, i, "") for k, i, _ in parts])
    results = []
    for n, (kernel, inputs, _) in enumerate(parts):
        results.append(f"R{n}")
        while results[-1] in formats:
            results[-1] += "_"
        parts[n] = (kernel, inputs, results[-1])
    index = f"({','.join(lhs.indices)})"
    added = parse(f"{lhs.name}{index} = " + " + ".join(f"{r}{index}" for r in results))
    added_formats = {lhs.name: formats[lhs.name], **{r: temp for r in results}}
    parts += _runs(added, added_formats, formats[lhs.name], temp, dtype, error, known, True)
    return GroupedKernel(stmt, formats, dtype, parts)


def _runs(stmt, formats: dict, out_fmt, temp, dtype, error, known, carry: bool) -> list:
    """The parts of ``stmt``'s terms cut into the longest runs under the limit, left to right:
    ``(kernel, inputs, None)`` each. With ``carry`` each run after the first adds to the
    previous result (a chain; the last run stores into ``out_fmt``), else each run is summed on
    its own into ``out_fmt``."""
    terms = signed_terms(stmt.rhs)
    lhs = stmt.lhs
    parts, start = [], 0
    while start < len(terms):
        carried, count = carry and start > 0, 0
        while start + count < len(terms) and \
                _fits(_part(lhs, terms[start:start + count + 1], carried, formats, temp, temp)[0],
                      dtype, error, known):
            count += 1
        run = terms[start:start + count]
        indices = {v for _, term in run for access in _accesses(term) for v in access.indices}
        if count == 0:
            raise MergeTooLargeError(
                f"{stmt.text!r}: its term {terms[start][1]} alone merges too many operands "
                f"for one kernel ({error}); distribute it into a sum of smaller terms or "
                "compute its factors in kernels of their own") from error
        if not (carried or set(lhs.indices) <= indices):
            raise MergeTooLargeError(
                f"{stmt.text!r}: its terms {', '.join(str(t) for _, t in run)}, which fit in "
                f"one kernel, do not use every index of {lhs} ({error}); order the terms so "
                "that each run of them does") from error
        last = not carry or start + count == len(terms)
        part, inputs = _part(lhs, run, carried, formats, out_fmt if last else temp, temp)
        parts.append((AlgebraKernel(*part, dtype), inputs, None))
        start += count
    return parts


def _part(lhs, run, carried: bool, formats: dict, out_fmt, temp) -> tuple:
    """The part summing ``run`` (after the previous result ``X0``, in format ``temp``, when
    ``carried``) into ``out_fmt``: ``((stmt, formats), inputs)`` with ``inputs``
    the user's name of each ``Xn`` (None: the previous result)."""
    index = f"({','.join(lhs.indices)})"
    inputs, names = ([None] if carried else []), {}
    pieces = [f"X0{index}"] if carried else []
    for sign, term in run:
        for access in _accesses(term):
            if access.name not in names:
                names[access.name] = f"X{len(inputs)}"
                inputs.append(access.name)
        text = _text(term, names)
        pieces.append(("+ " if sign > 0 else "- ") + text if pieces else
                      (text if sign > 0 else f"-{text}"))
    fmts = {PART_OUTPUT: out_fmt}
    fmts.update({f"X{n}": temp if name is None else replace(formats[name], slices=None)
                 for n, name in enumerate(inputs)})       # operands arrive as their window
    return (parse(f"{PART_OUTPUT}{index} = {' '.join(pieces)}"), fmts), inputs


def _fits(part: tuple, dtype: str, error: MergeTooLargeError, known: dict) -> bool:
    """Whether a part's kernels stay under the emitter's limit (lowered, not compiled; each
    Stage I text once, ``known`` holding the answers); ``error``, with the part's reason,
    where it cannot be lowered at all."""
    stmt, fmts = part
    text = generate(stmt, fmts, dtype, KERNEL_NAME).text
    if text not in known:
        try:
            lower_sparse_iter(from_source(text))
            known[text] = True
        except MergeTooLargeError:
            known[text] = False
        except SparseTIRError as err:
            raise MergeTooLargeError(f"{error}; its sum cannot be split into smaller kernels: "
                                     f"{err}") from err
    return known[text]


def _text(expr, names: dict) -> str:
    """``expr`` in index notation with its tensors renamed by ``names``."""
    if isinstance(expr, Access):
        name = names[expr.name]
        return f"{name}({','.join(expr.indices)})" if expr.indices else name
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, Neg):
        return f"(-{_text(expr.operand, names)})"
    return f"({_text(expr.a, names)} {expr.op} {_text(expr.b, names)})"


def _as_operand(levels, fmt):
    """Checked ``Levels`` as the operand a part reads without converting again: the numpy
    array of a dense format, else a ``SparseTensor`` in the format's stored encoding."""
    if fmt.is_dense:
        return levels.vals.reshape(levels.shape)
    return SparseTensor(fmt.stored, levels.shape, levels.pos, levels.crd, levels.vals, ())
