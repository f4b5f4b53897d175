"""The on-disk cache: folders only the current user can change, and entries written atomically.

Compiled kernels (``driver/cache.py``) and the libraries gcc builds (``native.py``) are kept under
one root, :func:`root`: ``$SPARSETIR_CACHE`` (an empty value counts as unset), default
``~/.cache/sparsetir``. What is kept there is loaded into the process and runs in it, so, as ssh
and pip do, a folder is used only when it belongs to the current user and neither group nor
others can write to it; the folders made here are 0700 and the files 0600 whatever the umask.
Where the cache cannot be used (refused, not a folder, read-only, full) a :class:`CacheWarning`
says why and the caller keeps what it compiled for this process only.

An entry is a folder of files and ``metadata.json``: the marker that says the cache wrote the
folder, with the entry's name and each file's size and SHA-256. It is filled in a staging
folder beside it, fsync'd and renamed into place, so readers see all of it or nothing.
:func:`read_entry` checks every file against the metadata before anything is loaded: a file cut
short, emptied or swapped makes the entry a miss, and :func:`write_entry` replaces it: whatever
is in its place (a damaged entry, a folder where a file belongs, a file or a link where the
entry belongs) is first set aside (``_set_aside``), which removes what the cache wrote and
keeps anything else in a ``.set-aside-*`` folder beside the entries, out of the way.
:func:`clear` removes the entries' own files only; anything else stays, with its folder.

Example
-------
>>> from sparsetir.backend import cache_folder
>>> folder = cache_folder.folder("docs-example")  # None (with a CacheWarning): keep it in memory
>>> entry = folder / "0123abcd"                   # a kernel's key
>>> def write_files(staging):                     # called with an empty private folder
...     (staging / "kernel.so").write_bytes(b"compiled code")
>>> files = cache_folder.read_entry(entry) or cache_folder.write_entry(entry, write_files)
>>> files["kernel.so"]
PosixPath('.../docs-example/0123abcd/kernel.so')
>>> cache_folder.read_entry(entry) == files       # every file as recorded: a hit
True
>>> cache_folder.clear("docs-example", ["kernel.so"])    # the entries' files, then the folders
>>> folder.exists()
False
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import json
import os
import shutil
import stat
import tempfile
import warnings
from contextlib import suppress
from pathlib import Path
from ..errors import SparseTIRValueError

METADATA = "metadata.json"
_FORMAT = 1
_STAGING = ".staging-"
_STAGING_MARKER = ".sparsetir-staging"      # in a staging folder until it becomes an entry
_SET_ASIDE = ".set-aside-"
DAMAGED = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)
"""What reading a damaged entry's files raises (JSON nested too deep: RecursionError)."""


class CacheWarning(UserWarning):
    """The disk cache cannot be used (safely); what was compiled is kept for this process only."""


class _Refused(Exception):
    """A folder or file in the cache that another user could have written."""


def root() -> Path:
    """The cache's root folder: ``$SPARSETIR_CACHE``, or ``~/.cache/sparsetir`` when that is
    unset or empty."""
    return Path(os.environ.get("SPARSETIR_CACHE") or Path.home() / ".cache" / "sparsetir")


def folder(name: str) -> Path | None:
    """``root() / name``, made (0700) if missing, when both are folders of the current user that
    group and others cannot write to; otherwise None, with a :class:`CacheWarning`."""
    path = root() / name
    try:
        for step in (path.parent, path):      # the root first: nothing is made in a refused one
            _make_private(step)
            _check(step, os.stat(step), stat.S_ISDIR, "folder")
    except _Refused as err:
        _warn(f"sparsetir's disk cache is not used: {err}")
        return None
    except OSError as err:
        _warn(f"sparsetir's disk cache is not used: cannot use the cache folder {path}: {err}")
        return None
    return path


def read_entry(entry: Path) -> dict | None:
    """``{name: path}`` of the entry's files when its metadata is there and every file has the
    recorded size and SHA-256; None (a miss) when anything is missing, damaged or refused (a
    refusal also warns)."""
    try:
        records = _metadata(entry)["files"]       # plain file names only
        for name, kept in records.items():
            if record(_own_bytes(entry / name, kept["size"])) != kept:
                return None
    except _Refused as err:
        _warn(f"sparsetir does not load the cache entry {entry}: {err}")
        return None
    except DAMAGED:
        return None
    return {name: entry / name for name in records}


