"""Files of saved kernels: ``save(obj, path)`` and ``load(path)``, verified like the disk cache.

A saved file is a header line that names it, one JSON line recording the file's format, the
saved object's type and the size and SHA-256 of the rest, and the object's pickle, in
which a kernel carries its shared libraries and the Stage III module its call contract is
read from (``driver.portable``). ``load`` refuses (``KernelFileError``) a file without the
header, or whose contents differ from what the header records (damaged, cut short, altered),
before unpickling anything. A saved kernel holds machine code that runs in the process that
loads it, as a cache entry does: load only files you trust.

Example
-------
>>> kernel.save("spmm64.stk")
>>> same = sparsetir.load("spmm64.stk")        # in this process or another one
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path

from ..backend.cache_folder import record
from ..errors import KernelFileError

MAGIC = b"sparsetir saved object\n"
FORMAT = 1
KINDS = ("Kernel", "AlgebraKernel", "GroupedKernel")
"""The types of what ``save`` writes and ``load`` returns."""


def save(obj, path) -> None:
    """Write ``obj`` (a ``Kernel``, ``AlgebraKernel`` or ``GroupedKernel``) to ``path``,
    replacing it whole or not at all."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT, "object": type(obj).__name__,
              **record(payload)}
    path = Path(path)
    descriptor, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with open(descriptor, "wb") as file:
            file.write(MAGIC + json.dumps(header).encode() + b"\n" + payload)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def load(path):
    """The object ``save`` wrote to ``path``; ``KernelFileError`` when the file is not one
    sparsetir saved or its contents are not what was saved."""
    data = Path(path).read_bytes()
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
