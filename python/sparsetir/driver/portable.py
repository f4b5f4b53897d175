"""Kernels that leave their process: pickled, saved (``Kernel.save``), sent to a spawned worker.

``kernel_of`` gives every kernel it makes a ``KernelOrigin``: the ``Compiled`` it was made
from, its target's kind and ``kernel_of`` itself. A kernel pickles as ``restore_kernel`` over
the origin's ``contents`` (the files the disk cache would keep: its shared library, the index checks'
library and the Stage III module its signature is read from, ``cache.write_files``) and its
argument checks. ``restore_kernel`` writes those files into an entry of this process's private
folder (``cache_folder.write_entry``: each file's size and SHA-256 recorded), loads them as a
cache hit does (``cache.load_compiled``) and makes the kernel again with ``kernel_of`` (pickled
by its name, as functions are): the
same signature, index checks and argument checks as the kernel that was pickled. Libraries
link against TVM's runtime: a kernel from another TVM or tvm-ffi version is refused.

Example
-------
>>> import pickle, numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm      # Y = A @ X: a, x, y, indptr, indices, m, n, nnz
>>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm")
>>> same = pickle.loads(pickle.dumps(kernel))       # or in a torch.multiprocessing worker
>>> [param.name for param in same.signature.params]
['a', 'x', 'y', 'indptr', 'indices', 'm', 'n', 'nnz']
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> same(A.data, X, Y, A.indptr, A.indices, 6, 5, A.nnz)
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from pathlib import Path

import tvm
import tvm_ffi

from ..backend import cache_folder
from ..errors import KernelFileError
from .cache import Compiled, load_compiled, write_files

FORMAT = 1


class KernelOrigin:
    """What a kernel from ``sparsetir.build`` was made of (``compiled``, for a target of kind
    ``target``), which its pickle carries, and the function that made it of that
    (``make_kernel(compiled, target)``: ``build_module.kernel_of``)."""

    def __init__(self, compiled: Compiled, target: str, make_kernel):
        self.compiled = compiled
        self.target = target
        self.make_kernel = make_kernel

    def contents(self) -> dict:
        """The kernel's files (``{name: bytes}``) and what they need to load."""
        with tempfile.TemporaryDirectory(dir=cache_folder.private_folder()) as folder:
            write_files(self.compiled, Path(folder))
            files = {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir())}
        return {"format": FORMAT, "tvm": tvm.__version__, "tvm_ffi": tvm_ffi.__version__,
                "target": self.target, "files": files}

    def reduced(self, argument_checks: tuple) -> tuple:
        """``Kernel.__reduce__``'s answer for a kernel of this origin."""
        return restore_kernel, (self.contents(), argument_checks, self.make_kernel)


def restore_kernel(contents: dict, argument_checks: tuple, make_kernel):
    """The kernel whose ``KernelOrigin.contents`` and argument checks were pickled, made by
    ``make_kernel`` as it was the first time."""
    _check_versions(contents)
    files = contents["files"]
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    entry = cache_folder.private_folder() / f"kernel-{digest.hexdigest()[:32]}"
    written = cache_folder.read_entry(entry) or cache_folder.write_entry(   # gone at exit:
        entry, lambda folder: write_files(Compiled(None, None, files=lambda: files), folder),
        durable=False)                                                # no fsync
    if written is None:
        raise KernelFileError(f"the kernel's libraries cannot be written to {entry.parent}")
    compiled = load_compiled(written)._replace(files=functools.partial(dict, files))
    kernel = make_kernel(compiled, contents["target"])
    for check, reads in argument_checks:
        kernel = kernel.with_argument_check(check, reads)
    return kernel


def _check_versions(contents: dict) -> None:
    if contents.get("format") != FORMAT:
        raise KernelFileError(f"the kernel was saved in format {contents.get('format')!r}; "
                              f"this sparsetir reads format {FORMAT}")
    here = {"tvm": tvm.__version__, "tvm_ffi": tvm_ffi.__version__}
    for package, version in here.items():
        if contents[package] != version:
            raise KernelFileError(
                f"the kernel was compiled against {package} {contents[package]}, this process "
                f"runs {package} {version}: its library cannot be loaded here; build it again")
