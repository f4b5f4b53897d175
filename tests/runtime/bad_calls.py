"""Calls with inputs that would read or write out of bounds, one per case, run as a script.

``python bad_calls.py CASE [bound]`` builds a zoo kernel, calls it with the bad input of CASE
(``bound``: through ``Kernel.bind`` with every input bound, so the call takes the native fast
path, where a check compiled into the kernel must still surface) and prints
``ArgumentError: <message>`` when the call is refused (exit code 0). A wrong answer
prints ``SILENT``; a crash kills the process, which the test sees as a signal exit code.
The tests in ``test_index_safety.py`` run each case in a subprocess.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sparse_inputs as si  # noqa: E402
from kernel_zoo import CASES  # noqa: E402

import sparsetir  # noqa: E402
from sparsetir.runtime import ArgumentError, native_call  # noqa: E402


def _inputs(name: str) -> dict:
    return CASES[name].make_inputs(si.case_rng(name, "medium"), "medium")


def etype_out_of_range(inputs):
    inputs["etype"] = inputs["etype"].copy()
    inputs["etype"][len(inputs["etype"]) // 2] = inputs["r"]
    return "rgcn_homo_forward", inputs


def etype_negative(inputs):
    inputs["etype"] = inputs["etype"].copy()
    inputs["etype"][0] = -1_000_000
    return "rgcn_homo_forward", inputs


def bsr_too_few_block_rows(inputs):
    # the BSR matrix ends before the last block row that holds entries of A
    blk = inputs["blk_size"]
    last_row = np.flatnonzero(np.diff(inputs["indptr_in"]))[-1]
    m_out = int(last_row) // blk
    nnz_out = int(inputs["indptr_out"][m_out])
    return "csr2bsr", dict(inputs, m_out=m_out, nnz_out=nnz_out,
                           indptr_out=inputs["indptr_out"][:m_out + 1].copy(),
                           indices_out=inputs["indices_out"][:nnz_out].copy(),
                           b=np.zeros(nnz_out * blk * blk, np.float32))


def bsr_too_few_block_columns(inputs):
    # the BSR pattern keeps its blocks below the new n_out; columns of A beyond it have none
    n_out = inputs["n_out"] // 2
    blk = inputs["blk_size"]
    keep = inputs["indices_out"] < n_out
    rows = np.repeat(np.arange(inputs["m_out"]), np.diff(inputs["indptr_out"]))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=inputs["m_out"]))])
    nnz_out = int(keep.sum())
    return "csr2bsr", dict(inputs, n_out=n_out, nnz_out=nnz_out,
                           indptr_out=indptr.astype(np.int32),
                           indices_out=inputs["indices_out"][keep].copy(),
                           b=np.zeros(nnz_out * blk * blk, np.float32))


def bmm_inconsistent_rows(inputs):
    # X's rows (indptr_ij) one shorter than the inner dimension J says, where J is not empty
    lengths = np.diff(inputs["indptr_ij"])
    lengths = np.where(lengths > 0, lengths - 1, 0)
    indptr_ij = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    nnz_ij = int(indptr_ij[-1])
    return "bmm", dict(inputs, indptr_ij=indptr_ij, nnz_ij=nnz_ij,
                       x=np.ones(nnz_ij, np.float32))


CASES_BY_NAME = {f.__name__: f for f in (etype_out_of_range, etype_negative,
                                         bsr_too_few_block_rows, bsr_too_few_block_columns,
                                         bmm_inconsistent_rows)}
KERNEL_OF = {"etype_out_of_range": "rgcn_homo_forward", "etype_negative": "rgcn_homo_forward",
             "bsr_too_few_block_rows": "csr2bsr", "bsr_too_few_block_columns": "csr2bsr",
             "bmm_inconsistent_rows": "bmm"}


def main(case: str, bound: bool = False) -> None:
    name, inputs = CASES_BY_NAME[case](_inputs(KERNEL_OF[case]))
    func = CASES[name].func
    kernel = sparsetir.build(func, "llvm")
    params = kernel.signature.params
    try:
        if bound:
            written = [inputs[p.name] for p in params if getattr(p, "written", False)]
            call = kernel.bind(**{p.name: inputs[p.name] for p in params
                                  if not getattr(p, "written", False)})
            if native_call.available() and not call.native_call:
                print("NO NATIVE PLAN")
                return
            call(*written)
        else:
            kernel(*[inputs[p.name] for p in func.params])
    except ArgumentError as err:
        print(f"ArgumentError: {err}")
        return
    print("SILENT")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["bound"])
