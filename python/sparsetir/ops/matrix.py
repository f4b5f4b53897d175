"""``SparseMatrix``: a CSR matrix validated once and kept in the form the kernels take.

The arrays kernels read are private copies (int32 index arrays, float32 or float64 values,
column indices sorted within each row, duplicates summed) over sealed memory (``runtime.arguments.
sealed``: numpy will not make them writable, and no user holds them), checked once when the
matrix is made; calls on it then skip the per-call index checks, which is sound because nobody
can change them, and bind them without a copy, so that a call converts and copies nothing of
the matrix. The public ``indptr``, ``indices``, ``data`` (and every other array a matrix gives:
``source_order``, ``in_degrees()``, ...) are read-only copies that numpy will not make writable
(``format.frozen``; an unpickled matrix's too): writing one through ``torch.from_numpy``
(which ignores the read-only flag) cannot reach a kernel, nor anything else sparsetir computes
from the matrix (its transpose, ``to_scipy``, pickles, ``reorder``, the float64 and autograd
paths, ``graph_tensors(M)``): all of them read the private arrays (``storage``) or copies of
their own. Derived arrays (``in_degrees()``, ``transposed()[1]``...) are a new read-only copy
at each call. What is left: ``graph_tensors(M)`` are torch tensors that ``torch.compile``'d
calls read, and torch has no read-only tensors: do not write them.

The values are float32 or float64 and keep their dtype (a silent cast would turn 1e39 into
inf). When the caller's nonzeros are not in that sorted order (columns unsorted within a row,
another format, duplicates), ``source_order`` records where each of them went.

The graph operators read ``M`` as DGL reads a graph: rows are destinations (``v``), columns
sources (``u``), and the stored nonzeros are the edges, in CSR order (rows, then columns).
``SparseMatrix.from_csr`` takes arrays in that order as they are, and keeps a torch
``values`` tensor itself (``M.values``), so that a gradient reaches it.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir.ops
>>> A = scipy.sparse.csr_matrix((np.float32([1, 2, 3]), [2, 0, 1], [0, 2, 3]), shape=(2, 3))
>>> M = sparsetir.ops.SparseMatrix(A)
>>> M.shape, M.indptr.dtype, M.indices.flags.writeable
((2, 3), dtype('int32'), False)
>>> M.indices.tolist(), M.source_order.tolist()     # A's entry p is M's entry source_order[p]
([0, 2, 1], [1, 0, 2])
"""

from __future__ import annotations

import functools
import sys
from typing import NamedTuple, Optional

import numpy as np
import scipy.sparse

from ..format import SparseTensor, check_csr
from ..format.frozen import frozen
from ..format.checks import index_array
from ..runtime.arguments import sealed
from .arrays import check_autograd
from .graph_tensors import graph_tensors
from .tiles import balanced_row_bounds
from ..errors import SparseTIRTypeError, SparseTIRValueError


def _untraced(make):
    """``make``, which makes a ``SparseMatrix`` (its checks read the arrays' values), run
    with torch's dynamo off once torch is loaded (``untraceable.eagerly``: ``torch.compile``
    makes the matrix eagerly, a graph break, ``torch.export`` refuses it by name). Dynamo may
    run it outside its trace but with its frame hook set (a graph break at the call, or a frame
    it skips), where it would trace the functions ``make`` calls one by one and crash on their
    read-only arrays.

    Example
    -------
    >>> import torch
    >>> f = torch.compile(lambda x: x * SparseMatrix.from_csr([0, 1], [0], x, (1, 1)).nnz,
    ...                   backend="eager")
    >>> f(torch.ones(1)).tolist()                    # made eagerly, between two graphs
    [1.0]
    >>> torch._dynamo.reset()
    """
    @functools.wraps(make)
    def made(*args, **kwargs):
        if "torch" not in sys.modules:
            return make(*args, **kwargs)
        from .untraceable import MADE_INSIDE, eagerly  # pylint: disable=import-outside-toplevel
        return eagerly(MADE_INSIDE, make, *args, **kwargs)
    return made


