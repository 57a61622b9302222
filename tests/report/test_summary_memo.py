"""``summarize`` reuses the summary of the dataset write it made last (the ingest's, asked for
again by the post-mortem), and only of that write."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.dataset.store import Dataset
from forensics.dataset.summary import summarize
from forensics.readers import ingest

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


@pytest.fixture
def logs():
    a, b = SAMPLES / "nvbug-6438685" / "executor.log", SAMPLES / "healthy"
    if not (a.is_file() and b.is_dir()):
        pytest.skip("bundled samples absent")
    return a, b


def test_the_ingests_summary_is_the_one_asked_for_again(logs, tmp_path):
    report = ingest([logs[0]], tmp_path / "ds", quiet=True)
    again = summarize(Dataset(tmp_path / "ds"))
    assert again is report.summary
    assert summarize(tmp_path / "ds") is report.summary


def test_a_rewritten_dataset_is_summarised_anew(logs, tmp_path):
    first = ingest([logs[0]], tmp_path / "ds", quiet=True).summary
    other = ingest([logs[1]], tmp_path / "other", quiet=True).summary
    assert other is not first
    # the same path rewritten from other inputs, straight after: a new summary of the new data
    second = ingest([logs[1]], tmp_path / "ds", quiet=True).summary
    assert second is not first
    fresh = summarize(Dataset(tmp_path / "ds"))
    assert fresh.inputs == other.inputs != first.inputs
    assert fresh.rows == other.rows and fresh.events_by_kind == other.events_by_kind


def test_an_ingest_asked_for_no_summary_leaves_it_to_the_caller(logs, tmp_path):
    """``as_dataset`` and the post-mortem ingest with ``summary=False`` (the post-mortem reads
    the summary on a thread beside the replay): none is made, the first ``summarize`` reads it."""
    report = ingest([logs[0]], tmp_path / "ds", quiet=True, summary=False)
    assert report.summary is None
    made = summarize(tmp_path / "ds")
    assert made.rows["iterations"] == report.rows["iterations"] > 0
    assert summarize(Dataset(tmp_path / "ds")) is made
