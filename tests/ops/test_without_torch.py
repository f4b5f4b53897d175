"""DGL's operators on numpy arrays need no torch: ``sparsetir.ops`` imports, and gspmm,
gsddmm and edge_softmax compute, in a process where ``import torch`` fails (as in an
environment without it, like the wheel's smoke test)."""

import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys


class NoTorch:                                    # import torch raises ImportError
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError("torch is not installed here")


sys.meta_path.insert(0, NoTorch())
import numpy as np, scipy.sparse
import sparsetir.ops as ops
A = scipy.sparse.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
A = scipy.sparse.diags((np.arange(40) != 5).astype(np.float32)) @ A   # row 5 empty
A = A.tocsr(); A.sort_indices()
x = np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32)
y = np.random.default_rng(1).standard_normal((40, 8)).astype(np.float32)
M = ops.SparseMatrix(A)
ones = A.copy(); ones.data[:] = 1
coo = A.tocoo()
logits = np.random.default_rng(2).standard_normal(A.nnz).astype(np.float32)
e = np.exp(logits - logits.max())
sums = np.bincount(coo.row, e, A.shape[0])
print(json.dumps({
    "copy_u_sum": float(np.abs(ops.copy_u_sum(M, x) - ones @ x).max()),
    "u_dot_v": float(np.abs(ops.u_dot_v(M, x, y)[:, 0] - (x[coo.col] * y[coo.row]).sum(1)).max()),
    "edge_softmax": float(np.abs(ops.edge_softmax(M, logits) - e / sums[coo.row]).max()),
    "torch": "torch" in sys.modules}))
"""


def test_graph_operators_on_numpy_run_without_torch():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(root / "python"),
                                            **{k: v for k, v in __import__("os").environ.items()
                                               if k != "PYTHONPATH"}})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("torch") is False
    assert all(error < 1e-5 for error in found.values()), found
