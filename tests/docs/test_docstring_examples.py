"""Every ``>>>`` example in sparsetir's docstrings runs and prints what it shows.

One test per module of ``python/sparsetir``: its examples run as :mod:`doctest` runs them (the
examples of one docstring share a namespace, the module's globals visible), with ``...``
standing for any text (``ELLIPSIS``) and runs of whitespace compared as one space. A docstring
shows exceptions as Python prints them (``Traceback (most recent call last):``, then ``...``,
then the exception's class and message). An example that cannot run here (it needs a GPU)
says so with ``# doctest: +SKIP``.
"""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil

import pytest

import sparsetir

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_with_examples() -> list:
    """The names of the package's modules that hold at least one example, sorted."""
    names = ["sparsetir"] + [info.name for info in pkgutil.walk_packages(
        sparsetir.__path__, prefix="sparsetir.")]
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in sorted(names):
        module = importlib.import_module(name)
        if any(test.examples for test in finder.find(module, name)):
            found.append(name)
    return found


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # examples that write files write them here
    monkeypatch.setenv("TVM_NUM_THREADS", os.environ.get("TVM_NUM_THREADS", "2"))
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = []
    for test in finder.find(importlib.import_module(name), name):
        result = runner.run(test, out=report.append)
        assert result.attempted or not test.examples
    failed = runner.summarize(verbose=False).failed
    assert not failed, "".join(report)


def test_a_wrong_example_fails():
    """The runner this file uses does catch an example that prints something else."""
    parser = doctest.DocTestParser()
    test = parser.get_doctest(">>> 1 + 1\n3\n", {}, "wrong", "wrong.py", 0)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    assert runner.run(test, out=lambda _: None).failed == 1