def _untraced_arrays(method):
    """``method``, which returns read-only numpy arrays of a ``SparseMatrix`` (alone or in a
    tuple), run eagerly where dynamo traces or watches the call (``untraceable.watched``:
    ``eagerly``, ``MATRIX_ARRAYS``, a graph break), its arrays then writable copies, the only
    numpy arrays dynamo reads. Elsewhere it runs as it is.

    Example
    -------
    >>> import torch
    >>> M = SparseMatrix(scipy.sparse.eye(3, format="csr", dtype=np.float32))
    >>> f = torch.compile(lambda x: x * torch.as_tensor(M.in_degrees()), backend="eager")
    >>> f(torch.ones(3)).tolist()                    # in_degrees() read eagerly
    [1.0, 1.0, 1.0]
    >>> torch._dynamo.reset()
    """
    @functools.wraps(method)
    def read(self, *args, **kwargs):
        if "torch" not in sys.modules:
            return method(self, *args, **kwargs)
        from .untraceable import MATRIX_ARRAYS, eagerly, watched  # pylint: disable=import-outside-toplevel
        if not watched():
            return method(self, *args, **kwargs)
        return eagerly(MATRIX_ARRAYS, lambda: _writable(method(self, *args, **kwargs)))
    return read


def _writable(result):
    """``result`` with each numpy array in it (itself, or in a tuple) a writable copy."""
    if isinstance(result, tuple):
        return tuple(_writable(item) for item in result)
    return np.array(result) if isinstance(result, np.ndarray) else result