def write_entry(entry: Path, write_files, durable: bool = True,
                replace: bool = False) -> dict | None:
    """Make ``entry``: ``write_files(staging)`` writes its files into an empty private folder,
    which gets the metadata and is renamed to ``entry``, replacing whatever is there but an
    intact entry (``_set_aside``); ``replace``: an intact one too (a tuning record that a
    new search supersedes). Each file and folder is fsync'd first unless ``durable`` is False
    (an entry of :func:`private_folder`, which does not outlive the process: a power cut loses
    it anyway).

    Returns ``{name: path}`` as :func:`read_entry` does (another process's entry when it placed
    one first), or None when the disk refuses (with a :class:`CacheWarning` naming the entry);
    whatever ``write_files`` raises passes through. No staging folder is left behind."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=entry.parent))
    except OSError as err:
        _warn(f"sparsetir cannot store {entry}: {err}")
        return None
    try:
        os.chmod(staging, 0o700)
        _write_private(staging / _STAGING_MARKER, "", durable)
        write_files(staging)
        os.unlink(staging / _STAGING_MARKER)
        records = {}
        for path in sorted(staging.iterdir()):
            os.chmod(path, 0o600)
            records[path.name] = record(_synced_bytes(path) if durable else path.read_bytes())
        _write_private(staging / METADATA,
                       json.dumps({"format": _FORMAT, "key": entry.name, "files": records}),
                       durable)
        if durable:
            _sync_folder(staging)
        placed = _place(staging, entry, records, replace)
        if durable:
            _sync_folder(entry.parent)
    except OSError as err:
        _warn(f"sparsetir cannot store {entry}: {err}")
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)      # still there when the rename did not happen
    return {name: entry / name for name in records} if placed else read_entry(entry)


def clear(name: str, names) -> None:
    """Remove the entries in ``root() / name`` (and staging and set-aside folders a killed
    process left): the files an entry's metadata lists and the metadata (in a staging folder,
    which holds the cache's marker, the files called ``names``; in a set-aside folder, each
    entry's listed files), then
    each folder left empty, ``root() / name`` included. Files the cache did not write stay, and
    so do the folders holding them."""
    path = root() / name
    if not path.is_dir() or folder(name) is None:
        return
    for child in path.iterdir():
        if child.is_symlink() or not child.is_dir():
            continue
        with suppress(_Refused, *DAMAGED):
            if child.name.startswith(_STAGING) and _is_staging(child):
                discard(child, [*names, _STAGING_MARKER])
            elif child.name.startswith(_SET_ASIDE):     # what a killed ``_set_aside`` left
                for moved in child.iterdir():            # an entry: as any entry
                    with suppress(_Refused, *DAMAGED):
                        discard(moved, _metadata(moved)["files"])
                child.rmdir()
            else:                    # only the files its metadata lists
                discard(child, _metadata(child)["files"])
    with suppress(OSError):
        path.rmdir()


def discard(entry: Path, names) -> None:
    """Remove the files ``names`` and the metadata from ``entry`` (an empty folder in the place
    of one too), then the folder; OSError when it holds anything else (it then stays)."""
    for name in {*names, METADATA}:
        path = entry / name
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise
            os.rmdir(path)                  # OSError when it holds anything
    try:
        os.rmdir(entry)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise OSError(err.errno, "it holds files the cache did not write", str(entry)) from err
        raise


@functools.lru_cache(maxsize=1)
def private_folder() -> Path:
    """A 0700 folder for this process alone, removed when it exits: where libraries go that the
    cache cannot keep."""
    path = Path(tempfile.mkdtemp(prefix="sparsetir-"))
    os.chmod(path, 0o700)
    atexit.register(_remove_in, os.getpid(), path)
    return path


def _remove_in(process: int, path: Path) -> None:
    if os.getpid() == process:              # not in a forked child, which shares the folder
        shutil.rmtree(path, ignore_errors=True)


def _make_private(path: Path) -> None:
    """Make ``path`` and its missing parents, each 0700 whatever the umask."""
    if path.is_dir():
        return
    if path.parent != path:
        _make_private(path.parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return                      # a file, or made by someone else meanwhile: checked after
    os.chmod(path, 0o700)


def _check(path: Path, status: os.stat_result, is_kind, kind: str) -> None:
    if not is_kind(status.st_mode):
        raise OSError(errno.ENOTDIR if kind == "folder" else errno.EISDIR,
                      f"not a {kind}", str(path))
    user = os.geteuid()
    if status.st_uid != user:
        raise _Refused(f"the {kind} {path} belongs to uid {status.st_uid}, not to you (uid "
                       f"{user}); point SPARSETIR_CACHE at a folder of your own")
    if status.st_mode & 0o022:
        raise _Refused(f"the {kind} {path} can be written by group or others (mode "
                       f"{stat.S_IMODE(status.st_mode):o}); chmod go-w it, or point "
                       "SPARSETIR_CACHE at a folder of your own")


def _is_staging(folder: Path) -> bool:
    """Whether ``folder`` is a staging folder this cache made (a process killed mid-write
    leaves one): it holds the marker, a file of the current user."""
    _check(folder, os.lstat(folder), stat.S_ISDIR, "folder")
    return _own_bytes(folder / _STAGING_MARKER, 0) == b""


def _metadata(entry: Path) -> dict:
    """The entry's metadata when the cache wrote it for this very folder (raises otherwise):
    the format, the entry's name and a size and SHA-256 for every file."""
    _check(entry, os.lstat(entry), stat.S_ISDIR, "folder")     # a link to a folder is not one
    metadata = json.loads(_own_bytes(entry / METADATA))
    files = metadata["files"]
    if metadata["format"] != _FORMAT or metadata["key"] != entry.name or \
            not isinstance(files, dict) or not files or not all(map(_plain, files)) or \
            not all(isinstance(kept, dict) and kept.keys() == {"size", "sha256"}
                    for kept in files.values()):
        raise SparseTIRValueError(f"{entry / METADATA} is not this entry's metadata")
    return metadata


