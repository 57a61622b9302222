"""Fixtures of the report tests; the hand-made scenario is worked in ``report_scenarios``."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_scenarios import CRASH_FRAMES, SHARED, crash_log, write_trace


@pytest.fixture
def crash_inputs(tmp_path) -> list[Path]:
    """The crash trace and rank 0's log."""
    d = tmp_path / "in"
    d.mkdir()
    write_trace(d / "trace.jsonl", CRASH_FRAMES)
    (d / "rank0.log").write_text(crash_log(0))
    return [d / "rank0.log", d / "trace.jsonl"]


@pytest.fixture
def shared_logs() -> Path:
    p = SHARED / "samples" / "real-logs"
    if not p.is_dir():
        pytest.skip("../shared/samples/real-logs is absent")
    return p
