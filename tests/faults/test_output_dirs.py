"""Output rules: an output is never an input, a foreign non-empty output needs --force, a rerun
leaves only what it wrote, and simulate / export-test do not silently replace files."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

import forensics
from forensics.cli import cli

REPO = Path(__file__).resolve().parents[2]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"
REGRESSION = REPO / "traces" / "samples" / "regressions" / "nvbug-6438685-min.jsonl"


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _copy_sample(tmp_path: Path) -> Path:
    x = tmp_path / "X"
    shutil.copytree(NVBUG, x)
    return x


def test_postmortem_into_a_subdirectory_of_its_input_never_reads_its_own_outputs(tmp_path):
    x = _copy_sample(tmp_path)
    first = _run("postmortem", x, "-o", x / "report")
    assert first.exit_code == 1, first.output
    stats = len(forensics.load(x / "report" / ".dataset").stats)
    again = _run("postmortem", x, "-o", x / "report")
    assert again.exit_code == 1, again.output
    ds = forensics.load(x / "report" / ".dataset")
    assert len(ds.stats) == stats
    assert all("report" not in i["name"] for i in ds.meta["inputs"])


def test_output_equal_to_the_input_is_refused_with_the_reason(tmp_path):
    x = _copy_sample(tmp_path)
    for cmd in ("postmortem", "ingest"):
        res = _run(cmd, x, "-o", x)
        assert res.exit_code == 2 and "the output is also an input" in res.output, res.output
    assert sorted(p.name for p in x.iterdir()) == sorted(p.name for p in NVBUG.iterdir())


def test_a_foreign_non_empty_directory_needs_force(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    res = _run("postmortem", NVBUG / "executor.log", "-o", out)
    assert res.exit_code == 2 and "holds no report of this tool" in res.output
    assert "--force" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    forced = _run("postmortem", NVBUG / "executor.log", "-o", out, "--force")
    assert forced.exit_code in (0, 1, 3), forced.output
    assert (out / "notes.txt").read_text() == "keep me" and (out / "report.md").is_file()


def test_a_rerun_leaves_only_what_this_run_wrote(tmp_path):
    out = tmp_path / "report"
    full = _run("postmortem", NVBUG, "-o", out)
    assert full.exit_code == 1, full.output
    figures = sorted(p.name for p in out.glob("*.svg"))
    assert len(figures) > 1
    logs_only = _run("postmortem", NVBUG / "executor.log", "-o", out)
    assert logs_only.exit_code in (0, 1, 3), logs_only.output
    manifest = json.loads((out / ".forensics-output.json").read_text())["files"]
    visible = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert visible == sorted(manifest)
    now = sorted(p.name for p in out.glob("*.svg"))
    assert len(now) < len(figures)              # the replay's figures of the first run are gone
    assert set(now) <= set(manifest)


def test_a_report_of_an_earlier_version_is_replaced(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "findings.json").write_text("{}")
    (out / "old-figure.png").write_bytes(b"png")
    (out / "notes.txt").write_text("not ours")
    res = _run("postmortem", NVBUG / "executor.log", "-o", out)
    assert res.exit_code in (0, 1, 3), res.output
    assert not (out / "old-figure.png").exists() and (out / "notes.txt").exists()


def test_simulate_does_not_silently_replace_files(tmp_path):
    args = ["simulate", "--scenario", "nvbug-6438685", "--iters", "30", "-o", tmp_path]
    assert _run(*args).exit_code == 0
    log = tmp_path / "executor.log"
    log.write_text("precious\n")
    res = _run(*args)
    assert res.exit_code == 2 and "refusing to replace" in res.output and "--force" in res.output
    assert log.read_text() == "precious\n"
    assert _run(*args, "--force").exit_code == 0 and log.read_text() != "precious\n"
    assert not list(tmp_path.glob(".*tmp*"))


def test_export_test_does_not_silently_replace_a_file(tmp_path):
    out = tmp_path / "test_x.py"
    out.write_text("# mine\n")
    res = _run("export-test", REGRESSION, "-o", out)
    assert res.exit_code == 2 and "refusing to replace" in res.output
    assert out.read_text() == "# mine\n"
    assert _run("export-test", REGRESSION, "-o", out, "--force").exit_code == 0
    assert "def test_" in out.read_text()
