"""``forensics.investigate``: one load, DataFrames per policy and combined, figures, HTML summary."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

import forensics
import replay
from forensics.errors import DatasetError, ForensicsError
from replay.results import DECISION_COLUMNS, LEDGER_COLUMNS

REPO = Path(__file__).resolve().parents[1]
NVBUG = REPO / "traces" / "samples" / "nvbug-6438685"
POLS = ["prefix-2026", "fix-16161"]


@pytest.fixture(scope="module")
def inv():
    return forensics.investigate(NVBUG, policies=POLS)


def test_tables_and_replays_load_once(inv):
    assert inv.run == "sim-nvbug-6438685-prefix-2026-3"
    assert len(inv.iterations) and len(inv.frames) and len(inv.requests)
    assert inv.result("prefix-2026") is inv.result("prefix-2026")  # replayed once, kept
    assert inv.dataset.iterations is inv.iterations  # the dataset's own frame, not a copy


def test_verdicts_match_the_sample_expectations(inv):
    # traces/samples/nvbug-6438685/trace.expect.toml: prefix-2026 asserts on rank 2 at iteration
    # 76 after a first leak at the skip of iteration 19; fix-16161 neither leaks nor crashes.
    v = inv.verdicts.set_index("policy")
    assert list(v.index) == POLS
    assert (v.loc["prefix-2026", "verdict"], v.loc["prefix-2026", "crash_iter"],
            v.loc["prefix-2026", "crash_rank"], v.loc["prefix-2026", "first_leak_iter"]) == ("crash", 76, 2, 19)
    assert bool(v.loc["prefix-2026", "reproduces_log_crash"]) and bool(v.loc["prefix-2026", "is_recording_build"])
    assert pd.isna(v.loc["prefix-2026", "divergence_iter"])
    assert (v.loc["fix-16161", "verdict"], v.loc["fix-16161", "leaks"]) == ("clean", 0)
    assert not bool(v.loc["fix-16161", "reproduces_log_crash"])


def test_decisions_and_ledger_per_policy_and_combined(inv):
    one = inv.decisions("prefix-2026")
    assert list(one.columns) == list(DECISION_COLUMNS)
    assert one["iter"].max() == 76  # rows stop at the crash
    both = inv.decisions()
    assert list(both.columns) == ["policy", *DECISION_COLUMNS]
    assert list(both["policy"].cat.categories) == POLS
    assert len(both) == len(one) + len(inv.decisions("fix-16161"))
    led = inv.ledger()
    assert list(led.columns) == ["policy", *LEDGER_COLUMNS]
    per = led.groupby("policy", observed=True)["leaked"].sum()
    assert per["fix-16161"] == 0 and per["prefix-2026"] == len(inv.result("prefix-2026").leaks)


def test_leaks_table(inv):
    lk = inv.leaks
    assert set(lk["policy"]) == {"prefix-2026"}
    first = lk.sort_values(["iter_skipped", "rank"]).iloc[0]
    assert first["iter_skipped"] == 19 and 0 in first["cause_ranks"]
    # The leak that kills: rank 2's dummy padded at 75, survived the skip of 75.
    assert ((lk["rank"] == 2) & (lk["iter_created"] == 75)).any()


def test_leaks_tables_share_their_columns(inv):
    """``inv.leaks`` is each policy's ``ReplayResult.leaks`` after a ``policy`` column: the same
    columns and dtypes, the same rows in the same order. The sample (trace.expect.toml): 22 leaks
    under prefix-2026, the crash on rank 2 at 76; the fatal leak is rank 2's dummy padded at 75
    (it survived the skip of 75), first in both tables."""
    res = inv.result("prefix-2026")
    assert list(inv.leaks.columns) == ["policy", *res.leaks.columns]
    mine = inv.leaks[inv.leaks["policy"] == "prefix-2026"].drop(columns="policy")
    pd.testing.assert_frame_equal(mine.reset_index(drop=True), pd.DataFrame(res.leaks))
    assert len(res.leaks) == len(res.leak_records) == 22
    assert (res.crash.iter, res.crash.rank) == (76, 2)
    fatal = res.leaks.iloc[0]
    assert (fatal["rank"], fatal["iter_created"], fatal["iter_skipped"], bool(fatal["fatal"])) == \
        (2, 75, 75, True)
    assert int(res.leaks["fatal"].sum()) == 1 and inv.leaks.iloc[0]["fatal"]
    assert res.leak_records[0] is res.fatal_leak and res.leak_records[0].dummy == fatal["dummy"]
    # A streamed replay (the investigation's) builds the same table as one in memory.
    whole = replay.run(inv.run_frames, policy="prefix-2026")
    assert res.stored and not whole.stored
    pd.testing.assert_frame_equal(whole.leaks, res.leaks)
    assert inv.result("fix-16161").leaks.empty


def test_explain_names_the_chain(inv):
    text = inv.explain()  # default: the recording build, which crashes
    assert "GENERATION_TO_COMPLETE" in text and "AssertionError" in text
    assert inv.explain("fix-16161") == "fix-16161: no leak, no crash."


def test_plots_are_the_report_figures(inv, monkeypatch):
    from forensics.report import figures as F
    calls = []
    for name in ("active_vs_expected", "decision_strip", "state_composition"):
        orig = getattr(F, name)
        monkeypatch.setattr(F, name, lambda *a, _o=orig, _n=name, **k: (calls.append(_n), _o(*a, **k))[1])
    figs = [inv.plot_active(), inv.plot_strip(), inv.plot_states()]
    assert calls == ["active_vs_expected", "decision_strip", "state_composition"]
    for fig in figs:
        assert isinstance(fig, Figure) and fig.axes
    assert "prefix-2026" in figs[0]._suptitle.get_text()
    assert "76" in figs[2]._suptitle.get_text()  # the crash iteration
    assert len(inv.plot_strip(["prefix-2026", "fix-16161"]).axes) == 2


def test_the_default_strip_compares_with_the_recommended_build(monkeypatch):
    """As the report: the recording build (prefix-2026, the story) beside fix-16279, the first
    build the report recommends (merged, clean on this run's path), not fix-16161, the first
    clean one in the catalogue, which never merged."""
    from forensics.report import figures as F
    seen = []
    orig = F.decision_strip
    monkeypatch.setattr(F, "decision_strip", lambda panels, **k: (seen.append(list(panels)),
                                                                  orig(panels, **k))[1])
    forensics.investigate(NVBUG, policies=["prefix-2026", "fix-16161", "fix-16279"]).plot_strip()
    assert seen == [["prefix-2026", "fix-16279"]]


def test_repr_html_is_self_contained(inv):
    h = inv._repr_html_()
    assert "prefix-2026" in h and "crash" in h and "iter 76, rank 2" in h
    assert not re.search(r"<(script|img|link|iframe)\b", h)
    assert not re.search(r"(src|href)\s*=", h)


def test_logs_only_input(tmp_path):
    inv = forensics.investigate(NVBUG / "executor.log")
    assert inv.run is None and len(inv.iterations)
    assert inv.verdicts.empty and inv.leaks.empty
    with pytest.raises(DatasetError, match="no request-state trace"):
        inv.decisions("prefix-2026")
    assert isinstance(inv.plot_strip(), Figure)  # from the iteration lines
    assert "No request-state trace" in inv._repr_html_()


def test_bad_inputs():
    with pytest.raises(ForensicsError):
        forensics.investigate(NVBUG, policies=["no-such-build"])
    with pytest.raises(ForensicsError):
        forensics.investigate(NVBUG / "missing.log")
    with pytest.raises(DatasetError, match="no traced run"):
        forensics.investigate(NVBUG, run="other")


def test_function_after_module_import_and_cache_reuse(tmp_path):
    import forensics.investigation as mod  # a module of another name: forensics.investigate stays the function

    assert forensics.investigate is mod.investigate
    files = [NVBUG / "trace.jsonl", NVBUG / "executor.log"]
    a = forensics.investigate(files, cache_dir=tmp_path / "ds", policies=["fix-16161"])
    stamp = (tmp_path / "ds" / "_meta.json").stat().st_mtime_ns
    b = mod.investigate(*files, cache_dir=tmp_path / "ds", policies=["fix-16161"])
    assert (tmp_path / "ds" / "_meta.json").stat().st_mtime_ns == stamp  # reused, not re-ingested
    assert a.run == b.run and len(a.iterations) == len(b.iterations) > 0
