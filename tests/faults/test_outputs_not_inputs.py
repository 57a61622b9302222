"""What goes in is what the user meant: a directory walk leaves out this tool's own outputs (a
report or a dataset directory, wherever ``-o`` put it); JSON is read as stats only when its first
object carries an IterationStats key (otherwise refused by a walk with the reason, kept verbatim
when named); an unreadable subdirectory is reported and skipped like an unreadable file."""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import cli
from forensics.readers import ingest
from forensics.readers.kinds import detect_kind
from forensics.output_dir import MANIFEST, ReportDir
from forensics.report.summary import VERBATIM_NOTE, render_text
from unprivileged import run_as_nobody, skip_reason, world_readable_tmp

LINE = ("[TRT-LLM] [RANK {r}] [I] iter = {i}, global_rank = {r}, rank = {r}, "
        "currank_total_requests = 1/1, host_step_time = 1.0ms, prev_device_step_time = 1.0ms, "
        "timestamp = 2026-01-01 00:00:00, num_scheduled_requests: 1, states = "
        "{{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 1}}\n")
STATS = '{"iter": 1, "attentionDpRank": 0, "numActiveRequests": 2}\n'


def _inputs(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "rank0.log").write_text(LINE.format(r=0, i=1) + LINE.format(r=0, i=2))
    (d / "stats.jsonl").write_text(STATS)
    return d


def test_a_report_inside_the_inputs_is_not_read_by_the_next_postmortem(tmp_path):
    d = _inputs(tmp_path / "in")
    first = forensics.postmortem([d], d / "report")
    second = forensics.postmortem([d], d / "report2")
    third = forensics.postmortem([d], d / "deeper" / "report3")
    names = [str(d / "rank0.log"), str(d / "stats.jsonl")]
    for r in (first, second, third):
        assert [i[0] for i in r.summary.inputs] == names
        assert r.summary.rows["stats"] == 1          # no all-null row from findings.json
    meta = json.loads((d / "deeper" / "report3" / ".dataset" / "_meta.json").read_text())
    assert str(d / "report") + os.sep in meta["skipped"]


def test_a_report_directory_is_marked_as_soon_as_it_is_opened(tmp_path):
    ReportDir(tmp_path / "r").open()
    assert json.loads((tmp_path / "r" / MANIFEST).read_text()) == {"files": []}


def test_a_dataset_anywhere_below_is_skipped_and_a_report_named_is_refused(tmp_path):
    d = _inputs(tmp_path / "in")
    ingest([d / "rank0.log"], d / "a" / "b" / "copy.ds")
    forensics.postmortem([d / "rank0.log"], tmp_path / "rep")
    report = ingest([d, tmp_path / "rep"], tmp_path / "ds")
    assert [f.name for f in report.inputs] == [str(d / "rank0.log"), str(d / "stats.jsonl")]
    assert [(r.name, r.reason) for r in report.refused] == [
        (str(tmp_path / "rep"), "is a report of this tool, not raw input")]


def test_json_without_iteration_stats_keys_is_not_stats():
    assert detect_kind('{"foo": 1}\n') == "json"
    assert detect_kind('[{"tool": "adp-forensics postmortem", "exit_status": 1}]') == "json"
    assert detect_kind('{"iterLatencyMS": 3.5}\n') == "stats"
    assert detect_kind('[\n  {\n    "iter": 1,') == "stats"       # object cut by the head


def test_json_named_explicitly_is_kept_verbatim_and_summary_says_so(tmp_path):
    p = tmp_path / "notstats.json"
    p.write_text('{"foo":1}\n{"bar": [2]}')
    report = ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.stats) == 0 and not report.refused
    assert ds.unparsed["text"].tolist() == ['{"foo":1}', '{"bar": [2]}']
    assert ds.unparsed["line"].tolist() == [1, 2]
    assert [(f.name, f.kind) for f in report.inputs] == [(str(p), "json")]
    text = render_text(report.summary)
    assert f"{p}  json   10 B  {VERBATIM_NOTE}" not in text     # size is 23 B
    assert any(line.strip().startswith(str(p)) and line.endswith(VERBATIM_NOTE)
               for line in text.splitlines())


def test_json_found_by_a_walk_is_refused_with_the_reason(tmp_path):
    d = _inputs(tmp_path / "in")
    (d / "config.json").write_text('{"model": "x", "tp": 8}\n')
    res = CliRunner().invoke(cli, ["ingest", str(d), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2
    assert "config.json: JSON whose first object has no IterationStats key" in res.output
    assert len(forensics.load(tmp_path / "ds").stats) == 1


def test_a_subdirectory_whose_entries_cannot_be_stat_ed_is_reported_and_skipped(tmp_path,
                                                                                monkeypatch):
    """What a directory without search permission does: stat of anything in it fails."""
    d = _inputs(tmp_path / "in")
    (d / "sub").mkdir()
    (d / "sub" / "rank1.log").write_text(LINE.format(r=1, i=1))
    real_stat, real_scandir = os.stat, os.scandir
    sub = str(d / "sub")

    def denied(path):
        if os.fspath(path).startswith(sub):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    def stat(path, *a, **k):
        denied(path)
        return real_stat(path, *a, **k)

    def scandir(path="."):
        denied(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "scandir", scandir)
    report = ingest([d], tmp_path / "ds")
    assert [(r.name, r.reason) for r in report.refused] == [
        (sub, "cannot list directory: Permission denied")]
    assert report.rows["iterations"] == 2


def test_an_unreadable_subdirectory_as_an_unprivileged_user(tmp_path):
    why = skip_reason()
    if why:
        pytest.skip(why)
    root = world_readable_tmp("forensics-walk-")
    try:
        d = _inputs(root / "in")
        for mode, name in ((0o700, "private"), (0o711, "unlistable")):
            (d / name).mkdir()
            (d / name / "rank1.log").write_text(LINE.format(r=1, i=1))
            os.chmod(d / name, mode)
        os.chmod(d, 0o755)
        repo = Path(forensics.__file__).resolve().parents[1]
        res = run_as_nobody(["-m", "forensics", "ingest", "in", "-o", str(root / "ds")],
                            env={"HOME": "/nonexistent", "PYTHONPATH": str(repo)}, cwd=root)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "in/private: cannot list directory: Permission denied" in res.stderr
        assert "in/unlistable: cannot list directory: Permission denied" in res.stderr
        assert "Traceback" not in res.stderr
        shutil.chown(root / "ds", "root")
        ds = forensics.load(root / "ds")
        assert ds.iterations["iter"].tolist() == [1, 2]
    finally:
        shutil.rmtree(root, ignore_errors=True)
