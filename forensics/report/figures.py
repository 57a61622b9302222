"""The post-mortem figures: functions that take DataFrames and return a matplotlib Figure.

Each figure is titled and labelled so it reads at a glance, and long runs are windowed around
the interesting iterations (``forensics.report.windows``), never drawn point by point.

- :func:`active_vs_expected`: per-rank ``len(active_requests)`` against expected and the cap,
  with leak and crash markers.
- :func:`decision_strip`: a rank x iteration strip of ran / padded / zero batch / skipped /
  leaked dummy / crash, one panel per policy.
- :func:`state_composition`: request states per rank at one iteration (stacked bars).

What each figure shows (windows, series, strip codes, labels) is computed by
``forensics.report.figure_data``, which the report's SVG figures (``svg_figures``) draw too;
this module draws those views with matplotlib, for notebooks.

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

from forensics.report.figure_data import (  # noqa: F401  (part of this module's API)
    MAX_HIGHLIGHT,
    OVERVIEW_POINTS,
    PER_ITERATION_ACTIVE,
    STRIP_CATEGORIES,
    X_LABEL,
    ActiveView,
    StatesView,
    StripView,
    active_view,
    crash_marker,
    focus_iterations,
    leaks_frame,
    per_iteration_active,
    state_iteration,
    states_view,
    strip_codes,
    strip_view,
    windows_for,
)
from forensics.report.windows import IterWindows

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


def _decorate_axis(ax, win: IterWindows, *, label: str = X_LABEL) -> None:
    xs, labels = win.ticks()
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(-0.5, max(win.width, 1) - 0.5)
    for x, hidden in win.gap_positions():
        ax.axvline(x, color="0.35", linestyle=(0, (1, 2)), linewidth=1)
        ax.text(x, 1.0, f"{hidden} it.\nhidden", transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_xlabel(label)


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
    return draw_active(active_view(decisions, leaks=leaks, crash=crash, cap=cap, title=title,
                                   radius=radius))


def draw_active(v: ActiveView) -> Figure:
    """:func:`active_vs_expected` of a computed view."""
    fig = _new_figure(11, 6.4 if v.overview is not None else 4.8)
    if v.overview is not None:
        over, ax = fig.subplots(2, 1, height_ratios=(1, 2.6))
        _overview(over, v)
    else:
        ax = fig.subplots()
    fig.suptitle(v.title, fontsize=12, fontweight="bold")
    if v.empty:
        ax.text(0.5, 0.5, "no frames to draw", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        _fit(fig)
        return fig
    for s in v.grey:
        ax.plot(s.x, s.y, color="0.75", linewidth=0.8, zorder=1)
    for h in v.highlighted:
        if not h.parts:
            ax.plot([], [], color=h.colour, linestyle=h.style, linewidth=1.8, label=h.label)
        for k, s in enumerate(h.parts):
            ax.plot(s.x, s.y, color=h.colour, linewidth=1.8, zorder=3, linestyle=h.style,
                    drawstyle="steps-mid", label=h.label if k == 0 else None)
    if v.others_label:
        ax.plot([], [], color="0.75", linewidth=0.8, label=v.others_label)
    for k, s in enumerate(v.expected):
        ax.plot(s.x, s.y, color="black", linewidth=1.2, linestyle="--", zorder=2,
                label=v.expected_label if k == 0 else None)
    if v.cap is not None:
        ax.axhline(v.cap, color="#d55e00", linestyle=":", linewidth=1.5, zorder=2,
                   label=v.cap_label)
    if v.leaks is not None:
        ax.scatter(v.leaks.x, v.leaks.y, marker="v", s=70, color="#e69f00", edgecolor="black",
                   zorder=4, label=v.leaks.label)
    if v.crash is not None:
        ax.scatter(v.crash.x, v.crash.y, marker="X", s=160, color="#d55e00", edgecolor="black",
                   zorder=5, label=v.crash.label)
    _decorate_axis(ax, v.win)
    ax.set_ylabel(v.y_label)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)   # a count: the axis starts at zero
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, framealpha=0.9)
    _fit(fig)
    return fig


def _overview(ax, v: ActiveView) -> None:
    """The whole run on one small axis (the fleet's busiest rank per iteration, binned), with
    the zoomed windows shaded: where in the run the figure below looks."""
    o = v.overview
    ax.plot(o.x, o.y, color="#0072b2", linewidth=0.8, label="busiest rank")
    if v.cap is not None:
        ax.axhline(v.cap, color="#d55e00", linestyle=":", linewidth=1.2, label=f"cap = {v.cap}")
    for first, last in o.segments:
        ax.axvspan(first - 0.5, last + 0.5, color="#e69f00", alpha=0.3, linewidth=0)
    ax.set_xlim(*o.xlim)
    ax.set_ylim(bottom=0)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(o.title, fontsize=9, loc="left")
    ax.set_ylabel("active", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)


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
    return draw_strip(strip_view(panels, leaks=leaks, crash=crash, title=title, radius=radius))


def draw_strip(v: StripView) -> Figure:
    """:func:`decision_strip` of a computed view."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    fig = _new_figure(11, v.height_in)
    axes = fig.subplots(max(1, len(v.panels)), 1, squeeze=False)
    fig.suptitle(v.title, fontsize=12, fontweight="bold")
    cmap = ListedColormap([c for _, c in STRIP_CATEGORIES])
    for ax, p in zip(axes[:, 0], v.panels):
        if p.grid is None:
            ax.text(0.5, 0.5, "no decisions", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        ax.imshow(np.ma.masked_invalid(p.grid), aspect="auto", interpolation="nearest", cmap=cmap,
                  vmin=-0.5, vmax=len(STRIP_CATEGORIES) - 0.5, origin="upper")
        ax.set_yticks(list(p.ticked))
        ax.set_yticklabels([str(p.ranks[i]) for i in p.ticked], fontsize=8)
        ax.set_ylabel("rank")
        ax.set_title(p.name, fontsize=10, loc="left")
        _decorate_axis(ax, v.win)
    handles = [Patch(facecolor=STRIP_CATEGORIES[i][1], edgecolor="0.4", label=STRIP_CATEGORIES[i][0])
               for i in v.used]
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
        requests: recorded requests (``rank``, ``state_value`` int, or ``state`` int in a frame
            of codes, ``dummy`` bool) of that iteration; recorded dummies are drawn as "ADP dummy
            (recorded)" unless ``leaked_dummies`` is given (a replay drops the recorded dummies
            and carries its own).
        iteration: the iteration shown (in the title).
        leaked_dummies: rank -> dummies the replayed policy carried into this iteration, drawn
            as their own segment on top; None when the figure shows the recording itself.
        expected, cap: horizontal reference lines.
        title: figure title; default names the iteration.
        ranks: every rank to draw (ranks holding nothing get an empty bar); default: those seen.
    """
    return draw_states(states_view(requests, iteration=iteration, leaked_dummies=leaked_dummies,
                                   expected=expected, cap=cap, title=title, ranks=ranks))


def draw_states(v: StatesView) -> Figure:
    """:func:`state_composition` of a computed view."""
    fig = _new_figure(11, 4.8)
    ax = fig.subplots()
    fig.suptitle(v.title, fontsize=12, fontweight="bold")
    if v.message:
        ax.text(0.5, 0.5, v.message, ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        _fit(fig)
        return fig
    xs = np.arange(len(v.ranks))
    bottom = np.zeros(len(v.ranks))
    for b in v.bars:
        ax.bar(xs, b.values, bottom=bottom, color=b.colour, edgecolor="0.3", linewidth=0.5,
               label=b.label, hatch=b.hatch)
        bottom += b.values
    for line in v.lines:
        ax.axhline(line.y, color=line.colour, linestyle=line.style, linewidth=line.width,
                   label=line.label)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(r) for r in v.ranks], fontsize=8)
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
