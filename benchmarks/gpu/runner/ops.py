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
>>> err, ok = check(inputs["out"], expected)                      # after the kernel wrote out
"""

from __future__ import annotations

import numpy as np
import torch

OPS = ("spmm", "spmm_unweighted", "sddmm")
RTOL, ATOL = 1e-4, 1e-3  # float32 sums of up to ~10^5 terms in another order


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


def check(out: torch.Tensor, expected: torch.Tensor, rtol: float = RTOL,
          atol: float = ATOL) -> tuple:
    """(largest absolute difference, whether ``out`` is finite and within tolerance ``rtol``,
    ``atol``: by default the float32 CSR ops')."""
    out = out.reshape(expected.shape)
    finite = bool(torch.isfinite(out).all())
    err = float((out - expected).abs().max()) if out.numel() else 0.0
    return err, finite and bool(torch.allclose(out, expected, rtol=rtol, atol=atol))


def _tensor(array: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)
