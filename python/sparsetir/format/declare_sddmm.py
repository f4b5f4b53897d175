"""SDDMM ``C = (X @ Y^T) at A's stored positions`` as a Stage I kernel over an MLIR encoding.

``encoded_sddmm(enc)`` writes, from the declarations of :func:`~sparsetir.format.declare.declare`,
the kernel that computes for every position ``A`` stores the dot product of row ``row`` of
``X`` (``m x feat_size``) and row ``col`` of ``Y`` (``n x feat_size``), ``row`` and ``col``
being that position's coordinates: ``sparsetir.ops.sddmm``'s ``X[row] . Y[col]`` (DGL's
``u_dot_v`` with ``M``'s rows as destinations), written into an array in ``A``'s value order.
``A``'s values are not read; the result has ``A``'s positions and coordinates
(``SparseTensor.from_arrays(enc, shape, positions, coordinates, out)`` makes it a tensor). A
position outside the matrix (a block overhanging its edge) gets 0.

The kernel's parameters are ``c`` (the output values), ``x``, ``y``, then the positions and
coordinates of each level (``c_pos1, c_crd1``, ...), then the sizes (``m, n``, the block
counts, ``feat_size``, ``nnz``), as :meth:`EncodedKernel.arguments` gives them with ``out=``.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.format import SparseTensor
>>> kernel = encoded_sddmm("CSR", feat_size=16)
>>> built = sparsetir.build(sparsetir.lower_sparse_iter(kernel.func), "llvm")
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> tensor = SparseTensor.from_scipy(A, "CSR")
>>> X, Y = np.ones((6, 16), np.float32), np.full((5, 16), 2, np.float32)
>>> values = np.zeros(A.nnz, np.float32)
>>> built(*kernel.arguments(tensor, X, Y, out=values))   # values[p] = X[row(p)] . Y[col(p)]
>>> bool((values == 32).all())
True
"""

from __future__ import annotations

from .declare import EncodedDeclaration, literal
from .declare_spmm import EncodedKernel, encoded_kernel

__all__ = ["encoded_sddmm"]


def encoded_sddmm(encoding, feat_size: int | None = None, dtype: str = "float32") -> EncodedKernel:
    """The SDDMM kernel over the pattern of ``encoding`` (an ``Encoding`` or what
    ``Encoding.named`` takes), specialised to ``feat_size`` features when given."""
    return encoded_kernel(encoding, "C", _source, feat_size, dtype, writes_values=True)


def _source(decl: EncodedDeclaration, dtype: str) -> str:
    """The TVMScript of the kernel (see the module docstring)."""
    idtype = decl.idtype
    suffix = "" if idtype == "int32" else f', "{idtype}"'
    one = literal(1, idtype)
    row, col = decl.coordinates
    params = ["c: T.handle", "x: T.handle", "y: T.handle"]
    params += [f"{h}: T.handle" for h in decl.handles[1:]]
    sizes = [s for s in decl.scalars if s != "nnz"] + ["feat_size"] + \
        [s for s in decl.scalars if s == "nnz"]
    params += [f"{s}: T.{idtype}" for s in sizes]
    lines = ['T.func_attr({"global_symbol": "main", "tir.noalias": True})', *decl.lines,
             f"I_detach = T.dense_fixed(m{suffix})", f"J_detach = T.dense_fixed(n{suffix})",
             f"K = T.dense_fixed(feat_size{suffix})",
             f'X = T.match_sparse_buffer(x, (I_detach, K), "{dtype}")',
             f'Y = T.match_sparse_buffer(y, (J_detach, K), "{dtype}")']
    guards = [f"{coord} < {size}" for coord, size in ((row, "m"), (col, "n"))
              if coord not in decl.vars]
    x_row = row if row in decl.vars else f"T.min({row}, m - {one})"
    y_row = col if col in decl.vars else f"T.min({col}, n - {one})"
    update = f"{decl.access} = {decl.access} + X[{x_row}, k] * Y[{y_row}, k]"
    if guards:
        update = f"if {' and '.join(guards)}:\n            {update}"
    lines += [f'with T.sp_iter([{", ".join(decl.axes)}, K], "{"S" * len(decl.axes)}R", '
              f'"sddmm") as [{", ".join(decl.vars)}, k]:',
              "    with T.init():", f"        {decl.access} = T.{dtype}(0)", f"    {update}"]
    text = "\n    ".join(lines)
    return f"@T.prim_func\ndef sddmm({', '.join(params)}) -> None:\n    {text}\n"
