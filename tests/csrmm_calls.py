"""A CSR SpMM kernel built by ``sparsetir.build`` and a valid set of call arguments, shared by
the tests of the call contract (``test_build_arguments``, ``runtime/test_call_contract``)."""

import numpy as np
import scipy.sparse
from kernel_zoo import CASES

import sparsetir

FEAT = 16
NAMES = ("a", "b", "c", "indptr", "indices", "m", "n", "nnz")


def build_kernel():
    """csrmm with the feature size baked in, default schedule, for the host CPU."""
    return sparsetir.build(CASES["csrmm"].func.specialize({"feat_size": FEAT}), "llvm")


def make_args() -> dict:
    """12 x 9 CSR (row 4 empty) times 9 x FEAT; the output starts as NaN; plus "expected"."""
    rng = np.random.default_rng(3)
    a = scipy.sparse.random(12, 9, density=0.3, format="csr", dtype=np.float32, random_state=rng)
    a = scipy.sparse.diags((np.arange(12) != 4).astype(np.float32)) @ a   # row 4 empty
    a.eliminate_zeros()
    a.sort_indices()
    x = rng.standard_normal((9, FEAT)).astype(np.float32)
    return {"a": a.data, "b": x, "c": np.full((12, FEAT), np.nan, np.float32),
            "indptr": a.indptr.astype(np.int32), "indices": a.indices.astype(np.int32),
            "m": 12, "n": 9, "nnz": a.nnz, "expected": a @ x}


def call(kernel, args: dict, **changes):
    """Call ``kernel`` with ``args`` where ``changes`` replace some; return the output."""
    merged = {**args, **changes}
    kernel(*[merged[k] for k in NAMES])
    return merged["c"]