class SparseMatrix:
    """A validated CSR matrix (see the module docstring).

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, torch sparse tensor (CSR or COO), or 2-D
        ``sparsetir.format.SparseTensor`` (any encoding: CSR, CSC, DCSR, DCSC, COO, BSR/BSC,
        2:4 ...), float32 or float64
        Any scipy sparse format is converted to CSR; a torch COO tensor is read as stored
        (uncoalesced entries of one position are summed, and counted in ``multiplicity``); a
        ``SparseTensor``'s entries are ``t.to_coo()``'s (its stored values, the explicit zeros of
        stored blocks included).
    name : str
        What errors call the matrix (``sparsetir.ops`` passes ``"A"``).
    tune : bool
        Search, at each kernel's first call with a new feature size, for the layout and
        schedule that run fastest on this matrix and machine (``sparsetir.ops.tune``; a record
        stored by an earlier search is reused without measuring). That first call then takes
        the search's time: about 2 s (``ops.tuning.BUDGET_S``), plus compiles the first time a
        kernel is built on the machine. Off by default; float32 matrices only.

    Attributes
    ----------
    shape : tuple of int
    indptr, indices : numpy.ndarray (int32, read-only)
    data : numpy.ndarray (float32 or float64, read-only)
    values : torch.Tensor or numpy.ndarray
        The edge values the operators multiply by: the tensor given to ``from_csr`` itself
        (autograd link kept, read at every call), else ``data``.
    dtype : numpy.dtype
        The values' dtype.
    nnz : int
    source_order : numpy.ndarray (int64, read-only) or None
        The caller's nonzeros mapped to this matrix's: ``source_order[p]`` is the position in
        ``indices`` and ``data`` of the caller's ``p``-th nonzero (duplicates, summed, share
        one). The caller's order is that of ``indices`` for CSR (scipy or torch), of
        ``A.tocoo()`` for another scipy format, of ``A._indices()`` (as stored) for a torch COO
        tensor, and of ``t.values`` (``t.to_coo()``) for a ``SparseTensor``. None when it is this
        matrix's order already.
    multiplicity : numpy.ndarray (float32, read-only) or None
        How many of the caller's nonzeros each entry sums (a multigraph's parallel edges:
        ``spmm(weighted=False)`` counts each, as DGL's ``copy_u_sum`` does). None when every
        entry is one nonzero of the caller's.

    tuned : dict
        ``(kernel, feature size)`` -> the bound kernel a search chose (``sparsetir.ops.tune``).

    The attributes above are fixed: assigning one raises ``AttributeError`` (kernels bound to
    the matrix keep its arrays; make a new matrix instead).
    """

    @_untraced
    def __init__(self, matrix, *, name: str = "matrix", tune: bool = False):
        if isinstance(matrix, SparseMatrix):         # its arrays, checked already
            self._fill(matrix.shape, *(matrix._sealed.get(name) for name in (
                "indptr", "indices", "data")), None, matrix._sealed.get("multiplicity"))
            if matrix.values is not matrix.data:
                self._keep_values(matrix.values)
        else:
            shape, entries = _entries(matrix, name)
            if max(shape, default=0) >= 2**31 or entries.cols.size >= 2**31:
                raise SparseTIRValueError(
                    f"a matrix of shape {shape} with {entries.cols.size} nonzeros needs int64 "
                    "indices, which sparsetir.ops does not offer yet")
            indptr, indices, values, order, copies = _sorted_csr(shape, entries)
            self._fill(shape, indptr, indices, values, order, copies)
        self.auto_tune = bool(tune)

    def _fill(self, shape, indptr, indices, values, order, copies) -> None:
        """Set the fields: the arrays kernels read are sealed and private (``_sealed``); the
        public ones are read-only copies, so writing through ``torch.from_numpy`` (which
        ignores the read-only flag) cannot change what a bound kernel reads."""
        dtype = np.asarray(values).dtype
        kept = {name: sealed(array, dtype) for name, array, dtype in (
            ("indptr", indptr, np.int32), ("indices", indices, np.int32),
            ("data", values, dtype), ("multiplicity", copies, np.float32))
            if array is not None}
        self.__dict__.update(      # the fixed fields (see __setattr__), set here only
            _sealed=kept, _tiles={}, _derived={}, shape=shape, nnz=int(kept["indices"].size),
            dtype=dtype, source_order=frozen(order, np.int64),
            _order=None if order is None else sealed(order, np.int64),
            **{name: frozen(kept.get(name)) for name in
               ("indptr", "indices", "data", "multiplicity")})
        self.__dict__["values"] = self.data
        self.prepared = {}      # what the operators prepare once per matrix (bound kernels)
        self.calls = {}         # operator and operand shapes -> (bound kernel, result shape)
        self.numpy_calls = {}   # the same, numpy calls' short path (``numpy_calls``)
        self.tuned = {}         # (kernel, feature size) -> the bound kernel a search chose
        self.auto_tune = False  # search at a kernel's first call (``tune=True``)
        self.__dict__["_graph_tensors"] = None
        if "torch" in sys.modules:     # what torch.compile reads (``ops.graph_tensors``)
            graph_tensors(self)

    @classmethod
    @_untraced
    def from_csr(cls, indptr, indices, values, shape) -> "SparseMatrix":
        """A matrix over CSR arrays already in CSR order: column indices non-decreasing within
        each row (unsorted columns are refused by name: the edge data of the graph operators
        is in this order, and nothing may move it silently). A repeated column is kept as an
        entry of its own (a multigraph's parallel edges: each is one edge of the graph
        operators, and ``spmm`` sums them).

        ``values`` (length nnz, float32 or float64, numpy, torch, or a list, read as numpy
        reads it: Python floats are float64) keeps its dtype; a torch
        tensor is kept itself as ``M.values`` and read by the operators at every call, so a
        ``values`` that requires grad gets ``values.grad`` (and an optimizer's update of it is
        seen). ``M.data`` is a copy made now.

        Example
        -------
        >>> import torch
        >>> w = torch.ones(3, dtype=torch.float64, requires_grad=True)
        >>> M = SparseMatrix.from_csr([0, 2, 3], [0, 2, 1], w, (2, 3))
        >>> M.values is w, M.dtype
        (True, dtype('float64'))
        >>> SparseMatrix.from_csr([0, 2, 2], [1, 1], np.float32([1, 2]), (2, 2)).nnz  # parallel edges
        2
        """
        if not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise SparseTIRValueError(f"shape must be (rows, columns), got {shape!r}")
        shape = tuple(int(size) for size in shape)
        indptr, indices = check_csr(_plain(indptr), _plain(indices), shape)
        falls = _falls(indptr, indices, strictly=False)
        if falls.any():
            p = int(np.flatnonzero(falls)[0])
            row = int(np.searchsorted(indptr, p, side="right") - 1)
            raise SparseTIRValueError(
                f"indices of row {row} are not sorted (column {indices[p]} then "
                f"{indices[p + 1]}): from_csr takes columns non-decreasing within each row; "
                "use SparseMatrix(scipy.sparse.csr_matrix(...)) to sort them")
        is_torch = hasattr(values, "requires_grad")
        if is_torch:                      # checked before its memory is read
            _check_values("values", values.dtype, True)
            if values.device.type != "cpu":
                raise SparseTIRTypeError(f"values is on {values.device}; sparsetir.ops runs "
                                         "on the CPU")
        data = _plain(values)
        if data.ndim != 1 or data.size != indices.size:
            raise SparseTIRValueError(f"values must have one value per index ({indices.size}),"
                                      f" got shape {tuple(data.shape)}")
        if not is_torch:
            _check_values("values", data.dtype, False)     # a list: numpy's dtype of it
        matrix = cls.__new__(cls)
        matrix._fill(shape, indptr, indices, data, None, None)
        if is_torch:
            matrix._keep_values(values)  # pylint: disable=protected-access
        return matrix

    def storage(self, name: str):
        """The private array ``name`` (``"indptr"``, ``"indices"``, ``"data"``,
        ``"multiplicity"``, ``"source_order"``; None where the matrix has none; or one derived
        from them once and kept: ``"in_degrees"``, ``"out_degrees"``, ``"empty_rows"``,
        ``"edge_ids"``) that kernels and sparsetir's own code read, over sealed memory: bind or
        read it, never write it nor hand it to users (``M.indptr``, ``M.in_degrees()`` and
        the others are copies of it).

        Example
        -------
        >>> M = SparseMatrix(scipy.sparse.eye(2, format="csr", dtype=np.float32))
        >>> M.storage("indptr").tolist(), M.storage("indptr") is M.indptr
        ([0, 1, 2], False)
        """
        if name == "source_order":
            return self._order
        if name in _DERIVED:
            return self._derive(name, lambda: sealed(self.derived(name), _DERIVED[name][1]))
        if name not in ("indptr", "indices", "data", "multiplicity"):
            raise SparseTIRValueError(f"a SparseMatrix stores no array {name!r}; it stores "
                                      "indptr, indices, data, multiplicity, source_order, "
                                      f"{', '.join(_DERIVED)}")
        return self._sealed.get(name)

    def derived(self, name: str) -> np.ndarray:
        """A new writable array ``name`` derived from the stored ones (``"in_degrees"``,
        ``"out_degrees"``, ``"empty_rows"``, ``"edge_ids"``: see ``storage``), computed again
        rather than copied from the one ``storage`` keeps. A count per column (``out_degrees``)
        is made over zeroed memory that the system maps only where a count lands, so a matrix
        far wider than its nonzeros pays for its nonzeros until the array is read.

        Example
        -------
        >>> M = SparseMatrix(scipy.sparse.eye(2, 4, format="csr", dtype=np.float32))
        >>> M.derived("out_degrees").tolist(), M.derived("out_degrees").flags.writeable
        ([1, 1, 0, 0], True)
        """
        if name not in _DERIVED:
            raise SparseTIRValueError(f"a SparseMatrix derives no array {name!r}; it derives "
                                      f"{', '.join(_DERIVED)}")
        make, dtype = _DERIVED[name]
        return make(self).astype(dtype, copy=False)

    def edge_values(self):
        """The values the operators multiply by: ``values`` where it is a ``from_csr`` tensor,
        else the private data (``storage("data")``; never to be written)."""
        return self.values if self.values is not self.data else self._sealed["data"]

    def _keep_values(self, values) -> None:
        """Make the torch tensor ``values`` this matrix's ``values``, in its ``graph_tensors``
        too (made by ``_fill`` over the copied data): a compiled operator reads them there,
        and without it the values' gradient was lost under ``torch.compile``."""
        self.__dict__["values"] = values
        made = self.__dict__["_graph_tensors"]
        if made is not None:
            self.__dict__["_graph_tensors"] = made._replace(values=values)

    @_untraced_arrays
    def in_degrees(self) -> np.ndarray:
        """Each row's (destination's) number of stored entries (in-edges), int64: a
        read-only copy of the array the matrix keeps (``storage("in_degrees")``), as are the
        arrays of the methods below, each call's its own."""
        return frozen(self.storage("in_degrees"))

    @_untraced_arrays
    def out_degrees(self) -> np.ndarray:
        """Each column's (source's) number of stored entries (out-edges), int64."""
        return frozen(self.storage("out_degrees"))

    @_untraced_arrays
    def empty_rows(self) -> np.ndarray:
        """The rows with no stored entry (destinations with no in-edge), int64."""
        return frozen(self.storage("empty_rows"))

    @_untraced_arrays
    def edge_ids(self) -> np.ndarray:
        """``0..nnz-1`` (int32): each entry's position, which kernels that record an edge read
        (they bind ``storage("edge_ids")``)."""
        return frozen(self.storage("edge_ids"))

    @_untraced_arrays
    def transposed(self) -> tuple:
        """``(T, perm)``: this matrix's transpose as a ``SparseMatrix`` (sources become rows)
        and, for each entry of ``T`` in its CSR order, the position of the same entry in this
        matrix (int64; a read-only copy, each call's its own). ``T``'s values follow this
        matrix's: a ``from_csr`` values tensor ``w`` gives ``T.values = w[perm]``, made at this
        call, so a gradient reaches ``w`` and ``T`` sees ``w`` as it is now.

        Example
        -------
        >>> import torch
        >>> w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> M = SparseMatrix.from_csr([0, 2, 3], [0, 1, 0], w, (2, 2))   # [[1, 2], [3, 0]]
        >>> T, perm = M.transposed()
        >>> T.values.tolist(), perm.tolist(), T.values.requires_grad
        ([1.0, 3.0, 2.0], [0, 2, 1], True)
        """
        transpose, perm = self.transposed_pattern()
        if self.values is self.data:
            return transpose, perm
        torch = sys.modules["torch"]           # loaded: the values are a torch tensor
        order = torch.from_numpy(np.array(perm)).to(self.values.device)
        T = SparseMatrix.from_csr(transpose.storage("indptr"), transpose.storage("indices"),
                                  self.values[order], self.shape[::-1])
        T.auto_tune = self.auto_tune
        return T, perm

    @_untraced_arrays
    def transposed_pattern(self) -> tuple:
        """``transposed()`` with the stored values (``data``, as this matrix was made): made
        once per matrix, for the backward passes, which walk edges by source and bring
        their own values."""
        transpose, perm = self._transposed()
        return transpose, frozen(perm, np.int64)

    def transposed_pattern_matrix(self) -> "SparseMatrix":
        """``transposed_pattern()``'s matrix alone: that method copies its permutation at every
        call (8 bytes a nonzero: 5 ms on the arxiv-size graph, half as long as the backward
        ``gspmm`` that asks for the transpose)."""
        return self._transposed()[0]

    def _transposed(self) -> tuple:
        """``(transpose, perm)`` of ``transposed_pattern``, made once; ``perm`` sealed int32,
        the ``rhs_order`` the backward passes bind with the transpose (``generic``)."""
        def make():
            kept = self._sealed
            perm = np.argsort(kept["indices"], kind="stable")   # by column, then row
            rows = np.repeat(np.arange(self.shape[0]), np.diff(kept["indptr"]))
            counts = np.bincount(kept["indices"], minlength=self.shape[1])
            transpose = SparseMatrix.__new__(SparseMatrix)
            transpose._fill(self.shape[::-1], np.concatenate([[0], np.cumsum(counts)]),
                            rows[perm], kept["data"][perm], None, None)
            return transpose, sealed(perm, np.int32)      # nnz < 2**31: int32 positions
        return self._derive("transposed", make)

    def edge_matrix(self) -> "SparseMatrix":
        """This matrix with one stored entry per edge, as the graph operators and layers read
        it: the matrix itself, unless it summed parallel edges into one entry (``multiplicity``;
        ``SparseMatrix(A)`` does, for duplicates of ``A``), when each such entry is stored
        ``multiplicity`` times in a row, each copy holding an equal share of the sum. Its
        ``source_order`` maps the caller's nonzeros to these edges one to one (parallel edges
        in the caller's order). Made once per matrix.

        Example
        -------
        >>> import scipy.sparse
        >>> A = scipy.sparse.csr_matrix((np.float32([1, 2, 3]), [1, 1, 0], [0, 2, 3]), (2, 2))
        >>> M = SparseMatrix(A)
        >>> M.nnz, M.edge_matrix().nnz, M.edge_matrix().indices.tolist()
        (2, 3, [1, 1, 0])
        """
        if self.multiplicity is None:
            return self

        def make():
            kept = self._sealed
            copies = kept["multiplicity"].astype(np.int64)
            ends = np.concatenate([[0], np.cumsum(copies)])
            order = None
            if self._order is not None:     # the caller's p-th nonzero: which edge
                order = np.empty(self._order.size, np.int64)
                order[np.argsort(self._order, kind="stable")] = np.arange(order.size)
            edges = SparseMatrix.__new__(SparseMatrix)
            edges._fill(self.shape, ends[kept["indptr"]], np.repeat(kept["indices"], copies),
                        np.repeat(kept["data"] / copies.astype(self.dtype), copies),
                        None if order is None or np.array_equal(order, np.arange(order.size))
                        else order, None)
            return edges
        return self._derive("edge_matrix", make)

    @_untraced_arrays
    def reorder(self, method: str = "rcm") -> tuple:
        """``(B, perm)``: this (square) matrix with its nodes renumbered so that neighbours
        are close (``ops.reorder``: ``"rcm"``, ``"degree"`` or ``"metis"``), ``B = P A P^T``,
        and the permutation: node ``perm[k]`` of this matrix is node ``k`` of ``B``. Keep the
        features in the new order, ``X[perm]``; a result row ``k`` of ``B`` belongs to node
        ``perm[k]``. ``B`` has this matrix's entries, one each (a ``from_csr`` repeated column
        stays an entry, an edge, of its own, whatever the values' type), what each entry counts
        (``multiplicity``: parallel edges) and ``tune``; a ``from_csr`` values tensor is
        permuted as a torch tensor (``B.values`` is ``M.values[order]``, so a gradient reaches
        ``M.values``), other values are copied.

        Example
        -------
        >>> from sparsetir import ops
        >>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32,
        ...                         random_state=0)
        >>> M = ops.SparseMatrix(A)
        >>> B, perm = M.reorder("rcm")
        >>> X = np.random.default_rng(0).random((6, 16), np.float32)
        >>> Y = np.empty((6, 16), np.float32)
        >>> Y[perm] = ops.spmm(B, X[perm])
        >>> np.allclose(Y, ops.spmm(M, X)), np.allclose(Y, A @ X)
        (True, True)
        """
        from .reorder import permuted, reordering  # pylint: disable=import-outside-toplevel
        perm = reordering(self, method)
        kept = self._sealed
        indptr, indices, order = permuted(kept["indptr"], kept["indices"], perm)
        if self.values is not self.data:      # a from_csr tensor: keep its autograd link
            torch = sys.modules["torch"]     # loaded: the values are a torch tensor
            values = self.values[torch.from_numpy(order).to(self.values.device)]
        else:
            values = kept["data"][order]
        B = SparseMatrix.from_csr(indptr, indices, values, self.shape)
        if self.multiplicity is not None:     # what each entry counts, in B's order
            made = B._sealed
            B._fill(B.shape, made["indptr"], made["indices"], made["data"], None,
                    kept["multiplicity"][order])
        B.auto_tune = self.auto_tune
        return B, frozen(perm)

    def _derive(self, name: str, make):
        """``make()``, computed once per matrix (the arrays cannot change)."""
        if name not in self._derived:
            self._derived[name] = make()
        return self._derived[name]

    def row_tiles(self, tiles: int) -> tuple:
        """``(tile_ptr, rows)``: ``tiles`` ranges of rows holding about ``nnz / tiles``
        nonzeros each (``tile_ptr``, length ``tiles + 1``) and the row ids ``0..m-1``, as
        read-only copies (``_kernel_arrays`` has the ones kernels read)."""
        tile_ptr, rows = self._row_tiles(tiles)
        return frozen(tile_ptr), frozen(rows)

    def _row_tiles(self, tiles: int) -> tuple:
        """``row_tiles``, sealed (for binding), kept."""
        if tiles not in self._tiles:
            m = self.shape[0]
            bounds = balanced_row_bounds(self._sealed["indptr"], tiles)
            rows = next(iter(self._tiles.values()))[1] if self._tiles \
                else sealed(np.arange(m), np.int32)
            self._tiles[tiles] = (sealed(bounds, np.int32), rows)
        return self._tiles[tiles]

    def _guarded(self, bound):
        """``bound`` (a kernel bound to this matrix's arrays), made to refuse outputs over any
        array of the matrix (``BoundKernel.protect``), its public copies included."""
        return bound.protect(**{f"M.{part}": array
                                for part, array in self._kernel_arrays().items()})

    def _kernel_arrays(self) -> dict:
        """The sealed arrays kernels read, by name (``tile_ptr<tiles>`` for each count of
        row tiles made), and the public copies (``public.<name>``): never to be written."""
        arrays = dict(self._sealed)
        for tiles, (tile_ptr, rows) in self._tiles.items():
            arrays[f"tile_ptr{tiles}"], arrays["rows"] = tile_ptr, rows
        for name in ("indptr", "indices", "data", "multiplicity"):
            if getattr(self, name) is not None:
                arrays[f"public.{name}"] = getattr(self, name)
        return arrays

    def __setattr__(self, name: str, value) -> None:
        if name in _FIXED and name in self.__dict__:
            raise AttributeError(
                f"SparseMatrix.{name} cannot be changed: kernels bound to the matrix keep the "
                "arrays it was made with; make a new SparseMatrix from the new arrays")
        super().__setattr__(name, value)

    def __reduce__(self):
        """Copies and pickles are made again from the arrays (validated; no kernels kept),
        with the same ``source_order`` and ``multiplicity``, and a ``values`` tensor (a
        ``from_csr`` one) as a tensor, ``requires_grad`` kept, as torch copies and pickles it."""
        values = None if self.values is self.data else self.values
        return _restored, (self.to_scipy(), self._order, self._sealed.get("multiplicity"),
                           values)

    @_untraced_arrays
    def to_scipy(self) -> scipy.sparse.csr_matrix:
        """A scipy CSR matrix over copies of the (private) arrays."""
        kept = self._sealed
        return scipy.sparse.csr_matrix((np.array(kept["data"]), np.array(kept["indices"]),
                                        np.array(kept["indptr"])), shape=self.shape)

    def __repr__(self) -> str:
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz})"


