"""A disk that fills while ``postmortem`` writes its report (issue #25 item 6): the previous
report stays whole (or there is none), never a report without ``findings.json``, and the rerun
needs no ``--force``."""
from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import cli
from forensics.output_dir import MANIFEST, STAGING_PREFIX

REPO = Path(__file__).resolve().parents[2]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"
REGRESSION = REPO / "traces" / "samples" / "regressions" / "nvbug-6438685-min.jsonl"


def _files(d: Path) -> dict[str, str]:
    """The report's files (the dataset cache aside) with their digests."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()
            if p.is_file()}


def test_a_write_failing_midway_leaves_the_old_report(tmp_path, monkeypatch):
    if not REGRESSION.is_file():
        pytest.skip("bundled samples absent")
    out = tmp_path / "report"
    args = ["postmortem", str(REGRESSION), "-o", str(out)]
    assert CliRunner().invoke(cli, args).exit_code in (1, 3)
    before = _files(out)
    assert {"findings.json", "report.md", "report.html", MANIFEST} <= set(before)

    real = Path.write_bytes

    def full_at_findings(self, data):
        if self.name == "findings.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_at_findings)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2
    assert f"{out / 'findings.json'}: No space left on device" in res.output
    assert STAGING_PREFIX not in res.output
    assert _files(out) == before                      # the old report, untouched
    assert not [p for p in out.iterdir() if p.name.startswith(STAGING_PREFIX)]

    monkeypatch.setattr(Path, "write_bytes", real)
    assert CliRunner().invoke(cli, args).exit_code in (1, 3)   # no --force needed
    assert set(_files(out)) == set(before)


def test_a_first_report_failing_midway_leaves_none_and_the_rerun_works(tmp_path, monkeypatch):
    if not REGRESSION.is_file():
        pytest.skip("bundled samples absent")
    out = tmp_path / "report"
    real = Path.write_bytes

    def full_at_html(self, data):
        if self.name == "report.html":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_at_html)
    args = ["postmortem", str(REGRESSION), "-o", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 2
    assert not [p.name for p in out.iterdir() if not p.name.startswith(".")]  # no report files
    monkeypatch.setattr(Path, "write_bytes", real)
    assert CliRunner().invoke(cli, args).exit_code in (1, 3)
    assert (out / "findings.json").is_file()


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_real_full_file_system(small_tmpfs):
    """The rerun reuses the dataset cache and fills the disk writing the report."""
    if not NVBUG.is_dir():
        pytest.skip("bundled samples absent")
    out = small_tmpfs / "report"
    cmd = [sys.executable, "-m", "forensics", "postmortem", str(NVBUG), "-o", str(out), "-q"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    assert subprocess.run(cmd, env=env, timeout=300).returncode in (1, 3)
    before = _files(out)
    free = os.statvfs(small_tmpfs)
    filler = small_tmpfs / "filler"
    filler.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - 64 * 1024))
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
    assert _files(out) == before
    filler.unlink()
    assert subprocess.run(cmd, env=env, timeout=300).returncode in (1, 3)
    assert set(_files(out)) == set(before)
