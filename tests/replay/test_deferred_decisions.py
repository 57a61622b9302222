"""An in-memory replay builds its decisions DataFrame on first use (``DeferredTable``), and
what it builds is the table the streamed replay writes and reads back."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forensics.readers import as_dataset
from replay.frame_windows import FrameWindows
from replay.frames import RunFrames
from replay.streaming import replay_windows
from replay.walk import run_all
from replay.table_storage import DeferredTable

SAMPLE = Path(__file__).resolve().parents[2] / "traces" / "samples" / "nvbug-6438685"


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    if not (SAMPLE / "trace.jsonl").is_file():
        pytest.skip("bundled sample absent")
    return as_dataset([SAMPLE], cache_dir=tmp_path_factory.mktemp("ds") / "ds", quiet=True)


def test_decisions_built_on_first_use_equal_the_streamed_ones(ds, tmp_path):
    whole = run_all(RunFrames.from_dataset(ds), ["prefix-2026", "newest"])
    streamed = replay_windows(FrameWindows(ds, size=16), ["prefix-2026", "newest"], tmp_path)
    for name, r in whole.items():
        assert isinstance(r._tables["decisions"], DeferredTable), name
        # a filtered read builds the table too, and keeps it
        crash_iter = r.crash.iter if r.crash else int(r.frames.iters[-1])
        part = r.read_decisions([("iter", "==", crash_iter)], columns=["iter", "rank", "crash"])
        assert isinstance(r._tables["decisions"], pd.DataFrame)
        assert list(part["iter"].unique()) == [crash_iter] and len(part) == r.config.tp_size
        pd.testing.assert_frame_equal(r.decisions, streamed[name].decisions, check_exact=True)
        assert r.skipped_iters == streamed[name].skipped_iters
        # the skips are the iterations whose can_queue is False, read from the table
        dec = r.decisions
        skipped = dec.loc[dec["can_queue"].eq(False).fillna(False), "iter"].unique()
        assert r.skipped_iters == tuple(int(x) for x in skipped), name


def test_with_changes_keeps_a_deferred_table_deferred(ds):
    r = run_all(RunFrames.from_dataset(ds), ["prefix-2026"])["prefix-2026"]
    copy = r.with_changes(notes=("changed",))
    assert isinstance(copy._tables["decisions"], DeferredTable)
    pd.testing.assert_frame_equal(copy.decisions, r.decisions, check_exact=True)