def as_sparse_matrix(matrix, name: str = "A") -> SparseMatrix:
    """``matrix`` itself when it is a ``SparseMatrix``, else a new one made from it (errors
    call it ``name``)."""
    return matrix if isinstance(matrix, SparseMatrix) else SparseMatrix(matrix, name=name)


_DERIVED = {
    "in_degrees": (lambda M: np.diff(M.storage("indptr")), np.int64),
    "out_degrees": (lambda M: np.bincount(M.storage("indices"), minlength=M.shape[1]),
                    np.int64),
    "empty_rows": (lambda M: np.flatnonzero(M.storage("in_degrees") == 0), np.int64),
    "edge_ids": (lambda M: np.arange(M.nnz), np.int32),
}
"""The arrays ``SparseMatrix.derived`` makes from the stored ones (``storage`` keeps one of
each): name -> ``(make, dtype)``, ``make(M)`` the array of a matrix."""

_FIXED = frozenset({"shape", "indptr", "indices", "data", "source_order", "multiplicity", "nnz",
                    "values", "dtype"})
"""The attributes of a ``SparseMatrix`` that cannot change once made."""


def _restored(csr, source_order, multiplicity=None, values=None) -> SparseMatrix:
    """The matrix ``SparseMatrix.__reduce__`` describes (repeated columns, kept as entries of
    their own, stay so; ``values``: its values tensor, None for its data)."""
    matrix = SparseMatrix.from_csr(csr.indptr, csr.indices, csr.data, csr.shape)
    matrix._fill(matrix.shape, matrix._sealed["indptr"], matrix._sealed["indices"],
                 matrix._sealed["data"], source_order, multiplicity)
    if values is not None:
        matrix._keep_values(values)
    return matrix


