"""Start-up: ``forensics --help`` loads no command module, so none of the heavy libraries.

A behaviour test, not a timing test: which modules a fresh interpreter has imported after
``forensics --help``. ``benchmarks/startup.py`` measures the time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import COMMAND_MODULES, cli

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "pyarrow", "numpy", "polars", "msgspec")

_PROBE = """
import json, sys
from forensics.cli import main
sys.argv = ["forensics", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("MODULES", json.dumps(sorted(sys.modules)))
"""


def _modules_after(*args: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert "Usage:" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return set(json.loads(proc.stdout.rsplit("MODULES ", 1)[1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize("args", [["--help"], []])
def test_group_help_imports_no_heavy_library(args):
    mods = _modules_after(*args)
    assert _heavy(mods) == []
    assert not [m for m in mods if m.startswith("forensics.cli.")], "a command module was loaded"


def test_one_command_help_loads_only_that_command():
    mods = _modules_after("summary", "--help")
    assert "forensics.cli.summary" in mods
    assert not {f"forensics.cli.{m}" for m in COMMAND_MODULES if m != "summary"} & mods


def test_group_help_summaries_are_the_commands_own(monkeypatch):
    """The summaries read from the sources are what each imported command says of itself."""
    from click.testing import CliRunner
    from forensics.cli import _LazyCommands
    lazy = _LazyCommands(COMMAND_MODULES)
    assert sorted(lazy) == sorted(cli.commands) and len(lazy) == len(COMMAND_MODULES)
    for name in sorted(lazy):
        from_source = lazy.short_help(name, 60)
        assert name not in lazy._loaded, f"{name}: its source did not give the summary"
        assert from_source == lazy[name].get_short_help_str(60), name
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in lazy:
        assert f"  {name}  " in out
    assert CliRunner().invoke(cli, ["no-such-command"]).exit_code == 2
