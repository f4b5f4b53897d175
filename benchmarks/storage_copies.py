"""What private storage costs: constructing ``SparseTensor`` / ``ops.SparseMatrix`` on an
ogbn-arxiv-sized graph, and the first and later reads of the arrays they hand out.

The matrix is SYNTHETIC: ``sparsetir.data.power_law_graph(169,343, 1,166,243, seed=0)``
(ogbn-arxiv's node and edge counts), float32. A ``SparseTensor`` copies each array it is made
from once (into memory numpy will not make writable); the arrays it hands out (``values``,
``positions``, ``coordinates``...) are separate copies made at the first read and kept. Each
line is the median of ``--repeat`` timed calls after one warm-up call, in one process; "copy"
lines time ``format.frozen`` of the same arrays alone, the cost of one copy.

Run: ``.venv/bin/python benchmarks/storage_copies.py [--repeat 5]``; run it again with another
checkout's ``python/`` on ``PYTHONPATH`` to compare.

Measured (2026-11-28, a shared 2-core VM under a load average of 6 to 18, so single lines swing
by 2-3x between runs; medians of 9): one copy of the three arrays (9.5 MiB) 2.0-2.2 ms;
``from_arrays`` 46-104 ms on this branch against 67-159 ms before it (int32 arrays are no longer
widened to int64 and narrowed again before the one copy); the first read of the three arrays
adds about one copy; later reads 0.00 ms; ``ops.SparseMatrix(A)`` 26-65 ms against 35-49 ms
(the same code but for the graph tensors' own copies, about 10 ms either way when timed alone).
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from sparsetir.data import power_law_graph
from sparsetir.format import Encoding, SparseTensor
from sparsetir.format.frozen import frozen
from sparsetir.ops import SparseMatrix
from sparsetir.runtime.timing import median_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    A = power_law_graph(169_343, 1_166_243, seed=0).astype(np.float32)
    enc = Encoding.named("CSR", pos_width=32, crd_width=32)
    indptr, indices, data = A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data
    nbytes = indptr.nbytes + indices.nbytes + data.nbytes
    print(f"# {platform.node()} {platform.processor() or platform.machine()}; "
          f"{A.shape[0]} x {A.shape[1]}, nnz {A.nnz}, CSR arrays {nbytes / 2**20:.1f} MiB")

    def ms(fn) -> str:
        return f"{median_seconds(fn, args.repeat) * 1e3:9.2f} ms"

    def fresh_tensor():
        return SparseTensor.from_arrays(enc, A.shape, [None, indptr], [None, indices], data)

    def first_reads():
        tensor = fresh_tensor()
        return tensor.values, tensor.positions(1), tensor.coordinates(1)

    tensor = fresh_tensor()
    first_reads()
    print(f"copy of the three CSR arrays (frozen)     {ms(lambda: [frozen(a) for a in (indptr, indices, data)])}")
    print(f"SparseTensor.from_arrays (32-bit CSR)     {ms(fresh_tensor)}")
    print(f"  ... and the first read of its arrays    {ms(first_reads)}")
    print(f"later reads (kept copies)                 {ms(lambda: (tensor.values, tensor.positions(1), tensor.coordinates(1)))}")
    print(f"SparseTensor.from_scipy (CSR)             {ms(lambda: SparseTensor.from_scipy(A, 'CSR'))}")
    print(f"SparseTensor.to_coo (walk kept)           {ms(tensor.to_coo)}")
    print(f"ops.SparseMatrix(A)                       {ms(lambda: SparseMatrix(A))}")


if __name__ == "__main__":
    main()
