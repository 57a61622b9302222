"""What each post-mortem figure shows, as plain arrays and labels, before any drawing.

Two renderers draw these views: ``figures`` (matplotlib Figures, for notebooks) and
``svg_figures`` (SVG text, for the report: no matplotlib import, a few hundred elements). Both
read the same windows, series, codes and labels from here, so they cannot disagree.

- :func:`active_view`: per-rank active requests, expected, the cap, leak and crash markers.
- :func:`strip_view`: the rank x iteration grid of :data:`STRIP_CATEGORIES` codes per panel.
- :func:`states_view`: stacked request-state counts per rank at one iteration.

Sizes are bounded by the windows (``forensics.report.windows``), not by the run: a line is one
series per rank and segment, the overview at most :data:`OVERVIEW_POINTS` points.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from forensics.report.windows import IterWindows, choose_windows
from replay.states import RequestState

#: Strip categories, in drawing priority (a cell takes the first that applies), with colours.
#: Colour-blind safe (Okabe-Ito hues, distinct in lightness too): the two "nothing happened"
#: classes are white and light grey, the skip dark grey, the crash black.
STRIP_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("ran", "#9ecae1"),
    ("padded (dummy added)", "#0072b2"),
    ("skipped (fleet can_queue False)", "#6e6e6e"),
    ("carrying a leaked dummy", "#f0e442"),
    ("padded, then skipped: dummy leaks", "#e69f00"),
    ("zero batch (forces the skip)", "#cc79a7"),
    ("crash", "#000000"),
    ("unknown (rank did not log)", "#ffffff"),
    ("idle (every rank at batch 0)", "#d4d4d4"),
)
#: Cause ranks (zero batch, no leak of their own) highlighted in the line figure besides every
#: rank that leaked or crashed, which are always labelled.
MAX_HIGHLIGHT = 8
#: Okabe-Ito colours for highlighted ranks, then line styles to tell more than eight apart.
HIGHLIGHT_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
                     "#f0e442", "#000000")
LINE_STYLES = ("-", "--", "-.", ":")
#: Colours of the request-state bars (colour-blind safe, repeated with hatches past 8).
STATE_COLOURS = ("#56b4e9", "#009e73", "#0072b2", "#cc79a7", "#999999", "#f0e442", "#d55e00",
                 "#000000")
#: Points drawn in the overview of a long run (iterations are binned down to this).
OVERVIEW_POINTS = 1500
#: Colours of the markers and reference lines.
CAP_COLOUR, LEAK_COLOUR, CRASH_COLOUR, GREY = "#d55e00", "#e69f00", "#d55e00", "#bfbfbf"
X_LABEL = "iteration (executor iter_counter)"
#: ``DataFrame.attrs`` key of a decisions table holding only some iterations of a long run: the
#: whole run's :func:`per_iteration_active` (a streamed replay's figures, ``figure_views``).
PER_ITERATION_ACTIVE = "per_iteration_active"


# --- choosing what to draw ------------------------------------------------------------------------

def _bool(series: pd.Series | None, default: bool = False) -> np.ndarray:
    if series is None:
        return np.zeros(0, dtype=bool)
    return series.astype("boolean").fillna(default).to_numpy(dtype=bool)


def _col(df: pd.DataFrame, name: str, default=np.nan) -> pd.Series:
    if name in df.columns:
        return df[name]
    return pd.Series(default, index=df.index)


def focus_iterations(decisions: pd.DataFrame, leaks: pd.DataFrame | None = None,
                     crash: Mapping | None = None) -> list[int]:
    """Interesting iterations, most important first: crash, leaks (skip and creation), skips."""
    out: list[int] = []
    if crash and crash.get("iter") is not None:
        out.append(int(crash["iter"]))
    if leaks is not None and len(leaks):
        by_skip = leaks.sort_values("iter_skipped")
        for skipped, created in zip(by_skip["iter_skipped"], by_skip["iter_created"]):
            out.extend([int(skipped), int(created)])
    if len(decisions) and "can_queue" in decisions.columns:
        cq = decisions["can_queue"].astype("boolean")
        skipped = decisions.loc[cq.eq(False).fillna(False), "iter"]
        out.extend(int(i) for i in pd.unique(skipped))
    return out


def per_iteration_active(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per iteration (sorted index), the busiest rank's and the fleet's active requests
    (columns ``max``, ``sum``): what the overview and the peak-load focus read. A decisions table
    of some iterations only carries the whole run's in ``attrs[PER_ITERATION_ACTIVE]``."""
    pre = decisions.attrs.get(PER_ITERATION_ACTIVE)
    if pre is not None:
        return pre
    if not len(decisions) or "active" not in decisions.columns:
        return pd.DataFrame({"max": pd.Series(dtype=float), "sum": pd.Series(dtype=float)})
    g = pd.to_numeric(decisions["active"], errors="coerce").groupby(decisions["iter"].to_numpy())
    return pd.DataFrame({"max": g.max(), "sum": g.sum()}).sort_index()


