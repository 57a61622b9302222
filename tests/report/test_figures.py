"""Figures: produced, non-empty, labelled, and windowed on long runs."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.image import imread

from forensics.report import figures as F
from forensics.report.windows import choose_windows


def test_windows_hand_worked():
    """Run 0..999, radius 2, interesting 10 and 50 -> segments (8,12) and (48,52); 35 hidden
    iterations between them; x of 48 = 5 + GAP_COLUMNS(2) = 7."""
    w = choose_windows(np.arange(1000), [10, 50], radius=2)
    assert w.segments == ((8, 12), (48, 52)) and w.hidden == (35,)
    assert w.position([8, 12, 30, 48]).tolist()[:2] == [0.0, 4.0]
    assert np.isnan(w.position([30])[0]) and w.position([48])[0] == 7.0
    assert w.width == 12
    assert choose_windows(np.arange(50), [10]).segments == ((0, 49),)   # short: drawn whole
    assert choose_windows(np.arange(1000), [], radius=2).segments == ((995, 999),)
    # Touching windows merge.
    assert choose_windows(np.arange(1000), [10, 14], radius=2).segments == ((8, 16),)


def long_run(iters=20_000, ranks=8):
    """A long run with one skip at 15_000 (rank 2 zero batch, rank 5 padded) and a crash at
    15_001 on rank 5, which carries the leaked dummy."""
    it = np.repeat(np.arange(iters), ranks)
    rk = np.tile(np.arange(ranks), iters)
    d = pd.DataFrame({"iter": it, "rank": rk, "active": (it + rk) % 5 + 1, "expected": 6,
                      "padded": False, "batch": 1, "can_queue": True, "carried_dummy": False,
                      "crash": False})
    d.loc[d["iter"] == 15_000, "can_queue"] = False
    d.loc[(d["iter"] == 15_000) & (d["rank"] == 2), "batch"] = 0
    d.loc[(d["iter"] == 15_000) & (d["rank"] == 5), "padded"] = True
    d.loc[(d["iter"] == 15_001) & (d["rank"] == 5), ["carried_dummy", "crash"]] = True
    return d[d["iter"] <= 15_001]


def _png_ok(fig):
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes and fig._suptitle is not None and fig._suptitle.get_text()
    data = F.to_png(fig)
    img = imread(io.BytesIO(data))
    assert len(data) > 10_000 and img.shape[0] > 300 and img.shape[1] > 600
    # Not blank: many distinct colours.
    assert len(np.unique(img.reshape(-1, img.shape[-1])[:, :3].round(2), axis=0)) > 10
    return axes


def test_active_figure_is_windowed():
    d = long_run()
    leaks = F.leaks_frame([{"rank": 5, "iter_created": 15_000, "iter_skipped": 15_000,
                            "cause_ranks": [2]}])
    fig = F.active_vs_expected(d, leaks=leaks, crash={"iter": 15_001, "rank": 5, "active": 7},
                               cap=6, title="t")
    over, ax = _png_ok(fig)          # an overview of the whole run, then the zoom
    assert over.get_xlim() == (0.0, 15_001.0)
    lo, hi = ax.get_xlim()
    assert hi - lo < 100            # 15k iterations, drawn as a window around the story
    assert ax.get_xlabel() and ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("crash" in x for x in labels) and any("leak" in x for x in labels)
    assert any("cap = 6" in x for x in labels)


def test_strip_codes_priority():
    d = long_run()
    at = d[d["iter"].isin([15_000, 15_001])].reset_index(drop=True)
    codes = F.strip_codes(at)
    names = [F.STRIP_CATEGORIES[c][0] for c in codes]
    row = {(i, r): n for i, r, n in zip(at["iter"], at["rank"], names)}
    assert row[(15_000, 2)].startswith("zero batch")
    assert row[(15_000, 5)].startswith("padded, then skipped")
    assert row[(15_000, 0)].startswith("skipped")
    assert row[(15_001, 5)] == "crash"
    assert row[(15_001, 0)] == "ran"
    idle = pd.DataFrame({"iter": [7, 7], "rank": [0, 1], "batch": [0, 0], "can_queue": [False, False]})
    assert [F.STRIP_CATEGORIES[c][0] for c in F.strip_codes(idle)] == ["idle (every rank at batch 0)"] * 2


def test_strip_and_states_figures():
    d = long_run()
    fig = F.decision_strip({"prefix-2026": d, "fix-16161": d.assign(can_queue=True)})
    axes = _png_ok(fig)
    assert len(axes) == 2 and all(ax.get_ylabel() == "rank" for ax in axes)
    req = pd.DataFrame({"rank": [0, 0, 1, 2], "state": [13, 14, 10, 14], "dummy": [False] * 4})
    fig = F.state_composition(req, iteration=15_001, leaked_dummies={2: 1}, expected=2, cap=2)
    (ax,) = _png_ok(fig)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "GENERATION_TO_COMPLETE" in labels and "ADP dummy leaked (replay)" in labels
    assert not any("(14)" in x or "(13)" in x for x in labels)   # names, not codes
    assert ax.get_ylim()[0] == 0


def test_state_iteration_and_crash_marker_hand_worked():
    """Decisions cover iterations 3..6. A crash at 3 is drawn at 3 (even after a leak); else the
    first leak (skipped at 4) at the iteration after its skip, 5; a leak skipped at the last
    iteration, 6, at 6 itself (there is no 7); no leak and no crash: the last iteration, 6;
    nothing replayed: None."""
    from types import SimpleNamespace as NS

    dec = pd.DataFrame({"iter": [3, 3, 4, 4, 5, 5, 6, 6], "rank": [0, 1] * 4})
    crash = NS(iter=3, rank=1, active=3)

    def leaks(*skipped):   # ReplayResult.leaks: the column state_iteration reads
        return pd.DataFrame({"iter_skipped": pd.array(skipped, dtype="int64")})

    assert F.state_iteration(dec, NS(crash=crash, leaks=leaks(4))) == 3
    assert F.state_iteration(dec, NS(crash=None, leaks=leaks(4))) == 5
    assert F.state_iteration(dec, NS(crash=None, leaks=leaks(6, 4))) == 5   # the first skip
    assert F.state_iteration(dec, NS(crash=None, leaks=leaks(6))) == 6
    assert F.state_iteration(dec, NS(crash=None, leaks=leaks())) == 6
    assert F.state_iteration(dec.iloc[:0], NS(crash=crash, leaks=leaks())) is None
    assert F.crash_marker(crash) == {"iter": 3, "rank": 1, "active": 3}
    assert F.crash_marker(None) is None


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_every_leaking_rank_labelled_and_sorted():
    """Leaks on ranks 7 (twice), 3 and 1 (causes: rank 0 and 4), the crash on rank 7: every one
    of those ranks is labelled, in rank order, with its count; the rest are one grey entry."""
    d = long_run(iters=300)
    d = d[d["iter"] < 300]
    leaks = F.leaks_frame([
        {"rank": 7, "iter_created": 40, "iter_skipped": 40, "cause_ranks": [0]},
        {"rank": 3, "iter_created": 40, "iter_skipped": 40, "cause_ranks": [0]},
        {"rank": 7, "iter_created": 90, "iter_skipped": 90, "cause_ranks": [4]},
        {"rank": 1, "iter_created": 90, "iter_skipped": 90, "cause_ranks": [4]}])
    fig = F.active_vs_expected(d, leaks=leaks, crash={"iter": 150, "rank": 7, "active": 7}, cap=6)
    labels = _legend(fig.axes[-1])
    ranks = [x for x in labels if x.startswith("rank")]
    assert ranks == ["rank 0 (zero batch)", "rank 1 (1 leak)", "rank 3 (1 leak)",
                     "rank 4 (zero batch)", "rank 7 (2 leaks, crash)", "ranks 2, 5-6 (no leak)"]


def test_ticks_are_round_and_counts_start_at_zero():
    from forensics.report.windows import IterWindows, round_step
    # Span 1000 with at most 5 ticks: 200 gives 6 ticks, 500 gives 3.
    assert [round_step(s) for s in (3, 10, 76, 240, 1000)] == [1, 5, 20, 50, 500]
    xs, labels = IterWindows(((0, 76),)).ticks()
    assert labels == ["0", "20", "40", "60"]
    xs, labels = IterWindows(((14_988, 15_012),)).ticks()
    assert all(int(x) % 5 == 0 for x in labels) and len(labels) <= 5
    d = long_run(iters=200)
    d = d.assign(active=d["active"] + 15)   # a busy clean run: 16..20 active
    fig = F.active_vs_expected(d.assign(can_queue=True), cap=24)
    for ax in fig.axes:
        assert ax.get_ylim()[0] == 0
    ax = fig.axes[-1]
    assert all(float(t.get_text()) % 10 == 0 for t in ax.get_xticklabels() if t.get_text())


def test_long_clean_run_shows_its_busiest_part_and_an_overview():
    """100k iterations without a skip: not the last 25 iterations, but the window around the
    peak load (iteration 61_234), with the whole run above it."""
    it = np.repeat(np.arange(100_000), 2)
    rk = np.tile(np.arange(2), 100_000)
    active = np.where(np.abs(it - 61_234) < 5, 9, 2)
    d = pd.DataFrame({"iter": it, "rank": rk, "active": active, "expected": 4, "batch": 1,
                      "can_queue": True})
    win = F.windows_for(d)
    assert any(a <= 61_234 <= b for a, b in win.segments)
    fig = F.active_vs_expected(d, cap=8)
    over, ax = fig.axes
    assert over.get_xlim() == (0.0, 99_999.0)
    assert all(60_000 < int(t.get_text()) < 63_000 for t in ax.get_xticklabels() if t.get_text())


def _srgb_to_linear(c):
    c = np.asarray(c, dtype=float)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def test_strip_palette_distinct_for_colour_blind_readers():
    """Every pair of strip classes differs clearly for normal vision and under simulated
    deuteranopia and protanopia (Machado et al. 2009, severity 1): "ran" vs "idle" and the two
    leak classes were near-identical before."""
    from matplotlib.colors import to_rgb
    cols = np.array([to_rgb(c) for _, c in F.STRIP_CATEGORIES])
    deut = np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                     [-0.011820, 0.042940, 0.968881]])
    prot = np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                     [-0.003882, -0.048116, 1.051998]])
    for m in (np.eye(3), deut, prot):
        sim = np.clip(_srgb_to_linear(cols) @ m.T, 0, 1)
        d = np.sqrt(((sim[:, None, :] - sim[None, :, :]) ** 2).sum(-1))
        np.fill_diagonal(d, np.inf)
        assert d.min() > 0.08, (m, d.min())
