"""C sources shipped with the package, compiled with gcc on first use and cached.

``src/**/*.c`` are copied into the package as ``sparsetir/native/`` (``setup.py``); a source
checkout reads them from ``src/``. ``build_shared(name, flags)`` compiles one into an entry of
the disk cache, ``$SPARSETIR_CACHE/<name>/<digest>/`` (default ``~/.cache/sparsetir``; see
``sparsetir.backend.cache_folder``), keyed by a hash of the source and flags, and returns the library's
path once its size and SHA-256 match what was recorded when it was built. Where the cache
cannot keep it (refused or unusable, with a ``CacheWarning``) the library is built into a
folder private to the process instead.

Example
-------
>>> path = build_shared("libcuda_stub.c", ["-Wl,-soname,libcuda.so.1"])
>>> path.name, path.is_file()
('libcuda_stub.so', True)
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from . import cache_folder

_PACKAGE = Path(__file__).resolve().parents[1]   # the sparsetir package, holding native/


def source_path(name: str) -> Path:
    """Where the C source ``name`` is: in the installed package, else in the checkout's src/."""
    installed = _PACKAGE / "native" / name
    if installed.exists():
        return installed
    found = sorted((_PACKAGE.parents[1] / "src").rglob(name))
    return found[0] if found else installed


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
    library = f"{stem}.so"

    def compile_into(staging: Path) -> None:
        try:
            subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *flags, "-o",
                            str(staging / library), str(source)],
                           check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as err:
            detail = getattr(err, "stderr", "") or err
            raise RuntimeError(f"cannot build {source}: {detail}") from err

    folder = cache_folder.folder(stem)
    files = None
    if folder is not None:
        files = (cache_folder.read_entry(folder / digest)
                 or cache_folder.write_entry(folder / digest, compile_into))
    if files is None:                  # the cache cannot keep it (it warned): this process's copy
        files = cache_folder.write_entry(cache_folder.private_folder() / digest, compile_into)
    if files is None or library not in files:
        raise RuntimeError(f"cannot build {source}: no folder to write the library to")
    return files[library]
