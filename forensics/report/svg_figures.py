"""The report's figures as SVG text, drawn straight from the ``figure_data`` views.

The post-mortem writes these instead of matplotlib PNGs: importing matplotlib and drawing three
PNGs took most of a small post-mortem's time, while the figures are a few hundred lines, bars
and texts. Same content as the matplotlib figures (``figures``, for notebooks): titles, series,
markers, gap labels, legends and axes. The size is bounded by the windows, not by the run: a
line is one ``<path>`` per rank and segment, the strip one ``<path>`` per category and panel
(runs of equal cells merged), the overview at most ``OVERVIEW_POINTS`` points.

Text is laid out by the viewer; widths are estimated (:func:`_text_width`) only to size the
margins and legends. Coordinates are pixels of a 1210-pixel-wide figure (11 in at 110 dpi, as
the PNGs were).
"""
from __future__ import annotations

import html
import math
from typing import Optional, Sequence

import numpy as np

from forensics.report.figure_data import (
    CAP_COLOUR,
    CRASH_COLOUR,
    LEAK_COLOUR,
    STRIP_CATEGORIES,
    X_LABEL,
    ActiveView,
    StatesView,
    StripView,
)
from forensics.report.windows import IterWindows, round_step

#: Figure width (pixels) and pixels per point (font sizes are in points, as in matplotlib).
WIDTH = 1210
PX_PER_PT = 110 / 72
FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
_GREY_LINE, _GAP_GREY, _GRID = "#bfbfbf", "#595959", "#b3b3b3"
#: Average glyph width of the sans-serif font, in ems (DejaVu Sans: about 0.55-0.6).
_EM = 0.6
#: Dash patterns per matplotlib line style, in line widths.
_DASHES = {"-": None, "--": (3.7, 1.6), "-.": (6.4, 1.6, 1.0, 1.6), ":": (1.0, 1.65)}
#: Hatch patterns (``figure_data.Bar.hatch``) as SVG pattern contents on a 10-pixel tile.
_HATCHES = {
    "//": '<path d="M-2,2 l4,-4 M0,10 l10,-10 M8,12 l4,-4" stroke="#4d4d4d" stroke-width="1"/>',
    "..": '<circle cx="2.5" cy="2.5" r="1.1" fill="#4d4d4d"/>'
          '<circle cx="7.5" cy="7.5" r="1.1" fill="#4d4d4d"/>',
    "xx": '<path d="M-2,2 l4,-4 M0,10 l10,-10 M8,12 l4,-4 M-2,8 l4,4 M0,0 l10,10 M8,-2 l4,4" '
          'stroke="#4d4d4d" stroke-width="1"/>',
}


def _px(pt: float) -> float:
    return pt * PX_PER_PT


def _text_width(text: str, pt: float) -> float:
    """Estimated width (pixels) of a one-line text."""
    return len(text) * _px(pt) * _EM


