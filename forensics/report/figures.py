"""The post-mortem figures: functions that take DataFrames and return a matplotlib Figure.

Each figure is titled and labelled so it reads at a glance, and long runs are windowed around
the interesting iterations (``forensics.report.windows``), never drawn point by point.

- :func:`active_vs_expected`: per-rank ``len(active_requests)`` against expected and the cap,
  with leak and crash markers.
- :func:`decision_strip`: a rank x iteration strip of ran / padded / zero batch / skipped /
  leaked dummy / crash, one panel per policy.
- :func:`state_composition`: request states per rank at one iteration (stacked bars).

Figures are built as bare ``matplotlib.figure.Figure`` objects, not through ``pyplot``: no global
state, no window, whatever backend a notebook selected; PNGs are rendered by Agg.

Drawing cost: each figure has fixed margins in inches, sized from the few texts that vary (the
legends, the y tick labels) measured once with the renderer that then draws the PNG, instead of
constrained layout, which laid out every text twice and drew every PNG twice (most of a small
post-mortem's time). matplotlib is imported by the drawing functions only: the helpers that
choose windows and frames (``windows_for``, ``leaks_frame``, ...) do not need it.
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from forensics.report.windows import IterWindows, choose_windows
from replay.states import RequestState

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
_HIGHLIGHT_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
                      "#f0e442", "#000000")
_LINE_STYLES = ("-", "--", "-.", ":")
#: Colours of the request-state bars (colour-blind safe, repeated with hatches past 8).
_STATE_COLOURS = ("#56b4e9", "#009e73", "#0072b2", "#cc79a7", "#999999", "#f0e442", "#d55e00",
                  "#000000")


#: PNG resolution. Figures are created at it so that the renderer measuring the margins
#: (:func:`_fit`) is the one ``to_png`` draws with: its text-metrics cache is reused.
DPI = 110
#: Space (inches) around the measured texts.
_PAD_IN = 0.1


def _new_figure(width: float, height: float) -> "Figure":
    """A bare Figure on an Agg canvas (no layout engine: :func:`_fit` places the axes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _fit(fig: "Figure", *, fig_legend=None) -> None:
    """Fixed margins for a column of axes, from one measurement of each axis' outer texts.

    Each axis' tight box (tick labels, labels, title, texts above it, a legend outside on the
    right) gives the room it needs on each side; the axes are then placed once with
    ``subplots_adjust``: what constrained layout found, without its second pass and draw.
    """
    r = fig.canvas.get_renderer()
    dpi = fig.dpi
    w, h = fig.get_size_inches()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not axes:
        return
    need = []   # per axis (left, right, top, bottom), inches
    for ax in axes:
        box, tb = ax.get_position(), ax.get_tightbbox(r)
        if tb is None or not ax.axison:
            need.append((0.0, 0.0, 0.0, 0.0))
            continue
        x0, y0, x1, y1 = box.x0 * w * dpi, box.y0 * h * dpi, box.x1 * w * dpi, box.y1 * h * dpi
        need.append((max(0.0, x0 - tb.x0) / dpi, max(0.0, tb.x1 - x1) / dpi,
                     max(0.0, tb.y1 - y1) / dpi, max(0.0, y0 - tb.y0) / dpi))
    top = need[0][2]
    if fig._suptitle is not None and fig._suptitle.get_text():
        top += (fig.bbox.y1 - fig._suptitle.get_window_extent(r).y0) / dpi
    bottom = need[-1][3]
    if fig_legend is not None:
        bottom += fig_legend.get_window_extent(r).height / dpi + _PAD_IN
    left = max(n[0] for n in need) + _PAD_IN
    right = max(n[1] for n in need) + _PAD_IN
    gap = max((need[i][3] + need[i + 1][2] for i in range(len(need) - 1)), default=0.0) + _PAD_IN
    top, bottom = top + _PAD_IN, bottom + _PAD_IN
    n = len(axes)
    cell = max((h - top - bottom - (n - 1) * gap) / n, 0.1)
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h,
                        hspace=gap / cell)


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


