"""The CLI contract everywhere (issue #25 item 6): ``--json`` errors, JSON values, the user's path
checked before the work, option values checked by click types, control characters escaped."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import cli
from forensics.cli.options import Output, cell, terminal_text
from forensics.errors import ConfigError, DatasetError
from forensics.what_if import grid_value

REPO = Path(__file__).resolve().parents[1]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"
REGRESSION = REPO / "traces" / "samples" / "regressions" / "nvbug-6438685-min.jsonl"
ESC_RUN = "evil\x1b]0;PWNED\x07run"


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_DEBUG", None)
    return env


def _forensics(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True,
                          text=True, timeout=120, env=_env())


# --------------------------------------------------------------------------- --json errors

def test_json_error_is_one_object_on_stdout_and_the_message_on_stderr(tmp_path):
    res = _forensics("summary", str(tmp_path / "nope"), "--json")
    assert res.returncode == 2
    assert json.loads(res.stdout) == {
        "error": "not a dataset (no _meta.json)", "path": str(tmp_path / "nope"),
        "hint": "create one with `forensics ingest INPUT... -o DATASET`", "exit_status": 2}
    assert res.stderr.startswith(f"Error: {tmp_path / 'nope'}: not a dataset")


def test_json_usage_error_is_an_object_too():
    res = CliRunner().invoke(cli, ["sweep", "--iters", "abc", "--json"])
    assert res.exit_code == 2
    obj = json.loads(res.stdout.strip().splitlines()[0])
    assert obj["exit_status"] == 2 and "'abc' is not a valid integer range" in obj["error"]
    assert obj["path"] is None and obj["hint"] is None


def test_without_json_nothing_goes_to_stdout_on_error(tmp_path):
    res = _forensics("summary", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stdout == ""


def test_ingest_json_values_are_json_and_refused_inputs_print_one_object(tmp_path):
    if not NVBUG.is_dir():
        pytest.skip("bundled samples absent")
    log = NVBUG / "executor.log"
    res = _forensics("ingest", str(log), str(tmp_path / "missing.log"), "-o",
                     str(tmp_path / "ds"), "--json")
    assert res.returncode == 2  # one input refused, the dataset still written
    obj = json.loads(res.stdout)  # exactly one object: no error object after it
    assert obj["inputs"] == [{"name": str(log), "size": log.stat().st_size,
                              "xxh3_128": obj["inputs"][0]["xxh3_128"], "kind": "log"}]
    assert obj["refused"] == [{"name": str(tmp_path / "missing.log"),
                               "reason": "no such file or directory"}]
    assert "InputFingerprint(" not in res.stdout


# --------------------------------------------------------------------------- the output path

def writers(out: Path) -> dict[str, list[str]]:
    return {
        "ingest": ["ingest", str(REGRESSION), "-o", str(out)],
        "postmortem": ["postmortem", str(REGRESSION), "-o", str(out)],
        "simulate": ["simulate", "--scenario", "nvbug-6438685", "--iters", "40", "-o", str(out)],
        "minimize": ["minimize", str(REGRESSION), "--policy", "prefix-2026", "-o", str(out)],
        "export-test": ["export-test", str(REGRESSION), "-o", str(out)],
        "sweep": ["sweep", "--iters", "5", "--seeds", "1", "-o", str(out)],
        "fleet": ["fleet", str(REGRESSION), "-o", str(out)],
    }


@pytest.mark.parametrize("command", list(writers(Path("x"))))
def test_output_below_a_regular_file_names_the_users_path_before_any_work(tmp_path, command):
    blocker = tmp_path / "file"
    blocker.write_text("x\n")
    out = blocker / "sub" / "out"
    res = CliRunner().invoke(cli, [*writers(out)[command], "--json"])
    assert res.exit_code == 2, res.output
    assert "File exists" not in res.output and "Traceback" not in res.output
    obj = json.loads(res.stdout.strip().splitlines()[0])
    assert obj["path"] == str(out)
    assert obj["error"] == f"{blocker} is a file, not a directory, so nothing can be written below it"


def test_unwritable_output_place_is_refused_before_the_ingest(tmp_path, monkeypatch):
    """The place refuses new files (a read-only file system): refused when the option is read,
    so the ingest itself never starts."""
    import forensics.cli.ingest as ingest_cli

    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / ".forensics-probe-x"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    monkeypatch.setattr(ingest_cli, "ingest", lambda *a, **k: pytest.fail("the ingest ran"))
    res = CliRunner().invoke(cli, ["ingest", str(REGRESSION), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2
    assert res.output == (f"Error: {tmp_path / 'ds'}: cannot be written (in {tmp_path}): "
                          "Read-only file system\nhint: the file system is read-only: write "
                          "the output to a writable place (-o)\n")
    assert ".forensics-probe" not in res.output


def test_a_place_that_takes_no_files_names_the_path_not_a_lock_file():
    res = CliRunner().invoke(cli, ["ingest", str(REGRESSION), "-o", "/proc/x"])
    assert res.exit_code == 2
    assert "/proc/x" in res.output and ".x.lock" not in res.output


def test_read_only_mount_refused_in_a_fraction_of_a_second(tmp_path):
    """Measured the way a user meets it: a read-only file system (a mount namespace)."""
    from replay.isolation import namespaces_available
    if not namespaces_available():
        pytest.skip("no unprivileged user namespaces (unshare) here")
    script = (f"mount -o remount,bind,ro {tmp_path} 2>/dev/null || mount --bind {tmp_path} "
              f"{tmp_path} && mount -o remount,bind,ro {tmp_path}; "
              f"exec {sys.executable} -m forensics ingest {REGRESSION} -o {tmp_path}/ds --json")
    res = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 2, res.stderr
    obj = json.loads(res.stdout)
    assert obj["path"] == f"{tmp_path}/ds" and "Read-only file system" in obj["error"]
    assert not (tmp_path / "ds").exists()


# --------------------------------------------------------------------------- sweep grids

@pytest.mark.parametrize("item, message", [
    ("ranks=abc", "grid field ranks takes integers, got 'abc'"),
    ("overlap=maybe", "grid field overlap takes true/false, got 'maybe'"),
    ("cap=x", "grid field cap takes integers or none, got 'x'"),
    ("nonsense=1", "'nonsense' is not a workload field a grid can vary"),
    ("ranks", "'ranks': expected FIELD=V1,V2,..."),
])
def test_grid_values_are_checked_by_the_option_type(item, message):
    res = CliRunner().invoke(cli, ["sweep", "--grid", item, "--iters", "5", "--seeds", "1"])
    assert res.exit_code == 2
    assert f"Invalid value for '--grid': {message}" in res.output
    assert "Traceback" not in res.output and "/tmp/" not in res.output


def test_a_grid_point_that_is_no_workload_is_refused_before_simulating():
    res = CliRunner().invoke(cli, ["sweep", "--grid", "ranks=2,0", "--iters", "5", "--seeds", "1"])
    assert res.exit_code == 2
    assert "grid point ranks=0: ranks must be at least 1, got 0" in res.output


def test_grid_value_types():
    assert grid_value("ranks", "8") == 8 and grid_value("ranks", 4.0) == 4
    assert grid_value("overlap", "no") is False and grid_value("overlap", True) is True
    assert grid_value("cap", "none") is None and grid_value("arrival_rate", "2") == 2.0
    assert grid_value("mode", "aggregated") == "aggregated"
    for name, value in (("ranks", True), ("ranks", "1.5"), ("overlap", 1), ("kv_latency", "3")):
        with pytest.raises(ConfigError):
            grid_value(name, value)


# --------------------------------------------------------------------------- terminal escapes

def test_terminal_text_escapes_controls_and_keeps_text():
    assert terminal_text("a\x1b]0;t\x07b\x9bc\x7f") == "a\\x1b]0;t\\x07b\\x9bc\\x7f"
    assert terminal_text("line\n\ttab é ✓") == "line\n\ttab é ✓"
    assert terminal_text("bad\udcffname") == "bad\\udcffname"
    assert cell("[red]x\x1b") == "\\[red]x\\x1b"


class _Tty:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return True


def test_output_on_a_terminal_escapes_strings():
    from rich.table import Table
    tty = _Tty()
    out = Output(stream=tty)
    out.print(f"run {ESC_RUN}")
    t = Table(title=cell(ESC_RUN))
    t.add_column("x")
    t.add_row(cell(ESC_RUN))
    out.print(t)
    out.echo(ESC_RUN)
    assert "]0;PWNED" in tty.text and "\x07" not in tty.text
    assert "\x1b]0" not in tty.text


@pytest.fixture(scope="module")
def evil_trace(tmp_path_factory) -> Path:
    if not REGRESSION.is_file():
        pytest.skip("bundled samples absent")
    lines = REGRESSION.read_text().splitlines()
    run = json.loads(lines[0])
    run["run_id"] = ESC_RUN
    path = tmp_path_factory.mktemp("evil") / "evil.jsonl"
    path.write_text(json.dumps(run) + "\n" + "\n".join(lines[1:]) + "\n")
    return path


@pytest.mark.parametrize("command", ["summary", "postmortem", "replay", "fleet"])
def test_a_run_id_with_escapes_never_reaches_the_terminal(tmp_path, evil_trace, command):
    ds = tmp_path / "ds"
    forensics.ingest([evil_trace], ds, quiet=True)
    args = {"summary": ["summary", str(ds)],
            "postmortem": ["postmortem", str(evil_trace), "-o", str(tmp_path / "rep")],
            "replay": ["replay", str(ds), "--policy", "prefix-2026"],
            "fleet": ["fleet", str(ds)]}[command]
    res = _forensics(*args)
    assert res.returncode in (0, 1, 3), res.stderr
    assert "\x1b" not in res.stdout + res.stderr and "\x07" not in res.stdout + res.stderr
    if command != "replay":  # replay's tables do not name the run
        assert "evil\\x1b]0;PWNED\\x07run" in res.stdout


def test_error_messages_escape_the_users_text(tmp_path):
    res = _forensics("summary", str(tmp_path / "bad\x1b[2Jname"))
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "bad\\x1b[2Jname" in res.stderr


# --------------------------------------------------------------------------- a racing reader

def test_a_dataset_replaced_while_read_is_a_precise_error(tmp_path):
    if not NVBUG.is_dir():
        pytest.skip("bundled samples absent")
    ds_path = tmp_path / "ds"
    forensics.ingest([NVBUG / "executor.log"], ds_path, quiet=True)
    ds = forensics.load(ds_path)
    forensics.ingest([REGRESSION], ds_path, quiet=True)   # another writer swaps in a new one
    with pytest.raises(DatasetError) as err:
        ds.arrow("iterations")
    assert str(err.value) == (
        f"{ds_path}: the dataset was replaced while this command read it (another command "
        "wrote it at the same time)\nhint: run the command again once the writer has "
        "finished, or read a copy of the dataset")
