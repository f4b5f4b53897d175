"""Small graphs the distributed tests share: random patterns with empty rows and columns.

Example
-------
>>> small_graph(40).shape
(40, 40)
"""

import numpy as np
import scipy.sparse


def small_graph(n: int = 60, density: float = 0.08, seed: int = 0,
                dtype=np.float32) -> scipy.sparse.csr_matrix:
    """A random ``n`` x ``n`` CSR matrix whose rows 3, 7 and columns 5, 11 are empty."""
    A = scipy.sparse.random(n, n, density=density, format="lil", dtype=dtype,
                            random_state=seed)
    A[[3, 7], :] = 0
    A[:, [5, 11]] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    A.data += 0.5                      # no stored value near zero
    return A
