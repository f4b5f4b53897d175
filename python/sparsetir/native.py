"""C sources shipped with the package, compiled with gcc on first use and cached.

``src/**/*.c`` are copied into the package as ``sparsetir/native/`` (``setup.py``); a source
checkout reads them from ``src/``. ``build_shared(name, flags)`` compiles one into
``$SPARSETIR_CACHE/<name>/`` (default ``~/.cache/sparsetir``), keyed by a hash of the source
and flags, and returns the library's path; processes that race build aside and rename.

Example
-------
>>> # path = build_shared("libcuda_stub.c", ["-Wl,-soname,libcuda.so.1"])
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def source_path(name: str) -> Path:
    """Where the C source ``name`` is: in the installed package, else in the checkout's src/."""
    installed = _PACKAGE / "native" / name
    if installed.exists():
        return installed
    found = sorted((_PACKAGE.parents[1] / "src").rglob(name))
    return found[0] if found else installed


def cache_dir() -> Path:
    """The folder compiled kernels and native libraries are kept in."""
    return Path(os.environ.get("SPARSETIR_CACHE", Path.home() / ".cache" / "sparsetir"))


def build_shared(name: str, flags=()) -> Path:
    """Compile the C source ``name`` into a shared library once per source and flags; return
    its path. Raises RuntimeError naming the source when gcc is missing or fails."""
    source = source_path(name)
    try:
        text = source.read_bytes()
    except OSError as err:
        raise RuntimeError(f"cannot read the C source {source}: {err}") from err
    digest = hashlib.sha256(text + "\0".join(flags).encode()).hexdigest()[:16]
    stem = name.removesuffix(".c")
    folder = cache_dir() / stem
    lib = folder / f"{stem}-{digest}.so"
    if lib.exists():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *flags, "-o", tmp, str(source)],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, lib)
    except (OSError, subprocess.CalledProcessError) as err:
        Path(tmp).unlink(missing_ok=True)
        detail = getattr(err, "stderr", "") or err
        raise RuntimeError(f"cannot build {source}: {detail}") from err
    return lib
