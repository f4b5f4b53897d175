"""The packaged kernels' two operations, their inputs and torch's answer (cuSPARSE on a GPU).

Each kernel's JSON gives every parameter a ``role``; :func:`make_inputs` returns the tensors and
sizes by role, so the call is ``[inputs[p["role"]] for p in spec["params"]]`` in the kernel's
parameter order.

* ``spmm``: ``out = A @ x``, A the graph with float32 weights (CSR), x dense ``cols x feat``.
* ``spmm_unweighted``: the same with every weight 1 (the kernel takes no values; DGL's
  ``copy_u_sum``).
* ``sddmm``: ``out[e] = x[row(e)] . y[col(e)]`` for each nonzero ``e``: torch's
  ``sampled_addmm(pattern, x, y.T, beta=0)``.

Example
-------
>>> inputs = make_inputs("spmm", graph, 32, torch.device("cuda"))   # doctest: +SKIP
>>> expected = reference("spmm", inputs)                          # (rows, 32), through cuSPARSE
>>> err, ok = check(inputs["out"], expected, scale=magnitude("spmm", inputs))  # after the kernel
"""

from __future__ import annotations

import numpy as np
import torch

from segments import segment_bounds  # sparsetir.format.segments' function, written by package.py

OPS = ("spmm", "spmm_unweighted", "sddmm")
RTOL, ATOL = 1e-4, 1e-3  # float32 sums of up to ~10^5 terms in another order (see magnitude)


def make_inputs(op: str, graph, feat: int, device) -> dict:
    """Seeded inputs of ``op`` on ``graph`` (a ``graphs.Graph``), the output filled with NaN."""
    rows = cols = graph.rows
    rng = graph.rng(f"{op}/{feat}")
    inputs = {
        "indptr": torch.from_numpy(graph.indptr).to(device),
        "indices": torch.from_numpy(graph.indices).to(device),
        "rows": rows, "cols": cols, "nnz": graph.nnz,
    }
    if op in ("spmm", "spmm_unweighted"):
        values = rng.random(graph.nnz, dtype=np.float32) + 0.5 if op == "spmm" \
            else np.ones(graph.nnz, np.float32)
        inputs["values"] = _tensor(values, device)
        inputs["x"] = _tensor(rng.standard_normal((cols, feat), dtype=np.float32), device)
        inputs["out"] = torch.full((rows, feat), float("nan"), device=device)
    elif op == "sddmm":
        inputs["x"] = _tensor(rng.standard_normal((rows, feat), dtype=np.float32), device)
        inputs["y"] = _tensor(rng.standard_normal((cols, feat), dtype=np.float32), device)
        inputs["out"] = torch.full((graph.nnz,), float("nan"), device=device)
    else:
        raise ValueError(f"unknown op {op!r}; known: {OPS}")
    return inputs


def baseline(op: str, inputs: dict):
    """A function of no arguments computing ``op`` with torch.sparse (cuSPARSE on a GPU)."""
    shape = (inputs["rows"], inputs["cols"])
    if op != "sddmm":
        matrix = torch.sparse_csr_tensor(inputs["indptr"], inputs["indices"], inputs["values"],
                                         shape)
        x = inputs["x"]
        return lambda: matrix @ x
    pattern = torch.sparse_csr_tensor(inputs["indptr"], inputs["indices"],
                                      torch.ones_like(inputs["out"]), shape)
    x, y_t = inputs["x"], inputs["y"].t()
    return lambda: torch.sparse.sampled_addmm(pattern, x, y_t, beta=0.0)


def reference(op: str, inputs: dict) -> torch.Tensor:
    """torch's result of ``op``, shaped as the kernel's output."""
    result = baseline(op, inputs)()
    return result.values() if op == "sddmm" else result


def magnitude(op: str, inputs: dict) -> torch.Tensor:
    """Per output element, the sum of the absolute values of the terms it adds (``|A| @ |x|``
    for SpMM, ``|x[row]| . |y[col]|`` for SDDMM). Float32 sums of the same terms in another
    order differ by a small multiple of the rounding unit times this, however much the terms
    cancel: a row of 23111 nonzeros whose sum is near 0 may differ from torch's by 1e-3."""
    absolute = {key: value.abs() if key in ("values", "x", "y") else value
                for key, value in inputs.items()}
    return reference(op, absolute)


def check(out: torch.Tensor, expected: torch.Tensor, rtol: float = RTOL,
          atol: float = ATOL, scale: torch.Tensor | None = None) -> tuple:
    """(largest absolute difference, whether ``out`` is finite and every element within
    ``atol + rtol * scale`` of ``expected``; ``scale`` is ``|expected|`` unless given, e.g.
    ``magnitude``'s bound for the float32 CSR ops)."""
    out = out.reshape(expected.shape)
    finite = bool(torch.isfinite(out).all())
    if not out.numel():
        return 0.0, finite
    difference = (out - expected).abs()
    bound = atol + rtol * (expected.abs() if scale is None else scale.reshape(expected.shape))
    return float(difference.max()), finite and bool((difference <= bound).all())


def with_segments(inputs: dict, graph, max_nnz: int) -> dict:
    """``inputs`` with the graph's rows cut into segments of at most ``max_nnz`` nonzeros
    (``seg_ptr``, ``seg_rows``, their count ``segments``) for the ``*_segments`` kernels."""
    seg_ptr, seg_rows = segment_bounds(graph.indptr.astype(np.int64), max_nnz)
    device = inputs["indices"].device
    return dict(inputs, seg_ptr=_tensor(seg_ptr.astype(np.int32), device),
                seg_rows=_tensor(seg_rows.astype(np.int32), device), segments=seg_rows.size)


def _tensor(array: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)