def _check_values(name: str, dtype, is_torch: bool) -> None:
    """float32 or float64 values only: a silent cast would lose range (1e39 becomes inf in
    float32) or digits."""
    if str(dtype).replace("torch.", "") not in ("float32", "float64"):
        cast = f"{name}.to(torch.float32)" if is_torch else f"{name}.astype(np.float32)"
        raise SparseTIRTypeError(f"{name} is {str(dtype).replace('torch.', '')}; sparsetir.ops "
                        f"computes in float32 or float64: pass {cast}")


def _plain(array) -> np.ndarray:
    """A numpy array of ``array``'s values (a torch tensor is detached and read on the
    CPU)."""
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return np.asarray(array)


class _Entries(NamedTuple):
    """The caller's nonzeros in its order: ``rows`` (None when ``indptr`` gives them: CSR),
    ``cols``, ``values``."""
    indptr: Optional[np.ndarray]
    rows: Optional[np.ndarray]
    cols: np.ndarray
    values: np.ndarray

    def row_ids(self) -> np.ndarray:
        """The row of every entry."""
        if self.rows is not None:
            return self.rows
        return np.repeat(np.arange(self.indptr.size - 1), np.diff(self.indptr))


def _compressed(name: str, indptr, indices, data, shape: tuple, by_rows: bool) -> _Entries:
    """The entries of a CSR (``by_rows``) or CSC matrix, checked, in stored order."""
    major, minor = shape if by_rows else shape[::-1]
    indptr, indices = check_csr(indptr, indices, (major, minor))
    data = np.asarray(data)
    if data.shape != indices.shape:
        raise SparseTIRValueError(f"{name} has {data.size} values (shape {data.shape}) for "
                         f"{indices.size} indices")
    if by_rows:
        return _Entries(indptr, None, indices, data)
    return _Entries(None, indices, np.repeat(np.arange(major), np.diff(indptr)), data)


