"""The worked examples in docstrings (``>>>``) are true: each module's doctests run here.

Examples marked ``# doctest: +SKIP`` need files a reader has (``crash.ds``) and are not run.
"""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
    for pkg in ("forensics", "replay") for p in (REPO / pkg).rglob("*.py")
    if ">>>" in p.read_text(encoding="utf-8"))


def test_some_modules_have_examples():
    assert "replay.step" in MODULES and "forensics.report.summary" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
