"""The set-up of a process started as one command (``forensics.cli.process_setup``)."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import process_setup as ps

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, command, expected", [
    (["/venv/bin/forensics", "postmortem", "x"], "postmortem", True),
    (["/repo/forensics/__main__.py", "postmortem"], "postmortem", True),
    (["/venv/bin/forensics", "ingest", "x"], "postmortem", False),
    (["/venv/bin/pytest", "postmortem"], "postmortem", False),
    (["/venv/bin/forensics"], "postmortem", False),
    ([], "postmortem", False),
])
def test_started_as(monkeypatch, argv, command, expected):
    monkeypatch.setattr(sys, "argv", argv)
    assert ps.started_as(command) is expected


def test_one_blas_thread_keeps_the_users_setting(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    ps.one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3"
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    ps.one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"


def test_one_blas_thread_too_late_changes_nothing(monkeypatch):
    import numpy  # noqa: F401  (already imported: the pool exists, the variable would lie)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    ps.one_blas_thread()
    assert "OPENBLAS_NUM_THREADS" not in os.environ


_POOL = """
import sys
sys.argv = ["forensics", {command!r}, "x.log"]
import forensics.cli.ingest
import pyarrow as pa
print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize("command, env, expected", [
    ("ingest", None, "system"),
    ("ingest", "jemalloc", "jemalloc"),       # the user's choice is kept
    ("summary", None, "mimalloc"),            # another command: pyarrow's default
])
def test_ingest_uses_the_system_arrow_pool(command, env, expected):
    run_env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env is not None:
        run_env["ARROW_DEFAULT_MEMORY_POOL"] = env
    out = subprocess.run([sys.executable, "-c", _POOL.format(command=command)], env=run_env,
                         capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split()[-1] == expected


_POSTMORTEM_POOL = """
import sys, types
sys.argv = ["forensics", "postmortem", {sample!r}, "-o", {out!r}, "-q"]
def postmortem(*args, **kwargs):   # stands in for the pipeline: the pool is chosen by now
    import pyarrow as pa
    print(pa.default_memory_pool().backend_name)
    sys.exit(0)
sys.modules["forensics.pipeline"] = types.SimpleNamespace(postmortem=postmortem)
from forensics.cli import main
main()
"""


@pytest.mark.parametrize("env, expected", [(None, "system"), ("jemalloc", "jemalloc")])
def test_postmortem_uses_the_system_arrow_pool(tmp_path, env, expected):
    """The post-mortem's ingest and replay take Arrow's buffers from malloc, as an ingest does
    (the user's choice kept)."""
    run_env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env is not None:
        run_env["ARROW_DEFAULT_MEMORY_POOL"] = env
    code = _POSTMORTEM_POOL.format(sample=str(REPO / "traces" / "samples" / "healthy"),
                                   out=str(tmp_path / "r"))
    out = subprocess.run([sys.executable, "-c", code], env=run_env, capture_output=True,
                         text=True, check=True, cwd=REPO)
    assert out.stdout.split()[-1] == expected


def test_system_arrow_pool_too_late_changes_nothing(monkeypatch):
    import pyarrow  # noqa: F401  (already imported: its pool may exist, the variable would lie)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    ps.system_arrow_pool()
    assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ


_PROBE = """
import gc, sys
from forensics.cli.process_setup import imports_without_gc
assert gc.isenabled()
with imports_without_gc():
    inside = gc.isenabled()
    made = [[] for _ in range(10)]
print(inside, gc.isenabled(), gc.get_freeze_count() > 0)
gc.disable()
with imports_without_gc():
    pass
print(gc.isenabled())
"""


def test_imports_without_gc_freezes_and_restores():
    # In a fresh interpreter: gc.freeze is process-wide, not for the test process.
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), check=True).stdout.split()
    assert out == ["False", "True", "True", "False"]


def test_postmortem_in_process_leaves_the_collector_alone(tmp_path):
    """A program or test invoking the command is not set up (its process is not the command)."""
    from click.testing import CliRunner

    from forensics.cli import cli
    before = gc.get_freeze_count()
    sample = REPO / "traces" / "samples" / "healthy"
    r = CliRunner().invoke(cli, ["postmortem", str(sample), "-o", str(tmp_path / "r"), "-q"])
    assert r.exit_code == 0, r.output
    # nothing frozen here (the suite froze what its collection made: some of it may be freed
    # meanwhile, so the count may only go down)
    assert gc.isenabled() and gc.get_freeze_count() <= before
