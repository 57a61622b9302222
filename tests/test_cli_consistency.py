"""One CLI: the same options, verdict words, output rules and hints on every command."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from forensics import __version__
from forensics.cli import cli
from forensics.readers import ingest

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "samples" / "nvbug-6438685"
TRACE = SAMPLE / "trace.jsonl"


def _commands():
    """(name, command) of every leaf command, ``record status`` style for subgroups."""
    for name, cmd in cli.commands.items():
        if isinstance(cmd, click.Group):
            for sub, c in cmd.commands.items():
                yield f"{name} {sub}", c
        else:
            yield name, cmd


def _opts(cmd) -> set[str]:
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture(scope="module")
def trace_dataset(tmp_path_factory) -> Path:
    """The NVBug sample's trace ingested once (``summary`` reads it)."""
    ds = tmp_path_factory.mktemp("consistency") / "ds"
    ingest([TRACE], ds)
    return ds


def test_every_command_has_json_and_quiet():
    for name, cmd in _commands():
        opts = _opts(cmd)
        assert "-q" in opts and "--quiet" in opts, name
        assert "--json" in opts, name


def test_run_wherever_a_dataset_may_hold_several_runs():
    cmds = dict(_commands())
    for name in ("postmortem", "export-test", "fleet", "replay", "minimize", "bisect"):
        assert "--run" in _opts(cmds[name]), name


def test_version_short_and_long(runner):
    for flag in ("-V", "--version"):
        res = runner.invoke(cli, [flag])
        assert res.exit_code == 0 and res.output.strip() == f"forensics, version {__version__}"


@pytest.fixture(scope="module")
def postmortem_json(tmp_path_factory) -> dict:
    """``forensics postmortem SAMPLE --json``'s object, run once for the tests that read it."""
    res = CliRunner().invoke(cli, ["postmortem", str(SAMPLE), "-o",
                                   str(tmp_path_factory.mktemp("pm") / "r"), "--json"])
    assert res.exit_code == 1, res.output
    return json.loads(res.stdout)


def test_log_format_choices_default_and_example_agree(runner):
    res = runner.invoke(cli, ["simulate", "--help"])
    assert "[V1|V2|V3|V4|V5]" in res.output and "[default: V4]" in res.output
    assert "--log-format V3" in res.output
    res = runner.invoke(cli, ["simulate", "--help"])
    assert "[v1|" not in res.output


