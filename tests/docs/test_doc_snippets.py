"""Every Python block in README.md and docs/*.md runs, so the docs cannot drift from the code.

The blocks of one page run in order in one namespace (a page is one session, as a reader types
it). An HTML comment on the line before the opening fence changes that: ``<!-- not run: why -->``
skips the block (SparseTIR-side code, a GPU), ``<!-- raises: ErrorName -->`` requires the block
to raise that exception, and ``<!-- printed by the block above -->`` makes the block a listing
that must be what the block before it printed (a line ending in ``# trimmed`` stands for any
line starting with its text before ``{...}``); ``pytest --update-golden`` rewrites such
listings from what the blocks print::

    <!-- raises: ArgumentError -->
    ```python
    kernel(A.data, X, Y, A.indptr.astype(np.int64), A.indices, m, n, A.nnz)
    ```
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from golden_text import UPDATE_OPTION

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.S)


_MARK = re.compile(r"<!-- (?P<kind>not run|raises|printed by the block above):? *(?P<what>[^>]*?)"
                   r" *-->")
TRIMMED = "  # trimmed"


def python_blocks(text: str) -> list:
    """``(line, code, mark)`` for every fenced ``python`` block of a Markdown page; ``mark`` is
    None, ``("not run", why)``, ``("raises", error name)`` or ``("printed by the block above",
    "")``."""
    blocks = []
    for match in _BLOCK.finditer("\n" + text):
        line = text.count("\n", 0, match.start("code") - 1) + 1
        mark = _MARK.fullmatch(match.group("before").strip())
        blocks.append((line, match.group("code"), mark and (mark["kind"], mark["what"])))
    return blocks


def listing_matches(listing: str, printed: str) -> bool:
    """Whether a listing shows what was printed, line by line (trimmed lines by their start)."""
    shown, lines = listing.splitlines(), printed.rstrip("\n").splitlines()
    return len(shown) == len(lines) and all(
        want == got or (want.endswith(TRIMMED) and got.startswith(want.split("{...}")[0]))
        for want, got in zip(shown, lines))


def updated_listing(listing: str, printed: str) -> str:
    """What was printed, with the lines the listing trimmed trimmed again."""
    starts = [line.split("{...}")[0] for line in listing.splitlines() if line.endswith(TRIMMED)]
    lines = printed.rstrip("\n").splitlines()
    for i, line in enumerate(lines):
        start = next((s for s in starts if line.startswith(s)), None)
        if start is not None:
            lines[i] = start + "{...})" + TRIMMED
    return "\n".join(lines)


def test_listings_compare_trimmed_lines_by_their_start():
    printed = "x = 1\nT.func_attr({'a': 1})\n"
    listing = "x = 1\nT.func_attr({...})  # trimmed"
    assert listing_matches(listing, printed) and not listing_matches("x = 2\n" + listing, printed)
    assert updated_listing(listing, printed.replace("1})", "2})")) == listing


def test_python_blocks_are_found():
    page = ("intro\n<!-- not run: gpu -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
            "<!-- raises: KeyError -->\n```python\n{}[0]\n```\n")
    assert python_blocks(page) == [(4, "x = 1", ("not run", "gpu")), (8, "y = 2", None),
                                   (12, "{}[0]", ("raises", "KeyError"))]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p.read_text())],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_runs(page, tmp_path, monkeypatch, request):
    monkeypatch.chdir(ROOT)            # where a reader runs them (examples/ is on a relative path)
    namespace = {"__name__": f"doc:{page.name}"}
    text = page.read_text()
    printed, updates = "", []
    for line, code, mark in python_blocks(text):
        kind = mark[0] if mark else None
        where = f"{page.relative_to(ROOT)} block at line {line}"
        if kind == "printed by the block above":
            if request.config.getoption(UPDATE_OPTION):
                updates.append((code, updated_listing(code, printed)))
            else:
                assert listing_matches(code, printed), (
                    f"{where} is not what the block above prints (pytest {UPDATE_OPTION} "
                    f"rewrites it); printed:\n{printed}")
            continue
        if kind == "not run":
            continue
        # a real file, so TVMScript's parser can read the source of the functions it defines
        source = tmp_path / f"{page.stem}_line{line}.py"
        source.write_text(code + "\n")
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output):
                exec(compile(code, str(source), "exec"), namespace)
        except Exception as err:      # noqa: BLE001 - report which block failed and why
            if type(err).__name__ != (mark[1] if kind == "raises" else None):
                pytest.fail(f"{where} fails: {type(err).__name__}: {err}")
        else:
            assert kind != "raises", f"{where} should raise {mark[1]}"
        printed = output.getvalue()
    for old, new in updates:
        text = text.replace(f"```python\n{old}\n```", f"```python\n{new}\n```", 1)
    if updates:
        page.write_text(text)