def _focus_with_peak(decisions: pd.DataFrame, leaks, crash) -> list[int]:
    """Focus iterations, with the peak-load iteration last: a clean run shows its busiest part."""
    focus = focus_iterations(decisions, leaks, crash)
    per = per_iteration_active(decisions)["sum"]
    if len(per):
        focus.append(int(per.idxmax()))
    return focus


def windows_for(decisions: pd.DataFrame, leaks: pd.DataFrame | None = None,
                crash: Mapping | None = None, **kwargs) -> IterWindows:
    """The windows a figure of these decisions draws: around the crash, the leaks and the skips,
    and the peak-load iteration (so a long clean run shows its busiest stretch, not its end)."""
    iters = decisions["iter"].to_numpy() if len(decisions) else np.zeros(0, dtype=np.int64)
    return choose_windows(iters, _focus_with_peak(decisions, leaks, crash), **kwargs)


def _interesting_ranks(decisions: pd.DataFrame, leaks: pd.DataFrame | None,
                       crash: Mapping | None) -> list[int]:
    """Ranks drawn in colour, sorted: every rank that leaked or crashed, then cause ranks while
    there is room (``MAX_HIGHLIGHT``); the three busiest when nothing happened."""
    must: set[int] = set()
    causes: list[int] = []
    if crash and crash.get("rank") is not None:
        must.add(int(crash["rank"]))
    if leaks is not None and len(leaks):
        must.update(int(r) for r in leaks["rank"])
        cols = leaks["cause_ranks"] if "cause_ranks" in leaks.columns else ()
        for c in cols:
            causes += [int(r) for r in (c if c is not None else ())]
    chosen = set(must)
    for r in causes:
        if len(chosen) >= max(MAX_HIGHLIGHT, len(must)):
            break
        chosen.add(r)
    if not chosen and len(decisions):
        top = decisions.groupby("rank")["active"].max().sort_values(ascending=False, kind="stable")
        chosen = {int(r) for r in top.index[:3]}
    return sorted(chosen)


def _rank_label(rank: int, leaks: pd.DataFrame | None, crash: Mapping | None) -> str:
    parts = []
    if leaks is not None and len(leaks):
        n = int((leaks["rank"] == rank).sum())
        if n:
            parts.append(f"{n} leak{'s' if n > 1 else ''}")
        elif any(rank in tuple(c if c is not None else ()) for c in leaks["cause_ranks"]):
            parts.append("zero batch")
    if crash and crash.get("rank") is not None and int(crash["rank"]) == rank:
        parts.append("crash")
    return f"rank {rank}" + (f" ({', '.join(parts)})" if parts else "")


def span_text(ranks: Sequence[int]) -> str:
    """``0-3, 5`` for sorted ranks."""
    out, start, prev = [], None, None
    for r in list(ranks) + [None]:
        if start is None:
            start = prev = r
        elif r is not None and r == prev + 1:
            prev = r
        else:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = r
    return ", ".join(out)


# --- the views ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Series:
    """One drawn line: x positions on the compressed axis and y values (floats)."""

    x: np.ndarray
    y: np.ndarray


@dataclasses.dataclass(frozen=True)
class RankLine:
    """A highlighted rank: its legend label, colour, line style and one series per segment
    (drawn as steps); no series when the rank has no row in the windows."""

    rank: int
    label: str
    colour: str
    style: str
    parts: tuple[Series, ...]