def _n(v: float) -> str:
    """A coordinate: one decimal, no trailing zero."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _dash(style: str, width: float) -> str:
    d = _DASHES.get(style)
    if not d:
        return ""
    return f' stroke-dasharray="{",".join(_n(x * width) for x in d)}"'


class _Svg:
    """An SVG document under construction (elements appended in drawing order)."""

    def __init__(self, height: float, title: str):
        self.height = math.ceil(height)
        self.title = title
        self.defs: dict[str, str] = {}
        self.parts: list[str] = [f'<rect width="{WIDTH}" height="{self.height}" fill="#ffffff"/>']

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(self, x: float, y: float, text: str, pt: float, *, anchor: str = "start",
             bold: bool = False, colour: str = "#000000", rotate: bool = False,
             baseline: str = "auto", cls: str = "") -> None:
        attrs = f'x="{_n(x)}" y="{_n(y)}" font-size="{_n(_px(pt))}"'
        if cls:
            attrs = f'class="{cls}" ' + attrs
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if bold:
            attrs += ' font-weight="bold"'
        if colour != "#000000":
            attrs += f' fill="{colour}"'
        if baseline != "auto":
            attrs += f' dominant-baseline="{baseline}"'
        if rotate:
            attrs += f' transform="rotate(-90 {_n(x)} {_n(y)})"'
        self.add(f"<text {attrs}>{html.escape(text, quote=False)}</text>")

    def line(self, x1, y1, x2, y2, colour: str, width: float, style: str = "-",
             extra: str = "") -> None:
        """A line; ``width`` in points, as every stroke width here."""
        self.add(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" '
                 f'stroke="{colour}" stroke-width="{_n(_px(width))}"{_dash(style, _px(width))}{extra}/>')

    def path(self, d: str, colour: str, width: float, style: str = "-", cls: str = "") -> None:
        c = f' class="{cls}"' if cls else ""
        self.add(f'<path{c} d="{d}" fill="none" stroke="{colour}" stroke-width="{_n(_px(width))}"'
                 f' stroke-linejoin="round"{_dash(style, _px(width))}/>')

    def rect(self, x, y, w, h, fill: str, *, stroke: Optional[str] = None, width: float = 1,
             extra: str = "") -> None:
        s = f' stroke="{stroke}" stroke-width="{_n(_px(width))}"' if stroke else ""
        self.add(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}"'
                 f'{s}{extra}/>')

    def hatch(self, name: str) -> str:
        """``url(#...)`` of a hatch pattern, defined once."""
        pid = "hatch" + str(list(_HATCHES).index(name))
        self.defs.setdefault(pid, f'<pattern id="{pid}" width="10" height="10" '
                                  f'patternUnits="userSpaceOnUse">{_HATCHES[name]}</pattern>')
        return f"url(#{pid})"

    def render(self) -> bytes:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{self.height}" '
                f'viewBox="0 0 {WIDTH} {self.height}" font-family="{FONT}">')
        defs = ["<defs>" + "".join(self.defs.values()) + "</defs>"] if self.defs else []
        body = [head, f"<title>{html.escape(self.title, quote=False)}</title>", *defs,
                *self.parts, "</svg>"]
        return ("\n".join(body) + "\n").encode()


