"""Golden files: text a test generates (lowered IR, CUDA source), kept in the tree and compared whole.

A test asks for the ``golden`` fixture (``tests/conftest.py``) and hands it the text; the fixture
compares it with ``<test folder>/golden/<test module>/<test name>.txt`` and fails with a unified
diff when they differ. ``pytest --update-golden`` writes the files instead: run it after a change
that alters generated text, then read the diff of the golden files before committing them.

Example
-------
>>> def test_csrmm_lowers(golden):                                  # doctest: +SKIP
...     golden(sparsetir.lower_sparse_iter(csrmm).script())
>>> def test_source_per_arch(golden, arch):                         # doctest: +SKIP
...     golden(source(arch), variant="sm_80-and-sm_90")     # one file shared by parameters
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

UPDATE_OPTION = "--update-golden"


def file_stem(name: str) -> str:
    """``name`` (a test id such as ``test_x[csrmm-sm_80]``) as a plain file name stem.

    >>> file_stem("test_x[csrmm-sm_80]")
    'test_x-csrmm-sm_80'
    """
    return re.sub(r"[^\w.-]+", "-", name).strip("-")


class Golden:
    """Compare (or, when ``update``, write) the golden files of one test.

    ``folder`` holds the test module's files; ``test`` is the test's id (parameters included),
    ``function`` the test function's name. ``golden(text)`` uses ``<test>.txt``;
    ``golden(text, variant="v")`` uses ``<function>-v.txt``, for tests that check several texts
    or parameters that must give one text.
    """

    def __init__(self, folder: Path, test: str, function: str, update: bool):
        self.folder, self.test, self.function, self.update = folder, test, function, update
        self._used: set = set()

    def path(self, variant: str | None = None) -> Path:
        """The golden file of this test (of ``variant`` of it, if given)."""
        name = self.test if variant is None else f"{self.function}-{variant}"
        return self.folder / f"{file_stem(name)}.txt"

    def __call__(self, text: str, variant: str | None = None) -> None:
        if not isinstance(text, str):
            raise TypeError(f"golden() compares text, got {type(text).__name__}")
        path = self.path(variant)
        if path in self._used:
            raise ValueError(f"{path.name} was already compared in this test: pass a variant")
        self._used.add(path)
        text = text if text.endswith("\n") else text + "\n"
        if self.update:
            _write(path, text)
            return
        if not path.exists():
            pytest.fail(f"no golden file {path}: run pytest {UPDATE_OPTION} to write it, then "
                        "read it before committing", pytrace=False)
        expected = path.read_text()
        if expected != text:
            diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                                str(path), "generated"))
            pytest.fail(f"the generated text differs from {path} (pytest {UPDATE_OPTION} "
                        f"rewrites it):\n{diff}", pytrace=False)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole (parallel workers writing one file never mix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