def _own_bytes(path: Path, size: int | None = None) -> bytes:
    """The contents of a regular file (not a link, a FIFO or a device: opened without
    blocking, checked before reading) of the current user that no one else can write, when it
    has ``size`` bytes (if given); OSError or _Refused otherwise."""
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as file:
        status = os.fstat(file.fileno())
        _check(path, status, stat.S_ISREG, "file")
        if size is not None and status.st_size != size:
            raise SparseTIRValueError(f"{path} has {status.st_size} bytes, not the {size} recorded")
        return file.read()


def _synced_bytes(path: Path) -> bytes:
    with open(path, "rb") as file:
        os.fsync(file.fileno())
        return file.read()


def _write_private(path: Path, text: str, durable: bool = True) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(descriptor, "w") as file:
        os.fchmod(descriptor, 0o600)
        file.write(text)
        file.flush()
        if durable:
            os.fsync(descriptor)


def _sync_folder(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def record(data: bytes) -> dict:
    """The size and SHA-256 of ``data``, as metadata records them."""
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _plain(name) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..", METADATA) and "/" not in name


def _place(staging: Path, entry: Path, records: dict, replace: bool) -> bool:
    """Rename ``staging`` to ``entry``; False when another process's intact entry is there
    (unless ``replace``) or placed meanwhile."""
    if _renamed(staging, entry):
        return True
    if not replace and read_entry(entry) is not None:
        return False
    if not _set_aside(entry, records, keep_intact=not replace):
        return False                       # another process placed an entry meanwhile
    return _renamed(staging, entry)


def _set_aside(entry: Path, names, keep_intact: bool = False) -> bool:
    """Take whatever is at ``entry`` out of the way of a new entry: a link is removed; anything
    else (an entry, damaged or not, a file) is renamed into a new folder beside it, where
    :func:`discard` removes the files ``names``, the metadata and the entry's folder, then that
    folder. What the cache did not write stays there, in ``.set-aside-*``. OSError when it
    cannot be moved (nothing is then changed). ``keep_intact``: an intact entry found once
    moved (another process placed it after the caller looked, and may be reading it) goes
    back, and the result is False (True: the place is free).

    Example
    -------
    >>> import tempfile
    >>> entry = Path(tempfile.mkdtemp()) / "0123abcd"
    >>> (entry / "kernel.so").mkdir(parents=True)            # a folder where a file belongs
    >>> (entry / "kernel.so" / "notes.txt").write_text("mine")
    4
    >>> _set_aside(entry, ["kernel.so"])
    True
    >>> entry.exists(), [p.name for p in entry.parent.glob(".set-aside-*/0123abcd/kernel.so/*")]
    (False, ['notes.txt'])
    """
    if entry.is_symlink():
        os.unlink(entry)
        return True
    aside = Path(tempfile.mkdtemp(prefix=_SET_ASIDE, dir=entry.parent))
    moved = aside / entry.name
    try:
        os.rename(entry, moved)
    except FileNotFoundError:              # another process set it aside meanwhile
        pass
    except OSError:
        os.rmdir(aside)
        raise
    free = not (keep_intact and moved.is_dir() and read_entry(moved) is not None)
    if not free:
        with suppress(OSError):            # unless yet another entry took the place
            os.rename(moved, entry)
    with suppress(OSError):                # what the cache did not write stays
        discard(moved, names)
    with suppress(OSError):
        os.rmdir(aside)
    return free


def _renamed(staging: Path, entry: Path) -> bool:
    try:
        os.rename(staging, entry)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            return False                    # a non-empty folder, or something else, is there
        raise
    return True


def _warn(message: str) -> None:
    warnings.warn(f"{message}. What is compiled now is kept for this process only.",
                  CacheWarning, stacklevel=3)