class _Axes:
    """A plot box in pixels with linear data limits; ``x``/``y`` map data to pixels."""

    def __init__(self, svg: _Svg, box: tuple[float, float, float, float],
                 xlim: tuple[float, float], ylim: tuple[float, float]):
        self.svg, (self.x0, self.y0, self.x1, self.y1) = svg, box
        self.xlim, self.ylim = xlim, ylim

    def x(self, v):
        a, b = self.xlim
        return self.x0 + (np.asarray(v, dtype=float) - a) / ((b - a) or 1) * (self.x1 - self.x0)

    def y(self, v):
        a, b = self.ylim
        return self.y1 - (np.asarray(v, dtype=float) - a) / ((b - a) or 1) * (self.y1 - self.y0)

    def frame(self) -> None:
        self.svg.rect(self.x0, self.y0, self.x1 - self.x0, self.y1 - self.y0, "none",
                      stroke="#000000", width=0.8)

    def yticks(self, values: Sequence[float], labels: Sequence[str], pt: float = 10,
               grid: bool = False) -> None:
        for v, lab in zip(values, labels):
            py = float(self.y(v))
            if grid:
                self.svg.line(self.x0, py, self.x1, py, _GRID, 0.8, extra=' stroke-opacity="0.5"')
            self.svg.line(self.x0 - 4, py, self.x0, py, "#000000", 0.8)
            self.svg.text(self.x0 - 6, py, lab, pt, anchor="end", baseline="central", cls="ytick")

    def xticks(self, values: Sequence[float], labels: Sequence[str], pt: float = 8) -> None:
        for v, lab in zip(values, labels):
            px = float(self.x(v))
            self.svg.line(px, self.y1, px, self.y1 + 4, "#000000", 0.8)
            self.svg.text(px, self.y1 + 6 + _px(pt), lab, pt, anchor="middle", cls="xtick")

    def labels(self, xlabel: Optional[str], ylabel: Optional[str], pt: float = 10,
               y_offset: float = 45) -> None:
        if xlabel:
            self.svg.text((self.x0 + self.x1) / 2, self.y1 + 8 + _px(8) + 6 + _px(pt), xlabel, pt,
                          anchor="middle")
        if ylabel:
            self.svg.text(self.x0 - y_offset, (self.y0 + self.y1) / 2, ylabel, pt,
                          anchor="middle", rotate=True)

    def polyline(self, x, y) -> str:
        """Path data of a line through the points (NaN values break it)."""
        xs, ys = self.x(x), self.y(y)
        out, pen = [], "M"
        for a, b in zip(xs, ys):
            if np.isnan(b):
                pen = "M"
                continue
            out.append(f"{pen}{_n(a)},{_n(b)}")
            pen = "L"
        return "".join(out)

    def steps_mid(self, x, y) -> str:
        """Path data of matplotlib's ``steps-mid``: each value held half-way to its neighbours."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if not len(x):
            return ""
        mid = (x[1:] + x[:-1]) / 2
        xs = np.concatenate([[x[0]], np.repeat(mid, 2), [x[-1]]])
        ys = np.repeat(y, 2)
        return self.polyline(xs, ys)


def _int_ticks(top: float, max_ticks: int = 8) -> list[int]:
    """Integer ticks from 0 to ``top`` at a round step (1, 2, 5 x 10^k)."""
    step = round_step(int(math.floor(top)) or 1, max_ticks)
    return list(range(0, int(math.floor(top)) + 1, step))


def _y_top(value: float) -> float:
    """The y limit above the largest value (matplotlib's 5 % margin)."""
    return max(value, 1.0) * 1.05


# --- legends --------------------------------------------------------------------------------------

class _Entry:
    """A legend entry: a line (colour, style, width), a marker or a patch (fill, hatch)."""

    def __init__(self, label: str, *, line: Optional[tuple[str, str, float]] = None,
                 marker: Optional[tuple[str, str]] = None,
                 patch: Optional[tuple[str, Optional[str]]] = None):
        self.label, self.line, self.marker, self.patch = label, line, marker, patch


def _legend_size(entries: Sequence[_Entry], pt: float, cols: int = 1) -> tuple[float, float, float]:
    """(width, height, column width) in pixels of a legend box."""
    col_w = max((_text_width(e.label, pt) for e in entries), default=0) + 2.8 * _px(pt) + 12
    rows = math.ceil(len(entries) / cols)
    return col_w * cols + 8, rows * _px(pt) * 1.6 + 10, col_w


def _legend(svg: _Svg, entries: Sequence[_Entry], x: float, y: float, pt: float,
            cols: int = 1) -> None:
    """A framed legend whose top-left corner is (x, y); entries fill the first column, then the
    next (as matplotlib's ``ncols``)."""
    if not entries:
        return
    w, h, col_w = _legend_size(entries, pt, cols)
    svg.rect(x, y, w, h, "#ffffff", stroke="#cccccc", width=0.8, extra=' fill-opacity="0.9"')
    row_h, hw = _px(pt) * 1.6, 2.0 * _px(pt)
    rows = math.ceil(len(entries) / cols)
    for i, e in enumerate(entries):
        cx = x + 6 + (i // rows) * col_w
        cy = y + 5 + (i % rows) * row_h + row_h / 2
        if e.line is not None:
            colour, style, width = e.line
            svg.line(cx, cy, cx + hw, cy, colour, width, style)
        if e.marker is not None:
            _marker(svg, e.marker[0], cx + hw / 2, cy, e.marker[1], scale=0.8)
        if e.patch is not None:
            fill, hatch = e.patch
            svg.rect(cx, cy - row_h * 0.3, hw, row_h * 0.6, fill, stroke="#666666", width=0.8)
            if hatch:
                svg.rect(cx, cy - row_h * 0.3, hw, row_h * 0.6, svg.hatch(hatch))
        svg.text(cx + hw + 6, cy, e.label, pt, baseline="central", cls="legend")


def _marker(svg: _Svg, kind: str, x: float, y: float, colour: str, scale: float = 1.0,
            cls: str = "") -> None:
    """A down triangle (``v``: a dummy leak) or a thick cross (``X``: the crash), black edge."""
    if kind == "v":
        r = 7.5 * scale
        d = f"M{_n(x - r)},{_n(y - r * 0.6)}L{_n(x + r)},{_n(y - r * 0.6)}L{_n(x)},{_n(y + r)}Z"
    else:
        r, a = 10 * scale, 3.2 * scale
        pts = [(-a, -r), (a, -r), (a, -a), (r, -a), (r, a), (a, a), (a, r), (-a, r), (-a, a),
               (-r, a), (-r, -a), (-a, -a)]
        c = math.sqrt(0.5)   # rotated by 45 degrees
        d = "M" + "L".join(f"{_n(x + (px - py) * c)},{_n(y + (px + py) * c)}" for px, py in pts) + "Z"
    c = f' class="{cls}" data-x="{_n(x)}" data-y="{_n(y)}"' if cls else ""
    svg.add(f'<path{c} d="{d}" fill="{colour}" stroke="#000000" stroke-width="1"/>')


# --- the figures ----------------------------------------------------------------------------------

def _gaps(ax: _Axes, win: IterWindows) -> None:
    """Dotted break lines with "N it. hidden" above the plot where the windows leave a gap."""
    for x, hidden in win.gap_positions():
        px = float(ax.x(x))
        ax.svg.line(px, ax.y0, px, ax.y1, _GAP_GREY, 1, ":")
        ax.svg.text(px, ax.y0 - 4 - _px(7) * 1.2, f"{hidden} it.", 7, anchor="middle",
                    colour=_GAP_GREY)
        ax.svg.text(px, ax.y0 - 4, "hidden", 7, anchor="middle", colour=_GAP_GREY)


def _window_axis(ax: _Axes, win: IterWindows) -> None:
    xs, labels = win.ticks()
    ax.xticks(xs, labels)
    _gaps(ax, win)


def active_svg(v: ActiveView) -> bytes:
    """The active-requests figure (``figures.active_vs_expected``) as SVG."""
    svg = _Svg(_px(72 * (6.4 if v.overview is not None else 4.8)), v.title)
    svg.text(WIDTH / 2, 8 + _px(12), v.title, 12, anchor="middle", bold=True, cls="title")
    if v.empty:
        svg.text(WIDTH / 2, svg.height / 2, "no frames to draw", 10, anchor="middle")
        return svg.render()
    entries = [_Entry(h.label, line=(h.colour, h.style, 1.8)) for h in v.highlighted]
    if v.others_label:
        entries.append(_Entry(v.others_label, line=(_GREY_LINE, "-", 0.8)))
    if v.expected:
        entries.append(_Entry(v.expected_label, line=("#000000", "--", 1.2)))
    if v.cap is not None:
        entries.append(_Entry(v.cap_label, line=(CAP_COLOUR, ":", 1.5)))
    if v.leaks is not None:
        entries.append(_Entry(v.leaks.label, marker=("v", LEAK_COLOUR)))
    if v.crash is not None:
        entries.append(_Entry(v.crash.label, marker=("X", CRASH_COLOUR)))
    leg_w = _legend_size(entries, 8)[0]
    left, right = 80, WIDTH - leg_w - 22
    above = 30 if v.win.gap_positions() else 10      # room for the gap labels
    top = 20 + _px(12) + above
    bottom = svg.height - (16 + 2 * _px(8) + _px(10))
    if v.overview is not None:
        o_top = 20 + _px(12) + _px(9) + 10
        o_h = (bottom - o_top - 70) / 3.6
        _overview(svg, v, (left, o_top, right, o_top + o_h))
        top = o_top + o_h + 30 + _px(8) + above
    ax = _Axes(svg, (left, top, right, bottom), (-0.5, max(v.win.width, 1) - 0.5),
               (0.0, _y_top(v.y_max())))
    ticks = _int_ticks(ax.ylim[1])
    ax.yticks(ticks, [str(t) for t in ticks], grid=True)
    for s in v.grey:
        svg.path(ax.polyline(s.x, s.y), _GREY_LINE, 0.8, cls="rank")
    for s in v.expected:
        svg.path(ax.polyline(s.x, s.y), "#000000", 1.2, "--", cls="expected")
    if v.cap is not None:
        svg.line(left, float(ax.y(v.cap)), right, float(ax.y(v.cap)), CAP_COLOUR, 1.5, ":")
    for h in v.highlighted:
        for s in h.parts:
            svg.path(ax.steps_mid(s.x, s.y), h.colour, 1.8, h.style, cls=f"rank rank-{h.rank}")
    for m, kind, colour, cls in ((v.leaks, "v", LEAK_COLOUR, "leak"),
                                 (v.crash, "X", CRASH_COLOUR, "crash")):
        if m is not None:
            for x, y in zip(ax.x(m.x), ax.y(m.y)):
                _marker(svg, kind, float(x), float(y), colour, cls=cls)
    ax.frame()
    _window_axis(ax, v.win)
    ax.labels(X_LABEL, v.y_label)
    _legend(svg, entries, right + 8, top, 8)
    return svg.render()


def _overview(svg: _Svg, v: ActiveView, box) -> None:
    o = v.overview
    top = max([float(np.nanmax(o.y)) if len(o.y) else 1.0] + ([v.cap] if v.cap is not None else []))
    ax = _Axes(svg, box, o.xlim, (0.0, _y_top(top)))
    for first, last in o.segments:
        a = float(ax.x(max(first - 0.5, o.xlim[0])))
        b = float(ax.x(min(last + 0.5, o.xlim[1])))
        svg.rect(a, ax.y0, max(b - a, 1.0), ax.y1 - ax.y0, LEAK_COLOUR, extra=' fill-opacity="0.3"')
    svg.path(ax.polyline(o.x, o.y), "#0072b2", 0.8)
    if v.cap is not None:
        svg.line(ax.x0, float(ax.y(v.cap)), ax.x1, float(ax.y(v.cap)), CAP_COLOUR, 1.2, ":")
    ax.frame()
    yt = _int_ticks(ax.ylim[1], 4)
    ax.yticks(yt, [str(t) for t in yt], pt=7)
    lo, hi = o.xlim
    step = round_step(int(hi - lo), 8)
    xt = list(range(int(-(-lo // step) * step), int(hi) + 1, step))
    ax.xticks(xt, [str(t) for t in xt], pt=7)
    svg.text(ax.x0, ax.y0 - 5, o.title, 9)
    ax.labels(None, "active", pt=8, y_offset=40)
    entries = [_Entry("busiest rank", line=("#0072b2", "-", 0.8))]
    if v.cap is not None:
        entries.append(_Entry(f"cap = {v.cap}", line=(CAP_COLOUR, ":", 1.2)))
    _legend(svg, entries, ax.x1 + 8, ax.y0, 7)


def _cells(grid: np.ndarray) -> dict[int, list[tuple[int, int, int]]]:
    """Per category code, the runs ``(row, first column, length)`` of equal cells."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for row, values in enumerate(grid):
        codes = np.where(np.isnan(values), -1, values).astype(np.int64)
        edges = np.flatnonzero(np.diff(codes)) + 1
        starts = np.concatenate([[0], edges])
        ends = np.concatenate([edges, [len(codes)]])
        for a, b in zip(starts, ends):
            c = int(codes[a])
            if c >= 0:
                out.setdefault(c, []).append((row, int(a), int(b - a)))
    return out


def strip_svg(v: StripView) -> bytes:
    """The decision strip (``figures.decision_strip``) as SVG: one path per category and panel."""
    entries = [_Entry(STRIP_CATEGORIES[i][0], patch=(STRIP_CATEGORIES[i][1], None)) for i in v.used]
    cols = min(4, len(entries)) or 1
    leg_w, leg_h, _ = _legend_size(entries, 8, cols)
    svg = _Svg(_px(72 * v.height_in), v.title)
    svg.text(WIDTH / 2, 8 + _px(12), v.title, 12, anchor="middle", bold=True, cls="title")
    gaps = bool(v.win.gap_positions())
    above = _px(10) + 8 + (28 if gaps else 0)        # panel title, gap labels
    below = 16 + 2 * _px(8) + _px(10)                # tick labels, x label
    top = 16 + _px(12)
    room = svg.height - top - (leg_h + 16 if entries else 8) - len(v.panels) * (above + below)
    total_in = sum(p.height_in for p in v.panels) or 1
    left, right = 80, WIDTH - 30
    y = top
    for p in v.panels:
        h = max(room * p.height_in / total_in, 20)
        y0 = y + above
        if p.grid is None:
            svg.text(WIDTH / 2, y0 + h / 2, "no decisions", 10, anchor="middle")
            y = y0 + h + below
            continue
        ax = _Axes(svg, (left, y0, right, y0 + h), (-0.5, v.win.width - 0.5),
                   (len(p.ranks) - 0.5, -0.5))
        cw, rh = (right - left) / max(v.win.width, 1), h / max(len(p.ranks), 1)
        for code, runs in sorted(_cells(p.grid).items()):
            d = "".join(f"M{_n(left + c * cw)},{_n(y0 + r * rh)}h{_n(n * cw)}v{_n(rh)}h{_n(-n * cw)}z"
                        for r, c, n in runs)
            svg.add(f'<path class="cells-{code}" d="{d}" fill="{STRIP_CATEGORIES[code][1]}" '
                    'shape-rendering="crispEdges"/>')
        ax.frame()
        ax.yticks(list(p.ticked), [str(p.ranks[i]) for i in p.ticked], pt=8)
        _window_axis(ax, v.win)
        svg.text(left, y0 - 6 - (28 if gaps else 0), p.name, 10)
        ax.labels(X_LABEL, "rank")
        y = y0 + h + below
    if entries:
        _legend(svg, entries, (WIDTH - leg_w) / 2, svg.height - leg_h - 8, 8, cols)
    return svg.render()


def states_svg(v: StatesView) -> bytes:
    """The request-states figure (``figures.state_composition``) as SVG: stacked bars."""
    svg = _Svg(_px(72 * 4.8), v.title)
    svg.text(WIDTH / 2, 8 + _px(12), v.title, 12, anchor="middle", bold=True, cls="title")
    if v.message:
        svg.text(WIDTH / 2, svg.height / 2, v.message, 10, anchor="middle")
        return svg.render()
    entries = [_Entry(b.label, patch=(b.colour, b.hatch)) for b in v.bars]
    entries += [_Entry(ln.label, line=(ln.colour, ln.style, ln.width)) for ln in v.lines]
    leg_w = _legend_size(entries, 8)[0]
    left, right = 80, WIDTH - leg_w - 22
    top, bottom = 20 + _px(12) + 10, svg.height - (16 + 2 * _px(8) + _px(10))
    n = len(v.ranks)
    totals = np.sum([b.values for b in v.bars], axis=0) if v.bars else np.zeros(n)
    peak = max([float(totals.max()) if n else 0.0] + [ln.y for ln in v.lines])
    ax = _Axes(svg, (left, top, right, bottom), (-0.6, n - 0.4), (0.0, _y_top(peak)))
    ticks = _int_ticks(ax.ylim[1])
    ax.yticks(ticks, [str(t) for t in ticks], grid=True)
    bw = float(ax.x(0.4) - ax.x(-0.4))
    base = np.zeros(n)
    for b in v.bars:
        for i, val in enumerate(b.values):
            if val <= 0:
                continue
            x, y_hi, y_lo = float(ax.x(i - 0.4)), float(ax.y(base[i] + val)), float(ax.y(base[i]))
            svg.rect(x, y_hi, bw, y_lo - y_hi, b.colour, stroke="#4d4d4d", width=0.5)
            if b.hatch:
                svg.rect(x, y_hi, bw, y_lo - y_hi, svg.hatch(b.hatch))
        base = base + b.values
    for ln in v.lines:
        svg.line(left, float(ax.y(ln.y)), right, float(ax.y(ln.y)), ln.colour, ln.width, ln.style)
    ax.frame()
    ax.xticks(list(range(n)), [str(r) for r in v.ranks])
    ax.labels("rank", "requests in active_requests")
    _legend(svg, entries, right + 8, top, 8)
    return svg.render()
