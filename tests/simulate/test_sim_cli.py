"""``forensics simulate`` on the command line."""
import json

import pytest
from click.testing import CliRunner

from forensics.cli import cli
from forensics.simulate import SCENARIOS


def test_help_lists_every_scenario_with_one_line():
    out = CliRunner().invoke(cli, ["simulate", "--help"]).output
    for name in SCENARIOS:
        assert sum(line.strip().startswith(name + " ") for line in out.splitlines()) == 1, name


def test_a_run_writes_the_three_files_and_reports_the_crash(tmp_path):
    r = CliRunner().invoke(cli, ["simulate", "--scenario", "nvbug-6438685", "--json", "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["verdict"] == "crash" and out["policy"] == "prefix-2026"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["executor.log", "stats.jsonl", "trace.expect.toml",
                                                            "trace.jsonl"]
    r = CliRunner().invoke(cli, ["simulate", "--scenario", "nvbug-6438685", "--policy", "fix-16161",
                                 "--iters", "50", "--log-format", "V2", "-o", str(tmp_path / "fix")])
    assert r.exit_code == 0 and "50 iterations, clean" in r.output
    assert "num_scheduled_requests: " in (tmp_path / "fix" / "executor.log").read_text()


@pytest.mark.parametrize("args, message", [
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--scenario", "healthy", "--ranks", "0"], "ranks must be at least 1"),
    (["--scenario", "healthy", "--cap", "0"], "must be at least 1, got 0"),
    (["--scenario", "healthy", "--policy", "prefix-2099"], "unknown policy 'prefix-2099'"),
    (["--scenario", "healthy", "--iters", "0"], "iters must be at least 1"),
    (["--scenario", "healthy", "--log-ranks", "zero"], "log ranks"),
])
def test_bad_parameters_exit_2_with_a_clear_message(tmp_path, args, message):
    r = CliRunner().invoke(cli, ["simulate", *args, "-o", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert message in r.output
    assert not (tmp_path / "out").exists()
