"""Kernels called in children made by ``fork`` after the parent ran a parallel kernel, as a
script (``test_fork.py`` runs it in a subprocess with a timeout, so a hang fails the test).

``python fork_workers.py`` runs ``sparsetir.ops.spmm`` in the parent (TVM's thread pool starts),
then in multiprocessing 'fork' workers, in torch DataLoader workers (``multiprocessing_context=
'fork'``) and in a thread started by an ``os.fork`` child; every result is compared with
scipy's and the script prints ``OK <count>`` for the results that matched.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import numpy as np
import scipy.sparse
import torch.utils.data

import sparsetir.ops

A = scipy.sparse.random(600, 300, density=0.02, format="csr", dtype=np.float32,
                        random_state=np.random.default_rng(0))
A = (scipy.sparse.diags((np.arange(600) % 5 != 0).astype(np.float32)) @ A).tocsr()  # empty rows
A.eliminate_zeros()
X = np.random.default_rng(1).standard_normal((300, 16)).astype(np.float32)
EXPECTED = A @ X


def error(_=None) -> float:
    """Largest difference between ``ops.spmm`` and scipy for the module's problem."""
    return float(np.abs(np.asarray(sparsetir.ops.spmm(A, X)) - EXPECTED).max())


class Errors(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return error()


def in_forked_thread() -> list:
    """Errors from an ``os.fork`` child: its own thread, then a thread it starts."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        found = [error()]
        thread = threading.Thread(target=lambda: found.append(error()))
        thread.start()
        thread.join()
        os.write(write, repr(found).encode())
        os._exit(0)
    os.close(write)
    found = eval(os.read(read, 1000).decode())   # noqa: S307  (our own child's repr)
    assert os.waitpid(pid, 0)[1] == 0
    return found


def main() -> None:
    errors = [error()]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        errors += pool.map(error, range(4))
    loader = torch.utils.data.DataLoader(Errors(), batch_size=None, num_workers=2,
                                         multiprocessing_context="fork")
    errors += [float(e) for e in loader]
    errors += in_forked_thread()
    bad = [e for e in errors if not e < 1e-4]
    print(f"OK {len(errors)}" if not bad else f"WRONG {errors}")


if __name__ == "__main__":
    sys.exit(main())
