"""The error contract: a fault of the environment is a message with the path and a hint, exit 2,
no traceback (``--debug`` / ``FORENSICS_DEBUG=1`` shows it), for every command that writes."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import cli

REPO = Path(__file__).resolve().parents[2]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"
REGRESSION = REPO / "traces" / "samples" / "regressions" / "nvbug-6438685-min.jsonl"


def writer_commands(out: Path) -> dict[str, list[str]]:
    """Every command that writes, with ``out`` as its output."""
    return {
        "ingest": ["ingest", str(NVBUG / "executor.log"), "-o", str(out)],
        "simulate": ["simulate", "--scenario", "nvbug-6438685", "--iters", "40", "-o", str(out)],
        "minimize": ["minimize", str(REGRESSION), "--policy", "prefix-2026", "-o",
                     str(out / "min.jsonl")],
        "export-test": ["export-test", str(REGRESSION), "-o", str(out / "test_x.py")],
        "postmortem": ["postmortem", str(NVBUG / "executor.log"), "-o", str(out)],
    }


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text, text
    assert "Aborted!" not in text, text


@pytest.mark.parametrize("command", list(writer_commands(Path("x"))))
def test_output_under_a_regular_file_is_exit_2_with_path_and_hint(tmp_path, command):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    args = writer_commands(blocker / "out")[command]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (res.output, res.exception)
    _no_traceback(res.output)
    assert str(blocker) in res.output
    assert "hint:" in res.output


@pytest.mark.parametrize("command", list(writer_commands(Path("x"))))
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_write_faults_are_exit_2(tmp_path, monkeypatch, command, code):
    """The disk fills (or turns read-only, or refuses) at the moment outputs are put in place."""
    real_replace, real_rename = os.replace, os.rename

    def failing(src, dst, *a, **k):
        raise OSError(code, os.strerror(code), str(dst))

    monkeypatch.setattr(os, "replace", failing)
    monkeypatch.setattr(os, "rename", failing)
    import forensics.dataset.writer as writer
    if hasattr(writer, "exchange"):
        monkeypatch.setattr(writer, "exchange", lambda a, b: failing(a, b))
    (tmp_path / "out").mkdir()
    res = CliRunner().invoke(cli, writer_commands(tmp_path / "out")[command])
    monkeypatch.setattr(os, "replace", real_replace)
    monkeypatch.setattr(os, "rename", real_rename)
    assert res.exit_code == 2, (res.output, res.exception)
    _no_traceback(res.output)
    assert os.strerror(code) in res.output
    assert "hint:" in res.output


def test_interrupt_is_exit_2(tmp_path, monkeypatch):
    import forensics.readers.files as ingest_mod

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_mod, "_write_file", interrupted)
    res = CliRunner().invoke(cli, ["ingest", str(NVBUG / "executor.log"), "-o", str(tmp_path / "d")])
    assert res.exit_code == 2
    assert "interrupted" in res.output
    assert not (tmp_path / "d").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _run(args: list[str], env_extra: dict | None = None, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_DEBUG", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True,
                          text=True, env=env, timeout=120, **kw)


def test_subprocess_fault_then_debug_shows_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    args = ["ingest", str(NVBUG / "executor.log"), "-o", str(blocker / "ds")]
    plain = _run(args)
    assert plain.returncode == 2, plain.stderr
    _no_traceback(plain.stderr)
    assert str(blocker) in plain.stderr and "hint:" in plain.stderr
    debug = _run(["--debug", *args])
    assert debug.returncode == 2 and "Traceback" in debug.stderr
    env = _run(args, {"FORENSICS_DEBUG": "1"})
    assert env.returncode == 2 and "Traceback" in env.stderr


def test_subprocess_read_only_file_system(tmp_path):
    """/sys is mounted read-only in containers; skip where it is writable."""
    target = Path("/sys/forensics-out")
    try:
        target.mkdir()
    except OSError:
        pass
    else:  # pragma: no cover - a writable /sys: nothing to test here
        target.rmdir()
        pytest.skip("/sys is writable here")
    res = _run(["postmortem", str(NVBUG / "executor.log"), "-o", str(target)])
    assert res.returncode == 2, res.stderr
    _no_traceback(res.stderr)
    assert str(target) in res.stderr and "hint:" in res.stderr


def test_subprocess_broken_pipe(tmp_path):
    """`forensics summary DS | head -c1`: the reader leaves; as `git log | head`, the command
    ends quietly (nothing on stderr) with the status of its work: the summary was made, 0."""
    ds = tmp_path / "ds"
    assert _run(["ingest", str(NVBUG), "-o", str(ds)]).returncode == 0
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "forensics", "summary", str(ds), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # nobody reads
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0, err
    assert err == ""


def test_a_bug_is_exit_4_with_its_traceback_never_1(tmp_path, monkeypatch):
    import forensics.readers.files as ingest_mod

    def bug(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(ingest_mod, "_write_file", bug)
    res = CliRunner().invoke(cli, ["ingest", str(NVBUG / "executor.log"), "-o", str(tmp_path / "d")])
    assert res.exit_code == 4
    assert "internal error" in res.output


def test_missing_git_is_a_policy_error_naming_git(monkeypatch, tmp_path):
    import subprocess as sp

    from replay import trtllm_checkout

    def no_git(*a, **k):
        raise FileNotFoundError(2, "No such file or directory", "git")

    monkeypatch.setattr(sp, "run", no_git)
    with pytest.raises(Exception, match="git is not installed") as err:  # the policy error
        trtllm_checkout.run_git(tmp_path, "rev-parse", "HEAD")
    assert getattr(err.value, "exit_code", None) == 2 and err.value.hint