def _coordinates(name: str, rows, cols, data, shape: tuple) -> _Entries:
    """The entries of a COO matrix, checked."""
    ids = (index_array(f"{name}'s row ids", rows), index_array(f"{name}'s column ids", cols))
    for what, array, size in zip(("row", "column"), ids, shape):
        outside = np.flatnonzero(array >= size)
        if outside.size:
            raise SparseTIRValueError(f"{name}'s {what} id {array[outside[0]]} is out of range "
                             f"[0, {size})")
    return _Entries(None, *ids, np.asarray(data))


def _entries(matrix, name: str) -> tuple:
    """``(shape, _Entries)``: the caller's nonzeros, checked, in its order."""
    if scipy.sparse.issparse(matrix):
        if matrix.ndim != 2:
            raise SparseTIRTypeError(f"a sparse matrix has 2 dimensions, got {matrix.ndim}")
        _check_values(name, matrix.dtype, False)
        shape = tuple(int(s) for s in matrix.shape)
        if matrix.format in ("csr", "csc"):
            return shape, _compressed(name, matrix.indptr, matrix.indices, matrix.data, shape,
                                      matrix.format == "csr")
        coo = matrix.tocoo()
        return shape, _coordinates(name, coo.row, coo.col, coo.data, shape)
    if isinstance(matrix, SparseTensor):
        if len(matrix.dim_shape) != 2:
            raise SparseTIRTypeError(f"a sparse matrix has 2 dimensions, got a SparseTensor of "
                                     f"shape {matrix.dim_shape}")
        _check_values(name, matrix.dtype, False)
        (rows, cols), values = matrix.to_coo()
        return matrix.dim_shape, _coordinates(name, rows, cols, values, matrix.dim_shape)
    layout = getattr(matrix, "layout", None)
    if layout is not None and "sparse" in str(layout):
        import torch  # pylint: disable=import-outside-toplevel
        if matrix.dim() != 2:
            raise SparseTIRTypeError(f"a sparse matrix has 2 dimensions, got {matrix.dim()}")
        check_autograd(name, matrix, "for edge values that require grad, make the matrix "
                       "with SparseMatrix.from_csr(indptr, indices, values, shape)")
        _check_values(name, matrix.dtype, True)
        shape = tuple(int(s) for s in matrix.shape)
        cpu = matrix.detach().cpu()
        if cpu.layout == torch.sparse_coo:      # as stored: parallel edges are counted
            values = cpu._values()              # pylint: disable=protected-access
            if values.dim() != 1:
                raise SparseTIRTypeError(f"{name} is a hybrid sparse tensor (values of shape "
                                         f"{tuple(values.shape)}); pass a 2-D sparse matrix")
            rows, cols = cpu._indices().numpy()  # pylint: disable=protected-access
            return shape, _coordinates(name, rows, cols, values.numpy(), shape)
        if cpu.layout != torch.sparse_csr:
            raise SparseTIRTypeError(f"a torch sparse tensor must be CSR or COO, got {cpu.layout}")
        return shape, _compressed(name, cpu.crow_indices().numpy(), cpu.col_indices().numpy(),
                                  cpu.values().numpy(), shape, True)
    raise SparseTIRTypeError("sparsetir.ops takes a scipy sparse matrix, a torch sparse CSR/COO "
                             "tensor, a SparseTensor or a SparseMatrix, got "
                             f"{type(matrix).__name__}")