def windows_for(decisions: pd.DataFrame, leaks: pd.DataFrame | None = None,
                crash: Mapping | None = None, **kwargs) -> IterWindows:
    """The windows a figure of these decisions draws: around the crash, the leaks and the skips,
    and the peak-load iteration (so a long clean run shows its busiest stretch, not its end)."""
    iters = decisions["iter"].to_numpy() if len(decisions) else np.zeros(0, dtype=np.int64)
    return choose_windows(iters, _focus_with_peak(decisions, leaks, crash), **kwargs)


def _decorate_axis(ax, win: IterWindows, *, label: str = "iteration (executor iter_counter)") -> None:
    xs, labels = win.ticks()
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(-0.5, max(win.width, 1) - 0.5)
    for x, hidden in win.gap_positions():
        ax.axvline(x, color="0.35", linestyle=(0, (1, 2)), linewidth=1)
        ax.text(x, 1.0, f"{hidden} it.\nhidden", transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_xlabel(label)


def _interesting_ranks(decisions: pd.DataFrame, leaks: pd.DataFrame | None,
                       crash: Mapping | None) -> list[int]:
    """Ranks drawn in colour, sorted: every rank that leaked or crashed, then cause ranks while
    there is room (``MAX_HIGHLIGHT``); the three busiest when nothing happened."""
    must: set[int] = set()
    causes: list[int] = []
    if crash and crash.get("rank") is not None:
        must.add(int(crash["rank"]))
    if leaks is not None and len(leaks):
        for _, row in leaks.iterrows():
            must.add(int(row["rank"]))
            causes += [int(r) for r in (row.get("cause_ranks", ()) or ())]
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
        elif any(rank in tuple(c or ()) for c in leaks["cause_ranks"]):
            parts.append("zero batch")
    if crash and crash.get("rank") is not None and int(crash["rank"]) == rank:
        parts.append("crash")
    return f"rank {rank}" + (f" ({', '.join(parts)})" if parts else "")


#: ``DataFrame.attrs`` key of a decisions table holding only some iterations of a long run: the
#: whole run's :func:`per_iteration_active` (a streamed replay's figures, ``figure_views``).
PER_ITERATION_ACTIVE = "per_iteration_active"


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


def active_vs_expected(decisions: pd.DataFrame, *, leaks: pd.DataFrame | None = None,
                       crash: Mapping | None = None, cap: int | None = None,
                       title: str = "Active requests per rank", radius: int | None = None) -> Figure:
    """Per-rank ``len(active_requests)`` at pad entry against ``expected`` and the cap.

    Args:
        decisions: one row per (iter, rank) with ``iter``, ``rank``, ``active`` and
            optionally ``expected`` (replay decisions, ``replay.run(...).decisions``).
        leaks: one row per leak with ``rank``, ``iter_created``, ``iter_skipped``, ``cause_ranks``.
        crash: ``{"iter", "rank", ...}`` of the crash, or None.
        cap: ``max_num_active_requests`` (drawn as a dashed line), or None when not capped/known.
        title: figure title (name the policy).
        radius: iterations drawn around each interesting one (default: windows module's).

    Returns:
        A figure with one axis; crash rank and leaking ranks are highlighted, the others grey.
    """
    kw = {"radius": radius} if radius is not None else {}
    win = windows_for(decisions, leaks, crash, **kw)
    lo_it = int(decisions["iter"].min()) if len(decisions) else 0
    hi_it = int(decisions["iter"].max()) if len(decisions) else 0
    zoomed = bool(win.segments) and (len(win.segments) > 1 or win.segments[0] != (lo_it, hi_it))
    fig = _new_figure(11, 6.4 if zoomed else 4.8)
    if zoomed:
        over, ax = fig.subplots(2, 1, height_ratios=(1, 2.6))
        _overview(over, decisions, win, cap)
    else:
        ax = fig.subplots()
    fig.suptitle(title, fontsize=12, fontweight="bold")
    if not len(decisions):
        ax.text(0.5, 0.5, "no frames to draw", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        _fit(fig)
        return fig
    df = decisions.assign(x=win.position(decisions["iter"].to_numpy()))
    df = df[df["x"].notna()].sort_values(["rank", "iter"])
    highlight = _interesting_ranks(decisions, leaks, crash)
    seg_id = np.searchsorted([s[0] for s in win.segments], df["iter"].to_numpy(), side="right")
    df = df.assign(seg=seg_id)
    for rank, g in df.groupby("rank", sort=True):
        if int(rank) in highlight:
            continue
        for _, s in g.groupby("seg"):
            ax.plot(s["x"], s["active"].astype(float), color="0.75", linewidth=0.8, zorder=1)
    for i, rank in enumerate(highlight):
        g = df[df["rank"] == rank]
        colour = _HIGHLIGHT_COLOURS[i % len(_HIGHLIGHT_COLOURS)]
        style = _LINE_STYLES[(i // len(_HIGHLIGHT_COLOURS)) % len(_LINE_STYLES)]
        label = _rank_label(rank, leaks, crash)
        if not len(g):
            ax.plot([], [], color=colour, linestyle=style, linewidth=1.8, label=label)
        first = True
        for _, s in g.groupby("seg"):
            ax.plot(s["x"], s["active"].astype(float), color=colour, linewidth=1.8, zorder=3,
                    linestyle=style, drawstyle="steps-mid", label=label if first else None)
            first = False
    others = sorted(set(int(r) for r in df["rank"].unique()) - set(highlight))
    if others:
        ax.plot([], [], color="0.75", linewidth=0.8,
                label=f"rank{'s' if len(others) > 1 else ''} {_span(others)} (no leak)")
    if "expected" in df.columns:
        exp = df.groupby(["seg", "x"])["expected"].max().reset_index()
        first = True
        for _, s in exp.groupby("seg"):
            ax.plot(s["x"], s["expected"].astype(float), color="black", linewidth=1.2,
                    linestyle="--", zorder=2, label="expected_num_active_requests" if first else None)
            first = False
    if cap is not None:
        ax.axhline(cap, color="#d55e00", linestyle=":", linewidth=1.5, zorder=2,
                   label=f"cap = {cap} (max_num_active_requests)")
    if leaks is not None and len(leaks):
        keyed = df.set_index(["iter", "rank"])["active"]
        xs, ys = [], []
        for _, row in leaks.iterrows():
            key = (int(row["iter_skipped"]), int(row["rank"]))
            x = win.position([key[0]])[0]
            if np.isnan(x) or key not in keyed.index:
                continue
            xs.append(x)
            ys.append(float(keyed.loc[key]))
        if xs:
            ax.scatter(xs, ys, marker="v", s=70, color="#e69f00", edgecolor="black", zorder=4,
                       label="dummy leaks (fleet skipped)")
    if crash and crash.get("iter") is not None:
        x = win.position([int(crash["iter"])])[0]
        if not np.isnan(x):
            row = df[(df["iter"] == int(crash["iter"])) & (df["rank"] == int(crash.get("rank", -1)))]
            y = float(row["active"].iloc[0]) if len(row) else float(crash.get("active") or 0)
            ax.scatter([x], [y], marker="X", s=160, color="#d55e00", edgecolor="black", zorder=5,
                       label=f"crash (rank {crash.get('rank')}, iter {crash['iter']})")
    _decorate_axis(ax, win)
    ax.set_ylabel("len(active_requests) at pad entry")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)   # a count: the axis starts at zero
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, framealpha=0.9)
    _fit(fig)
    return fig


def _span(ranks: Sequence[int]) -> str:
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


#: Points drawn in the overview of a long run (iterations are binned down to this).
OVERVIEW_POINTS = 1500


def _overview(ax, decisions: pd.DataFrame, win: IterWindows, cap: int | None) -> None:
    """The whole run on one small axis (the fleet's busiest rank per iteration, binned), with
    the zoomed windows shaded: where in the run the figure below looks."""
    if not len(decisions):
        ax.set_axis_off()
        return
    per = per_iteration_active(decisions)["max"]
    if len(per) > OVERVIEW_POINTS:
        bins = np.linspace(per.index.min(), per.index.max() + 1, OVERVIEW_POINTS + 1)
        per = per.groupby(pd.cut(per.index, bins, right=False, labels=bins[:-1]),
                          observed=True).max()
        per.index = per.index.astype(float)
    ax.plot(per.index.astype(float), per.to_numpy(dtype=float), color="#0072b2", linewidth=0.8,
            label="busiest rank")
    if cap is not None:
        ax.axhline(cap, color="#d55e00", linestyle=":", linewidth=1.2, label=f"cap = {cap}")
    for first, last in win.segments:
        ax.axvspan(first - 0.5, last + 0.5, color="#e69f00", alpha=0.3, linewidth=0)
    ax.set_xlim(float(decisions["iter"].min()), float(decisions["iter"].max()))
    ax.set_ylim(bottom=0)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title("whole run (shaded: the iterations drawn below)", fontsize=9, loc="left")
    ax.set_ylabel("active", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)


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


def decision_strip(panels: Mapping[str, pd.DataFrame], *, leaks: pd.DataFrame | None = None,
                   crash: Mapping | None = None, title: str = "What each rank did, per iteration",
                   radius: int | None = None) -> Figure:
    """Rank x iteration strips, one panel per policy (or per source of decisions).

    Args:
        panels: panel label -> decisions (``iter``, ``rank``, ``batch``, ``can_queue``, optional
            ``padded``, ``carried_dummy``, ``crash``). All panels share the windows of the first.
        leaks, crash: of the first panel; they choose the windows.
        title: figure title.

    Returns:
        A figure with one heat-strip axis per panel and a legend of the categories.
    """
    names = list(panels)
    fig_h = 1.2 + sum(min(4.0, max(1.4, 0.12 * (panels[n]["rank"].nunique() if len(panels[n]) else 1)))
                      for n in names)
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    fig = _new_figure(11, min(fig_h + 0.8, 16))
    axes = fig.subplots(max(1, len(names)), 1, squeeze=False)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    first = panels[names[0]] if names else pd.DataFrame(columns=["iter", "rank"])
    kw = {"radius": radius} if radius is not None else {}
    win = windows_for(first, leaks, crash, **kw) if len(first) else IterWindows(())
    cmap = ListedColormap([c for _, c in STRIP_CATEGORIES])
    used: set[int] = set()
    for ax, name in zip(axes[:, 0], names or ["(none)"]):
        df = panels.get(name, pd.DataFrame())
        if not len(df) or not win.segments:
            ax.text(0.5, 0.5, "no decisions", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        x = win.position(df["iter"].to_numpy())
        keep = ~np.isnan(x)
        df = df[keep]
        ranks = sorted(int(r) for r in pd.unique(df["rank"]))
        row_of = {r: i for i, r in enumerate(ranks)}
        grid = np.full((len(ranks), win.width), np.nan)
        codes = strip_codes(df)
        rows = np.array([row_of[int(r)] for r in df["rank"]])
        grid[rows, x[keep].astype(int)] = codes
        used.update(int(c) for c in np.unique(codes))
        ax.imshow(np.ma.masked_invalid(grid), aspect="auto", interpolation="nearest", cmap=cmap,
                  vmin=-0.5, vmax=len(STRIP_CATEGORIES) - 0.5, origin="upper")
        step = max(1, len(ranks) // 16)
        # Every rank that leaked or crashed keeps its tick, whatever the spacing of the others.
        marked = set(int(r) for r in (leaks["rank"] if leaks is not None and len(leaks) else ()))
        if crash and crash.get("rank") is not None:
            marked.add(int(crash["rank"]))
        rows_ticked = sorted(set(range(0, len(ranks), step)) | {row_of[r] for r in marked if r in row_of})
        ax.set_yticks(rows_ticked)
        ax.set_yticklabels([str(ranks[i]) for i in rows_ticked], fontsize=8)
        ax.set_ylabel("rank")
        ax.set_title(name, fontsize=10, loc="left")
        _decorate_axis(ax, win)
    handles = [Patch(facecolor=STRIP_CATEGORIES[i][1], edgecolor="0.4", label=STRIP_CATEGORIES[i][0])
               for i in sorted(used)]
    legend = None
    if handles:
        legend = fig.legend(handles=handles, loc="lower center", ncols=min(4, len(handles)),
                            fontsize=8, bbox_to_anchor=(0.5, _PAD_IN / fig.get_size_inches()[1]))
    _fit(fig, fig_legend=legend)
    return fig


def state_composition(requests: pd.DataFrame, *, iteration: int,
                      leaked_dummies: Mapping[int, int] | None = None, expected: int | None = None,
                      cap: int | None = None, title: str | None = None,
                      ranks: Sequence[int] | None = None) -> Figure:
    """Request states per rank at one iteration, as stacked bars by state name.

    Args:
        requests: recorded requests (``rank``, ``state`` int, ``dummy`` bool) of that iteration;
            recorded dummies are drawn as "ADP dummy (recorded)" unless ``leaked_dummies`` is
            given (a replay drops the recorded dummies and carries its own).
        iteration: the iteration shown (in the title).
        leaked_dummies: rank -> dummies the replayed policy carried into this iteration, drawn
            as their own segment on top; None when the figure shows the recording itself.
        expected, cap: horizontal reference lines.
        title: figure title; default names the iteration.
        ranks: every rank to draw (ranks holding nothing get an empty bar); default: those seen.
    """
    fig = _new_figure(11, 4.8)
    ax = fig.subplots()
    fig.suptitle(title or f"Request states per rank at iteration {iteration}", fontsize=12,
                 fontweight="bold")
    req = requests.copy()
    if leaked_dummies is not None and len(req):
        req = req[~req["dummy"].astype(bool)]
    leaked = dict(leaked_dummies or {})
    if not len(req) and not leaked:
        ax.text(0.5, 0.5, f"no requests recorded at iteration {iteration}", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_axis_off()
        _fit(fig)
        return fig

    def state_name(state: int) -> str:
        try:
            return RequestState(state).name
        except ValueError:
            return f"state {state}"

    if len(req):
        state = req["state"].astype(int).to_numpy()
        dummy = req["dummy"].astype(bool).to_numpy()
        names = {int(s): state_name(int(s)) for s in np.unique(state)}
        req["label"] = np.where(dummy, "ADP dummy (recorded)", [names[int(s)] for s in state])
        req["order"] = state + np.where(dummy, 100, 0)
        counts = req.groupby(["rank", "label"]).size().unstack(fill_value=0)
        order = req.groupby("label")["order"].min().sort_values().index
        counts = counts[list(order)]
    else:
        counts = pd.DataFrame()
    ranks = sorted(set(int(r) for r in counts.index) | set(int(r) for r in leaked)
                   | set(int(r) for r in (ranks or ())))
    counts = counts.reindex(ranks, fill_value=0)
    if leaked:
        counts["ADP dummy leaked (replay)"] = [leaked.get(r, 0) for r in ranks]
    bottom = np.zeros(len(ranks))
    xs = np.arange(len(ranks))
    k = 0
    for col in counts.columns:
        vals = counts[col].to_numpy(dtype=float)
        if col.startswith("ADP dummy leaked"):
            colour, hatch = "#e69f00", "//"
        elif col.startswith("ADP dummy"):
            colour, hatch = "#f5d08a", "//"
        else:
            colour = _STATE_COLOURS[k % len(_STATE_COLOURS)]
            hatch = (None, "..", "xx")[(k // len(_STATE_COLOURS)) % 3]
            k += 1
        ax.bar(xs, vals, bottom=bottom, color=colour, edgecolor="0.3", linewidth=0.5, label=col,
               hatch=hatch)
        bottom += vals
    if expected is not None:
        ax.axhline(expected, color="black", linestyle="--", linewidth=1.2,
                   label=f"expected_num_active_requests = {expected}"
                   + (" (= the cap)" if cap == expected else ""))
    if cap is not None and cap != expected:
        ax.axhline(cap, color="#d55e00", linestyle=":", linewidth=1.5, label=f"cap = {cap}")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(r) for r in ranks], fontsize=8)
    ax.set_xlabel("rank")
    ax.set_ylabel("requests in active_requests")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    _fit(fig)
    return fig


def to_png(fig: "Figure", *, dpi: int = DPI) -> bytes:
    """Render a figure to PNG bytes (Agg): one draw (no layout engine runs a draw first)."""
    buf = io.BytesIO()
    # zlib level 3: a third less encoding time than the default 6 for PNGs 12% larger
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 3})
    return buf.getvalue()


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