def test_log_format_accepts_any_case(runner, tmp_path):
    res = runner.invoke(cli, ["simulate", "--scenario", "nvbug-6438685", "--iters", "5",
                              "--log-format", "v3", "-o", str(tmp_path / "s"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["files"]


@pytest.mark.parametrize("args,code", [
    (["replay", str(TRACE)], 1),
    (["summary", "{ds}"], 0),
    (["postmortem", str(SAMPLE), "-o", "{tmp}/r"], 1),
    (["ingest", str(TRACE), "-o", "{tmp}/ds2"], 0),
    (["export-test", str(TRACE), "-o", "{tmp}/test_x.py", "--no-minimize", "--policy", "fix-16161",
      "--force"], 0),
    (["fleet", str(TRACE), "--policy", "fix-16161"], 0),
    (["simulate", "--scenario", "nvbug-6438685", "--iters", "5", "-o", "{tmp}/sim", "--force"], 0),
    (["record", "status"], 0),
])
def test_quiet_silences_stdout_and_json_is_one_object(runner, tmp_path, trace_dataset, args, code):
    args = [a.format(tmp=tmp_path, ds=trace_dataset) for a in args]
    loud = runner.invoke(cli, args)
    assert loud.exit_code == code, loud.output
    assert loud.stdout.strip()
    quiet = runner.invoke(cli, [*args, "-q"])
    assert quiet.exit_code == code, quiet.output
    assert quiet.stdout == ""
    as_json = runner.invoke(cli, [*args, "--json"])
    assert as_json.exit_code == code, as_json.output
    assert isinstance(json.loads(as_json.stdout), dict)


def test_the_same_verdict_words_everywhere(runner, tmp_path, postmortem_json):
    words = {"clean", "leak", "crash"}
    res = runner.invoke(cli, ["replay", str(TRACE), "--policy", "fix-16161", "--policy",
                              "prefix-2026", "--policy", "legacy-2025"])
    assert "fix-16161: clean" in res.stdout and "prefix-2026: crash" in res.stdout
    assert "legacy-2025: leak " in res.stdout
    assert ": ok " not in res.stdout and "leaks " not in res.stdout.split("\n")[0]
    res = runner.invoke(cli, ["export-test", str(TRACE), "-o", str(tmp_path / "test_t.py"),
                              "--no-minimize", "--json"])
    assert {e["verdict"] for e in json.loads(res.stdout)["expectations"]} == words
    assert {v["verdict"] for v in postmortem_json["verdicts"].values()} == words
    res = runner.invoke(cli, ["simulate", "--scenario", "nvbug-6438685", "-o",
                              str(tmp_path / "s"), "--json"])
    assert json.loads(res.stdout)["verdict"] == "crash"


def test_no_wrapping_off_a_terminal(runner, tmp_path):
    deep = tmp_path / ("a-rather-long-directory-name-" * 4) / "report"
    res = runner.invoke(cli, ["postmortem", str(SAMPLE), "-o", str(deep)])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert all(line == line.rstrip() for line in lines)
    assert any(str(deep / "report.html") in line for line in lines)
    assert max(len(line) for line in lines) > 200   # sentences are not cut at 80 columns
    assert res.stderr == ""                          # no progress bar off a terminal


def test_postmortem_run_selects_and_names_the_runs(runner, tmp_path):
    res = runner.invoke(cli, ["postmortem", str(SAMPLE), "-o", str(tmp_path / "r"), "--run", "nope"])
    assert res.exit_code == 2
    assert "no traced run 'nope'" in res.output and "sim-nvbug-6438685-prefix-2026-3" in res.output
    res = runner.invoke(cli, ["postmortem", str(SAMPLE), "-o", str(tmp_path / "r"), "--run",
                              "sim-nvbug-6438685-prefix-2026-3", "--json"])
    assert json.loads(res.stdout)["run"] == "sim-nvbug-6438685-prefix-2026-3"


def test_fleet_shows_paths_when_run_ids_repeat(runner, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy(TRACE, d / "trace.jsonl")
    res = runner.invoke(cli, ["fleet", str(a / "trace.jsonl"), str(b / "trace.jsonl"),
                              "--policy", "fix-16161"])
    assert res.exit_code == 0, res.output
    assert "input" in res.stdout.splitlines()[2]
    assert str(a / "trace.jsonl") in res.stdout and str(b / "trace.jsonl") in res.stdout
    res = runner.invoke(cli, ["fleet", str(a / "trace.jsonl"), "--policy", "fix-16161",
                              "--run", "other"])
    assert res.exit_code == 2 and "sim-nvbug-6438685-prefix-2026-3" in res.output


def test_export_test_run_option(runner, tmp_path):
    res = runner.invoke(cli, ["export-test", str(TRACE), "-o", str(tmp_path / "test_r.py"),
                              "--no-minimize", "--run", "sim-nvbug-6438685-prefix-2026-3",
                              "--policy", "fix-16161"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["export-test", str(TRACE), "-o", str(tmp_path / "test_r.py"),
                              "--run", "nope"])
    assert res.exit_code == 2 and "nope" in res.output


def test_hints_fit_the_error(runner, tmp_path):
    res = runner.invoke(cli, ["ingest", str(tmp_path / "nonexistent"), "-o", str(tmp_path / "d")])
    assert res.exit_code == 2
    assert "check the path" in res.output and "recognised names end in" not in res.output
    plain = tmp_path / "not-git"
    plain.mkdir()
    res = runner.invoke(cli, ["bisect", str(TRACE), "--repo", str(plain), "--good", "a", "--bad", "b"])
    assert res.exit_code == 2
    assert "not a git checkout" in res.output and "unknown git revision" not in res.output
    chatter = tmp_path / "chatter.log"
    chatter.write_text("hello\nnothing here\n")
    res = runner.invoke(cli, ["postmortem", str(chatter), "-o", str(tmp_path / "r")])
    assert res.exit_code == 2
    lines = res.stdout.splitlines()
    todo = lines[lines.index("What to do:") + 1:]
    step = next(line for line in todo if str(chatter) in line)
    assert step.startswith("  - ") and "named above" not in step


def test_progress_totals_are_real(tmp_path):
    from forensics.pipeline import postmortem
    from forensics.simulate import simulate
    seen = []
    simulate("nvbug-6438685", out_dir=tmp_path / "s", iters=20, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (1, 20) and seen[-1] == (20, 20)
    counts = []
    postmortem([TRACE], tmp_path / "r", policies=["fix-16161", "prefix-2026"],
               counts=lambda phase, d, t: counts.append((phase, d, t)))
    # 77 iterations replayed under each of 2 policies, reported as windows complete.
    assert counts[-1] == ("replay", 154, 154)
    assert all(t == 154 for _, _, t in counts) and [d for _, d, _ in counts] == \
        sorted(d for _, d, _ in counts)



def test_postmortem_json_tells_the_fatal_leak_first(postmortem_json):
    """`replay --json` keeps the issue-#3 shape (leaks in ledger order); the chain in the
    report's order is in `postmortem --json`: the fatal leak (rank 2, padded at 75) first."""
    f = postmortem_json
    assert f["chain"]["lines"][0].startswith("iter 75: rank 0 held")
    assert "AssertionError" in f["chain"]["lines"][0]
    assert f["chain"]["mechanisms"][0]["leaks"][0] == {"rank": 2, "iter_created": 75,
                                                       "iter_skipped": 75, "cause_ranks": [0]}
