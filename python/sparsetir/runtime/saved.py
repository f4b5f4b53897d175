"""Files of saved kernels: ``save(obj, path)`` and ``load(path)``, verified like the disk cache.

A saved file is a header line that names it, one JSON line recording the file's format, the
saved object's type and the size and SHA-256 of the rest, and the object's pickle, in
which a kernel carries its shared libraries and the Stage III module its call contract is
read from (``driver.portable``). ``load`` refuses (``KernelFileError``) a file without the
header, or whose contents differ from what the header records (damaged, cut short, altered),
before unpickling anything. A path that cannot be read or written (missing, a directory, not
writable) is a ``KernelPathError`` naming it and the problem, which is also the builtin
``OSError`` subclass of that problem (``FileNotFoundError``, ``IsADirectoryError``,
``PermissionError``). A saved kernel holds machine code that runs in the process that
loads it, as a cache entry does: load only files you trust.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm      # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
>>> kernel = sparsetir.build(spmm.specialize({"feat_size": 64}), "llvm")
>>> kernel.save("spmm64.stk")
>>> same = sparsetir.load("spmm64.stk")        # in this process or another one
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X, Y = np.ones((5, 64), np.float32), np.zeros((6, 64), np.float32)
>>> same(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import tempfile
from pathlib import Path

from ..backend.cache_folder import record
from ..errors import KernelFileError, KernelPathError

MAGIC = b"sparsetir saved object\n"
FORMAT = 1
KINDS = ("Kernel", "AlgebraKernel", "GroupedKernel")
"""The types of what ``save`` writes and ``load`` returns."""


def save(obj, path) -> None:
    """Write ``obj`` (a ``Kernel``, ``AlgebraKernel`` or ``GroupedKernel``) to ``path``,
    replacing it whole or not at all."""
    path = Path(path)
    if path.is_dir():
        raise path_error(IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)), path,
                         "cannot save the kernel over a directory")
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT, "object": type(obj).__name__,
              **record(payload)}
    try:
        descriptor, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as err:
        raise path_error(err, path, f"cannot save the kernel: no file can be created in {path.parent}") from None
    try:
        with open(descriptor, "wb") as file:
            file.write(MAGIC + json.dumps(header).encode() + b"\n" + payload)
        os.replace(staging, path)
    except BaseException as err:
        Path(staging).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise path_error(err, path, "cannot save the kernel") from None
        raise


def load(path):
    """The object ``save`` wrote to ``path``; ``KernelFileError`` when the file is not one
    sparsetir saved or its contents are not what was saved."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise path_error(err, path, "sparsetir.load cannot read the saved kernel") from None
    if not data.startswith(MAGIC):
        raise KernelFileError(f"{path} is not a file saved by sparsetir "
                              "(Kernel.save, AlgebraKernel.save, GroupedKernel.save)")
    line, _, payload = data[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(line)
        expected = {"size": header["size"], "sha256": header["sha256"]}
        saved_format, kind = header["format"], header["object"]
    except (ValueError, TypeError, KeyError) as err:
        raise KernelFileError(f"{path} is damaged: its header cannot be read ({err})") from None
    if saved_format != FORMAT:
        raise KernelFileError(f"{path} has format {saved_format!r}; this sparsetir reads "
                              f"format {FORMAT}")
    if kind not in KINDS:
        raise KernelFileError(f"{path} holds a {kind!r}; sparsetir.load reads "
                              f"{', '.join(KINDS)}; not loaded")
    if record(payload) != expected:
        raise KernelFileError(
            f"{path} is not what was saved: its {len(payload)} bytes do not have the size and "
            "SHA-256 recorded when it was saved (damaged, cut short or altered); not loaded")
    loaded = pickle.loads(payload)
    if type(loaded).__name__ != kind:
        raise KernelFileError(f"{path} is not what was saved: its header names {kind}, its "
                              f"contents are {type(loaded).__name__} (altered)")
    return loaded



_PATH_ERRORS = {builtin: type(f"KernelPath{builtin.__name__}", (KernelPathError, builtin), {
    "__module__": __name__, "__doc__": f"A ``KernelPathError`` that is a ``{builtin.__name__}``."})
    for builtin in (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)}
"""The builtin ``OSError`` subclasses a path meets -> their ``KernelPathError`` twins."""
globals().update({twin.__name__: twin for twin in _PATH_ERRORS.values()})    # pickled by name


def path_error(err: OSError, path, doing: str) -> KernelPathError:
    """A ``KernelPathError`` for ``err`` met at ``path``: ``doing`` and ``err``'s problem in
    its message, ``path`` as its filename, and ``err``'s builtin class among its bases where
    it is one of ``_PATH_ERRORS``.

    Example
    -------
    >>> e = path_error(FileNotFoundError(2, "No such file or directory"), "a.stk", "load")
    >>> isinstance(e, FileNotFoundError), str(e)
    (True, "[Errno 2] load: No such file or directory: 'a.stk'")
    """
    kind = _PATH_ERRORS.get(type(err), KernelPathError)
    return kind(err.errno, f"{doing}: {err.strerror or err}", str(path))