@dataclasses.dataclass(frozen=True)
class Marker:
    """Point markers with one legend label (``x`` on the compressed axis)."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    label: str


@dataclasses.dataclass(frozen=True)
class Overview:
    """The whole run, binned: the busiest rank per iteration (``x`` real iterations), the
    iteration span and the drawn segments to shade."""

    x: np.ndarray
    y: np.ndarray
    xlim: tuple[float, float]
    segments: tuple[tuple[int, int], ...]
    title: str = "whole run (shaded: the iterations drawn below)"


@dataclasses.dataclass(frozen=True)
class ActiveView:
    """Everything :func:`figures.active_vs_expected` and its SVG twin draw.

    Legend order: ``highlighted``, ``others_label``, expected, cap, leaks, crash.
    """

    title: str
    win: IterWindows
    overview: Optional[Overview]
    empty: bool
    grey: tuple[Series, ...] = ()
    highlighted: tuple[RankLine, ...] = ()
    others_label: Optional[str] = None
    expected: tuple[Series, ...] = ()
    cap: Optional[int] = None
    leaks: Optional[Marker] = None
    crash: Optional[Marker] = None
    y_label: str = "len(active_requests) at pad entry"

    @property
    def expected_label(self) -> str:
        return "expected_num_active_requests"

    @property
    def cap_label(self) -> str:
        return f"cap = {self.cap} (max_num_active_requests)"

    def y_max(self) -> float:
        """The largest value drawn (lines, markers, the cap), at least 1."""
        vals = [1.0] + [float(np.nanmax(s.y)) for s in self.grey + self.expected if len(s.y)]
        vals += [float(np.nanmax(s.y)) for h in self.highlighted for s in h.parts if len(s.y)]
        vals += [max(m.y) for m in (self.leaks, self.crash) if m is not None and m.y]
        if self.cap is not None:
            vals.append(float(self.cap))
        return max(v for v in vals if not np.isnan(v))


def _overview(decisions: pd.DataFrame, win: IterWindows) -> Optional[Overview]:
    if not len(decisions):
        return None
    per = per_iteration_active(decisions)["max"]
    if len(per) > OVERVIEW_POINTS:
        bins = np.linspace(per.index.min(), per.index.max() + 1, OVERVIEW_POINTS + 1)
        per = per.groupby(pd.cut(per.index, bins, right=False, labels=bins[:-1]),
                          observed=True).max()
        per.index = per.index.astype(float)
    return Overview(per.index.to_numpy(dtype=float), per.to_numpy(dtype=float),
                    (float(decisions["iter"].min()), float(decisions["iter"].max())),
                    win.segments)


def active_view(decisions: pd.DataFrame, *, leaks: pd.DataFrame | None = None,
                crash: Mapping | None = None, cap: int | None = None,
                title: str = "Active requests per rank", radius: int | None = None) -> ActiveView:
    """What the active-requests figure draws (arguments: :func:`figures.active_vs_expected`).

    The overview is there when the windows leave out part of the run.
    """
    kw = {"radius": radius} if radius is not None else {}
    win = windows_for(decisions, leaks, crash, **kw)
    lo_it = int(decisions["iter"].min()) if len(decisions) else 0
    hi_it = int(decisions["iter"].max()) if len(decisions) else 0
    zoomed = bool(win.segments) and (len(win.segments) > 1 or win.segments[0] != (lo_it, hi_it))
    over = _overview(decisions, win) if zoomed else None
    if not len(decisions):
        return ActiveView(title, win, over, empty=True, cap=cap)
    # One sort by (rank, iter), then plain arrays: a series per run of equal (rank, segment).
    it_all = decisions["iter"].to_numpy()
    x_all = win.position(it_all)
    inside = ~np.isnan(x_all)
    rank = decisions["rank"].to_numpy()[inside].astype(np.int64)
    it = it_all[inside].astype(np.int64)
    order = np.lexsort((it, rank))
    rank, it, x = rank[order], it[order], x_all[inside][order]
    active = pd.to_numeric(decisions["active"], errors="coerce").to_numpy(dtype=float)[inside][order]
    seg = np.searchsorted([s[0] for s in win.segments], it, side="right")
    cuts = np.flatnonzero((np.diff(rank) != 0) | (np.diff(seg) != 0)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(rank)]
    series_of: dict[int, list[Series]] = {}
    for a, b in zip(starts, ends) if len(rank) else ():
        series_of.setdefault(int(rank[a]), []).append(Series(x[a:b], active[a:b]))
    highlight = _interesting_ranks(decisions, leaks, crash)
    grey = [s for r in sorted(series_of) if r not in highlight for s in series_of[r]]
    lines = []
    for i, r in enumerate(highlight):
        lines.append(RankLine(r, _rank_label(r, leaks, crash),
                              HIGHLIGHT_COLOURS[i % len(HIGHLIGHT_COLOURS)],
                              LINE_STYLES[(i // len(HIGHLIGHT_COLOURS)) % len(LINE_STYLES)],
                              tuple(series_of.get(r, ()))))
    others = sorted(set(series_of) - set(highlight))
    others_label = (f"rank{'s' if len(others) > 1 else ''} {span_text(others)} (no leak)"
                    if others else None)
    expected: tuple[Series, ...] = ()
    if "expected" in decisions.columns:
        # the fleet's largest expected per drawn iteration, one series per segment
        exp = pd.to_numeric(decisions["expected"], errors="coerce").to_numpy(dtype=float)
        per = pd.Series(exp[inside][order]).groupby(x).max()
        xs, ys = per.index.to_numpy(dtype=float), per.to_numpy(dtype=float)
        seg_x = np.searchsorted(np.asarray(win.offsets, dtype=float), xs, side="right")
        cut = np.flatnonzero(np.diff(seg_x) != 0) + 1
        expected = tuple(Series(a, b) for a, b in zip(np.split(xs, cut), np.split(ys, cut)))
    leak_marker = None
    if leaks is not None and len(leaks):
        at = {(int(i), int(r)): v for i, r, v in zip(it, rank, active)}
        xs_l, ys_l = [], []
        for skipped, r in zip(leaks["iter_skipped"], leaks["rank"]):
            key = (int(skipped), int(r))
            if key in at:
                xs_l.append(float(win.position([key[0]])[0]))
                ys_l.append(float(at[key]))
        if xs_l:
            leak_marker = Marker(tuple(xs_l), tuple(ys_l), "dummy leaks (fleet skipped)")
    crash_mark = None
    if crash and crash.get("iter") is not None:
        x = win.position([int(crash["iter"])])[0]
        if not np.isnan(x):
            hit = np.flatnonzero((it == int(crash["iter"])) & (rank == int(crash.get("rank", -1))))
            y = float(active[hit[0]]) if len(hit) else float(crash.get("active") or 0)
            crash_mark = Marker((float(x),), (y,),
                                f"crash (rank {crash.get('rank')}, iter {crash['iter']})")
    return ActiveView(title, win, over, empty=False, grey=tuple(grey), highlighted=tuple(lines),
                      others_label=others_label, expected=expected, cap=cap, leaks=leak_marker,
                      crash=crash_mark)


def strip_codes(decisions: pd.DataFrame) -> np.ndarray:
    """Category index (into :data:`STRIP_CATEGORIES`) of each decisions row.

    Rows need ``batch`` and ``can_queue``; ``padded``, ``carried_dummy`` and ``crash`` are
    optional. A null ``batch`` means the rank did not log (logs-only strips).
    """
    n = len(decisions)
    code = np.zeros(n, dtype=np.int8)
    padded = _bool(_col(decisions, "padded", pd.NA))
    carried = pd.to_numeric(_col(decisions, "carried_dummy", 0), errors="coerce").fillna(0).to_numpy() > 0
    cq = decisions["can_queue"].astype("boolean") if "can_queue" in decisions else pd.Series(pd.NA, index=decisions.index, dtype="boolean")
    skipped = cq.eq(False).fillna(False).to_numpy(dtype=bool)
    batch = pd.to_numeric(_col(decisions, "batch"), errors="coerce")
    unknown = batch.isna().to_numpy()
    zero = (batch == 0).fillna(False).to_numpy(dtype=bool)
    crash = _bool(_col(decisions, "crash", False))
    # A zero batch only forces a skip when some other rank had work; all at 0 is an idle fleet.
    busy_iter = (batch > 0).fillna(False).groupby(decisions["iter"].to_numpy()).transform("any")
    idle = zero & ~busy_iter.to_numpy(dtype=bool)
    code[padded] = 1
    code[skipped] = 2
    code[carried] = 3
    code[padded & skipped] = 4
    code[zero] = 5
    code[idle] = 8
    code[crash] = 6
    code[unknown & ~crash] = 7
    return code


@dataclasses.dataclass(frozen=True)
class StripPanel:
    """One policy's strip: ``grid[row, x]`` is a category code, NaN where nothing is drawn;
    ``ranks[row]`` names the rows, ``ticked`` the rows that get a tick label. No grid: the panel
    says "no decisions"."""

    name: str
    grid: Optional[np.ndarray]
    ranks: tuple[int, ...] = ()
    ticked: tuple[int, ...] = ()

    @property
    def height_in(self) -> float:
        """Panel height (inches): grows with the ranks, between 1.4 and 4."""
        return min(4.0, max(1.4, 0.12 * (len(self.ranks) if self.ranks else 1)))


@dataclasses.dataclass(frozen=True)
class StripView:
    """Everything :func:`figures.decision_strip` and its SVG twin draw; ``used`` are the
    category codes present (the legend, in :data:`STRIP_CATEGORIES` order)."""

    title: str
    win: IterWindows
    panels: tuple[StripPanel, ...]
    used: tuple[int, ...]

    @property
    def height_in(self) -> float:
        return min(1.2 + sum(p.height_in for p in self.panels) + 0.8, 16)


def strip_view(panels: Mapping[str, pd.DataFrame], *, leaks: pd.DataFrame | None = None,
               crash: Mapping | None = None, title: str = "What each rank did, per iteration",
               radius: int | None = None) -> StripView:
    """What the decision strip draws (arguments: :func:`figures.decision_strip`)."""
    names = list(panels)
    first = panels[names[0]] if names else pd.DataFrame(columns=["iter", "rank"])
    kw = {"radius": radius} if radius is not None else {}
    win = windows_for(first, leaks, crash, **kw) if len(first) else IterWindows(())
    # Every rank that leaked or crashed keeps its tick, whatever the spacing of the others.
    marked = set(int(r) for r in (leaks["rank"] if leaks is not None and len(leaks) else ()))
    if crash and crash.get("rank") is not None:
        marked.add(int(crash["rank"]))
    out: list[StripPanel] = []
    used: set[int] = set()
    for name in names or ["(none)"]:
        df = panels.get(name, pd.DataFrame())
        if not len(df) or not win.segments:
            out.append(StripPanel(name, None))
            continue
        x = win.position(df["iter"].to_numpy())
        keep = ~np.isnan(x)
        df = df[keep]
        rank_of_row = df["rank"].to_numpy().astype(np.int64)
        uniq = np.unique(rank_of_row)
        ranks = [int(r) for r in uniq]
        row_of = {r: i for i, r in enumerate(ranks)}
        grid = np.full((len(ranks), win.width), np.nan)
        codes = strip_codes(df)
        grid[np.searchsorted(uniq, rank_of_row), x[keep].astype(int)] = codes
        used.update(int(c) for c in np.unique(codes))
        step = max(1, len(ranks) // 16)
        ticked = sorted(set(range(0, len(ranks), step)) | {row_of[r] for r in marked if r in row_of})
        out.append(StripPanel(name, grid, tuple(ranks), tuple(ticked)))
    return StripView(title, win, tuple(out), tuple(sorted(used)))


@dataclasses.dataclass(frozen=True)
class Bar:
    """One stacked segment per rank: counts, legend label, colour and hatch (None: solid)."""

    label: str
    values: np.ndarray
    colour: str
    hatch: Optional[str]


@dataclasses.dataclass(frozen=True)
class HLine:
    """A horizontal reference line with its legend label (style as matplotlib's linestyle)."""

    y: float
    colour: str
    style: str
    width: float
    label: str


@dataclasses.dataclass(frozen=True)
class StatesView:
    """Everything :func:`figures.state_composition` and its SVG twin draw; ``message`` instead
    of bars when nothing was recorded."""

    title: str
    ranks: tuple[int, ...]
    bars: tuple[Bar, ...]
    lines: tuple[HLine, ...]
    message: Optional[str] = None


def _state_name(state: int) -> str:
    try:
        return RequestState(state).name
    except ValueError:
        return f"state {state}"


def states_view(requests: pd.DataFrame, *, iteration: int,
                leaked_dummies: Mapping[int, int] | None = None, expected: int | None = None,
                cap: int | None = None, title: str | None = None,
                ranks: Sequence[int] | None = None) -> StatesView:
    """What the request-states figure draws (arguments: :func:`figures.state_composition`)."""
    title = title or f"Request states per rank at iteration {iteration}"
    req = requests.copy()
    if leaked_dummies is not None and len(req):
        req = req[~req["dummy"].astype(bool)]
    leaked = dict(leaked_dummies or {})
    if not len(req) and not leaked:
        return StatesView(title, (), (), (), message=f"no requests recorded at iteration {iteration}")
    if len(req):
        # the state codes: ``state_value`` (dataset 2.3), ``state`` in a frame of codes
        codes = req["state_value"] if "state_value" in req.columns else req["state"]
        state = codes.astype(int).to_numpy()
        dummy = req["dummy"].astype(bool).to_numpy()
        names = {int(s): _state_name(int(s)) for s in np.unique(state)}
        req["label"] = np.where(dummy, "ADP dummy (recorded)", [names[int(s)] for s in state])
        req["order"] = state + np.where(dummy, 100, 0)
        counts = req.groupby(["rank", "label"]).size().unstack(fill_value=0)
        order = req.groupby("label")["order"].min().sort_values().index
        counts = counts[list(order)]
    else:
        counts = pd.DataFrame()
    all_ranks = sorted(set(int(r) for r in counts.index) | set(int(r) for r in leaked)
                       | set(int(r) for r in (ranks or ())))
    counts = counts.reindex(all_ranks, fill_value=0)
    if leaked:
        counts["ADP dummy leaked (replay)"] = [leaked.get(r, 0) for r in all_ranks]
    bars, k = [], 0
    for col in counts.columns:
        if col.startswith("ADP dummy leaked"):
            colour, hatch = "#e69f00", "//"
        elif col.startswith("ADP dummy"):
            colour, hatch = "#f5d08a", "//"
        else:
            colour = STATE_COLOURS[k % len(STATE_COLOURS)]
            hatch = (None, "..", "xx")[(k // len(STATE_COLOURS)) % 3]
            k += 1
        bars.append(Bar(str(col), counts[col].to_numpy(dtype=float), colour, hatch))
    lines = []
    if expected is not None:
        lines.append(HLine(float(expected), "black", "--", 1.2,
                           f"expected_num_active_requests = {expected}"
                           + (" (= the cap)" if cap == expected else "")))
    if cap is not None and cap != expected:
        lines.append(HLine(float(cap), CAP_COLOUR, ":", 1.5, f"cap = {cap}"))
    return StatesView(title, tuple(all_ranks), tuple(bars), tuple(lines))


# --- from replay results --------------------------------------------------------------------------

def leaks_frame(leaks: Sequence) -> pd.DataFrame:
    """Leak records (objects or dicts with rank/iter_created/iter_skipped/cause_ranks) as a frame;
    a frame (``ReplayResult.leaks``) as it is."""
    if isinstance(leaks, pd.DataFrame):
        return leaks
    rows = []
    for leak in leaks:
        get = leak.get if isinstance(leak, Mapping) else (lambda k, d=None, o=leak: getattr(o, k, d))
        rows.append({"rank": int(get("rank")), "iter_created": int(get("iter_created")),
                     "iter_skipped": int(get("iter_skipped")),
                     "cause_ranks": tuple(int(r) for r in (get("cause_ranks") or ()))})
    return pd.DataFrame(rows, columns=["rank", "iter_created", "iter_skipped", "cause_ranks"])


def crash_marker(crash) -> dict | None:
    """A replayed crash (``ReplayResult.crash``) as the ``crash`` argument of the figures."""
    if crash is None:
        return None
    return {"iter": int(crash.iter), "rank": int(crash.rank), "active": int(crash.active)}


def state_iteration(decisions: pd.DataFrame, result) -> int | None:
    """The iteration whose request states tell a replay's story: the crash, else the one after
    the first leak (the skipped one when the trace ends there), else the last; None if empty."""
    if not len(decisions):
        return None
    if result.crash is not None:
        return int(result.crash.iter)
    if len(result.leaks):
        first = int(result.leaks["iter_skipped"].min())
        nxt = first + 1
        return nxt if (decisions["iter"] == nxt).any() else first
    return int(decisions["iter"].max())
