"""Fixtures of the report tests; the hand-made scenario is worked in ``report_scenarios``.

The post-mortems every test only reads (``crash_report``, ``nvbug_report``) are written once per
session; a test that changes a report or its inputs makes its own."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_scenarios import CRASH_FRAMES, SAMPLES, SHARED, crash_log, write_trace

from forensics.pipeline import PostmortemResult, postmortem


def write_crash_inputs(d: Path) -> list[Path]:
    """The crash trace and rank 0's log, in the new directory ``d``."""
    d.mkdir()
    write_trace(d / "trace.jsonl", CRASH_FRAMES)
    (d / "rank0.log").write_text(crash_log(0))
    return [d / "rank0.log", d / "trace.jsonl"]


@pytest.fixture
def crash_inputs(tmp_path) -> list[Path]:
    """The crash trace and rank 0's log."""
    return write_crash_inputs(tmp_path / "in")


@pytest.fixture(scope="session")
def crash_report(tmp_path_factory) -> PostmortemResult:
    """The post-mortem of ``crash_inputs`` with the default options, in ``OUT/report``."""
    d = tmp_path_factory.mktemp("crash")
    return postmortem(write_crash_inputs(d / "in"), d / "report")


@pytest.fixture(scope="session")
def nvbug_report(tmp_path_factory) -> PostmortemResult:
    """The post-mortem of the bundled NVBug 6438685 sample with the default options."""
    sample = SAMPLES / "nvbug-6438685"
    if not sample.is_dir():
        pytest.skip("bundled sample nvbug-6438685 is absent")
    return postmortem([sample], tmp_path_factory.mktemp("nvbug") / "report")


@pytest.fixture
def shared_logs() -> Path:
    p = SHARED / "samples" / "real-logs"
    if not p.is_dir():
        pytest.skip("../shared/samples/real-logs is absent")
    return p
