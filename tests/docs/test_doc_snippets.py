"""Every Python block in README.md and docs/*.md runs, so the docs cannot drift from the code.

The blocks of one page run in order in one namespace (a page is one session, as a reader types
it). An HTML comment on the line before the opening fence changes that: ``<!-- not run: why -->``
skips the block (a printed listing, SparseTIR-side code, a GPU), and ``<!-- raises: ErrorName -->``
requires the block to raise that exception::

    <!-- raises: ArgumentError -->
    ```python
    kernel(A.data, X, Y, A.indptr.astype(np.int64), A.indices, m, n, A.nnz)
    ```
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.S)


_MARK = re.compile(r"<!-- (?P<kind>not run|raises): *(?P<what>[^>]*?) *-->")


def python_blocks(text: str) -> list:
    """``(line, code, mark)`` for every fenced ``python`` block of a Markdown page; ``mark`` is
    None, ``("not run", why)`` or ``("raises", error name)``."""
    blocks = []
    for match in _BLOCK.finditer("\n" + text):
        line = text.count("\n", 0, match.start("code") - 1) + 1
        mark = _MARK.fullmatch(match.group("before").strip())
        blocks.append((line, match.group("code"), mark and (mark["kind"], mark["what"])))
    return blocks


def test_python_blocks_are_found():
    page = ("intro\n<!-- not run: gpu -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
            "<!-- raises: KeyError -->\n```python\n{}[0]\n```\n")
    assert python_blocks(page) == [(4, "x = 1", ("not run", "gpu")), (8, "y = 2", None),
                                   (12, "{}[0]", ("raises", "KeyError"))]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p.read_text())],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)            # where a reader runs them (examples/ is on a relative path)
    namespace = {"__name__": f"doc:{page.name}"}
    for line, code, mark in python_blocks(page.read_text()):
        if mark and mark[0] == "not run":
            continue
        expected = mark[1] if mark else None
        # a real file, so TVMScript's parser can read the source of the functions it defines
        source = tmp_path / f"{page.stem}_line{line}.py"
        source.write_text(code + "\n")
        where = f"{page.relative_to(ROOT)} block at line {line}"
        try:
            exec(compile(code, str(source), "exec"), namespace)
        except Exception as err:      # noqa: BLE001 - report which block failed and why
            if type(err).__name__ != expected:
                pytest.fail(f"{where} fails: {type(err).__name__}: {err}")
        else:
            assert expected is None, f"{where} should raise {expected}"
