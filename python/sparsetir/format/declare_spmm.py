"""SpMM ``Y = A @ X`` as a Stage I kernel over ``A`` stored in an MLIR encoding.

``encoded_spmm(enc)`` writes the kernel a user would write by hand for that format, from the
declarations of :func:`~sparsetir.format.declare.declare`, and parses it: an ordinary Stage I
``SparseFunction`` that prints, lowers, schedules and builds like any other. ``X`` (``n x
feat_size``) and ``Y`` (``m x feat_size``) are dense. When a row is a level variable of the
outermost level (CSR, 2:4, dense) the reduction has a zeroing ``T.init``; otherwise (CSC, DCSR,
DCSC, COO, BSR, BSC) a first nest zeroes ``Y`` and the product adds into it, with computed
coordinates clamped into the matrix and guarded (a block overhanging the matrix's edge adds
nothing).

The kernel's parameters are ``a, x, y``, then the positions and coordinates of each level
(``a_pos1, a_crd1``; ``a_crd2`` for a structured level), then the sizes (``m, n``, the block
counts ``mb, nb``, ``feat_size``, ``nnz``: for CSR, ``sparsetir.ops.kernels.spmm``'s order).
:meth:`EncodedKernel.arguments` gives them from a ``SparseTensor`` in that order (``feat_size``
from ``X``'s last dimension: specialise the kernel for a flat, tiled ``X``). Positions and
coordinates narrower than the axes' index type are declared in their widths
(``indices_dtype="int8"``), so the kernel takes the tensor's own arrays with no extra pass.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.format import Encoding, SparseTensor
>>> enc = Encoding.parse("#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : "
...                      "compressed), crdWidth = 8 }>")
>>> kernel = encoded_spmm(enc, feat_size=16)
>>> built = sparsetir.build(sparsetir.lower_sparse_iter(kernel.func), "llvm")
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> built(*kernel.arguments(SparseTensor.from_scipy(A, enc), X, Y))     # Y = A @ X
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..script import from_source
from .declare import EncodedDeclaration, declare, literal

__all__ = ["EncodedKernel", "encoded_spmm"]


@dataclasses.dataclass(frozen=True)
class EncodedKernel:
    """A Stage I kernel over an encoded operand: ``func`` and the declaration it was written
    from."""

    func: object
    declaration: EncodedDeclaration
    writes_values: bool = False     # writes an array in the tensor's value order (SDDMM)

    def arguments(self, tensor, x, y, out=None) -> list:
        """The call's arguments in the kernel's parameter order: ``tensor``'s values (``out``
        instead for a kernel that writes values, ``encoded_sddmm``), ``x``, ``y``,
        ``tensor``'s index arrays, the sizes and (unless specialised) ``feat_size``, ``x``'s
        last dimension."""
        if (out is None) == self.writes_values:
            raise SparseTIRValueError("this kernel writes values in the tensor's order: pass "
                                      "out=" if self.writes_values else
                                      "this kernel reads the tensor's values: it takes no out")
        values = {**self.declaration.arguments(tensor), "x": x, "y": y}
        if out is not None:
            values[self.declaration.handles[0]] = out
        if any(param.name == "feat_size" for param in self.func.params):
            if np.ndim(x) != 2:
                raise SparseTIRValueError(f"x has shape {np.shape(x)}: a kernel that is not "
                                          "specialised takes feat_size from a 2-D x "
                                          "(encoded_spmm(enc, feat_size=...) for a flat x)")
            values["feat_size"] = int(np.shape(x)[1])
        return [values[param.name] for param in self.func.params]


def encoded_spmm(encoding, feat_size: int | None = None, dtype: str = "float32") -> EncodedKernel:
    """The SpMM kernel over ``A`` in ``encoding`` (an ``Encoding`` or what
    ``Encoding.named`` takes), specialised to ``feat_size`` features when given."""
    return encoded_kernel(encoding, "A", _source, feat_size, dtype)


def encoded_kernel(encoding, buffer: str, source, feat_size, dtype,
                   writes_values: bool = False) -> EncodedKernel:
    """The kernel whose TVMScript ``source(declaration, dtype)`` writes over a buffer named
    ``buffer`` stored in ``encoding``, parsed, and specialised to ``feat_size`` when given;
    ``feat_size`` (a positive int or None) and ``dtype`` (float32, float64) checked by name."""
    if feat_size is not None and (isinstance(feat_size, (bool, np.bool_))
                                  or not isinstance(feat_size, numbers.Integral)
                                  or feat_size < 1):
        raise SparseTIRTypeError(f"feat_size must be a positive int or None, got {feat_size!r}")
    feat_size = None if feat_size is None else int(feat_size)     # numpy integers too
    if dtype not in ("float32", "float64"):
        raise SparseTIRValueError(f"dtype must be float32 or float64, got {dtype!r}")
    decl = declare(encoding, buffer, dtype)
    func = from_source(source(decl, dtype))
    if feat_size is not None:
        func = func.specialize({"feat_size": feat_size})
    return EncodedKernel(func, decl, writes_values)


def _source(decl: EncodedDeclaration, dtype: str) -> str:
    """The TVMScript of the kernel (see the module docstring)."""
    idtype = decl.idtype
    suffix = "" if idtype == "int32" else f', "{idtype}"'
    zero = f"T.{dtype}(0)"
    one = literal(1, idtype)
    row, col = decl.coordinates
    direct = row == decl.vars[0] and decl.kinds[0] == "S"
    params = ["a: T.handle", "x: T.handle", "y: T.handle"]
    params += [f"{h}: T.handle" for h in decl.handles[1:]]
    sizes = [s for s in decl.scalars if s != "nnz"] + ["feat_size"] + \
        [s for s in decl.scalars if s == "nnz"]            # the order of ops.kernels.spmm
    params += [f"{s}: T.{idtype}" for s in sizes]
    lines = ['T.func_attr({"global_symbol": "main", "tir.noalias": True})', *decl.lines,
             f"J_detach = T.dense_fixed(n{suffix})", f"K = T.dense_fixed(feat_size{suffix})",
             f'X = T.match_sparse_buffer(x, (J_detach, K), "{dtype}")']
    guards = [f"{col} < n"] if col not in decl.vars else []
    x_row = col if col in decl.vars else f"T.min({col}, n - {one})"
    if direct:
        lines.append(f'Y = T.match_sparse_buffer(y, ({decl.axes[0]}, K), "{dtype}")')
        y_row = row
        init = ["    with T.init():", f"        Y[{y_row}, k] = {zero}"]
    else:
        lines += [f"I_detach = T.dense_fixed(m{suffix})",
                  f'Y = T.match_sparse_buffer(y, (I_detach, K), "{dtype}")',
                  'with T.sp_iter([I_detach, K], "SS", "spmm_zero") as [i, k]:',
                  f"    Y[i, k] = {zero}"]
        if row not in decl.vars:
            guards.insert(0, f"{row} < m")
        y_row = row if row in decl.vars else f"T.min({row}, m - {one})"
        init = []                              # the zeroing nest did it: the product adds
    update = f"Y[{y_row}, k] = Y[{y_row}, k] + {decl.access} * X[{x_row}, k]"
    if guards:
        update = f"if {' and '.join(guards)}:\n            {update}"
    lines += [f'with T.sp_iter([{", ".join(decl.axes)}, K], "{decl.kinds}S", "spmm") '
              f'as [{", ".join(decl.vars)}, k]:', *init, f"    {update}"]
    text = "\n    ".join(lines)
    return f"@T.prim_func\ndef spmm({', '.join(params)}) -> None:\n    {text}\n"