def _falls(indptr: np.ndarray, indices: np.ndarray, strictly: bool) -> np.ndarray:
    """For each entry but the last, whether the next entry of its row has a smaller column
    (``strictly``: a smaller or equal one)."""
    step = np.diff(indices)
    falls = step <= 0 if strictly else step < 0
    starts = indptr[1:-1]
    falls[starts[(starts > 0) & (starts < indices.size)] - 1] = False  # a new row
    return falls


def _sorted_csr(shape: tuple, entries: _Entries) -> tuple:
    """``(indptr, indices, values, order, copies)``: the entries as CSR with the columns of
    each row sorted and duplicates summed, where each entry went (None: where it was) and how
    many entries each sums (None: one each)."""
    if entries.indptr is not None:            # CSR: sorted already when no row falls
        if not _falls(entries.indptr, entries.cols, strictly=True).any():
            return entries.indptr, entries.cols, entries.values, None, None
    m, n = shape
    width = max(n, 1)
    key = entries.row_ids() * width + entries.cols   # below 2**62: dimensions below 2**31
    perm = np.argsort(key)           # duplicates are summed in any order, as scipy does
    key = key[perm]
    first = np.ones(key.size, bool)
    first[1:] = key[1:] != key[:-1]
    order = np.empty(key.size, np.int64)
    order[perm] = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    values = np.add.reduceat(entries.values[perm], starts) if starts.size \
        else entries.values[:0]
    copies = np.diff(np.append(starts, key.size))
    key = key[starts]
    if np.array_equal(order, np.arange(order.size)):
        order = None
    counts = np.bincount(key // width, minlength=m)
    return (np.concatenate([[0], np.cumsum(counts)]), key % width, values, order,
            copies if (copies > 1).any() else None)
