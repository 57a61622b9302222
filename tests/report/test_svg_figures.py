"""The report's SVG figures: well-formed, hand-worked positions and values, bounded on long runs."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd

from forensics.report import figure_data as F
from forensics.report import svg_figures as S

NS = {"s": "http://www.w3.org/2000/svg"}


def _parse(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert int(root.get("width")) == S.WIDTH and int(root.get("height")) > 300
    return root


def _texts(root, cls):
    return [t for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == cls]


def _axis_maps(root):
    """Pixel -> data maps of the main axis, from its tick labels (the last axis drawn)."""
    xt = {t.text: float(t.get("x")) for t in _texts(root, "xtick")}
    yt = {t.text: float(t.get("y")) for t in _texts(root, "ytick")}
    (a, xa), (b, xb) = sorted((int(k), v) for k, v in xt.items())[:2]
    (c, yc), (d, yd) = sorted((int(k), v) for k, v in yt.items())[:2]
    return (lambda px: a + (px - xa) * (b - a) / (xb - xa),
            lambda py: c + (py - yc) * (d - c) / (yd - yc), xt, yt)


def _points(d: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([-\d.]+),([-\d.]+)", d)]


def hand_worked():
    """Two ranks, iterations 0..4. Rank 0 active 1 1 2 2 1, rank 1 active 0 1 1 3 3; expected
    1 1 2 3 3 on both; iteration 2 is a fleet skip (rank 0 at batch 0, rank 1 padded: its dummy
    leaks); rank 1 crashes at iteration 3 holding 3 requests; cap 4."""
    d = pd.DataFrame({
        "iter": np.repeat(np.arange(5), 2), "rank": np.tile([0, 1], 5),
        "active": [1, 0, 1, 1, 2, 1, 2, 3, 1, 3], "expected": np.repeat([1, 1, 2, 3, 3], 2),
        "batch": [1, 1, 1, 1, 0, 1, 1, 1, 1, 1], "can_queue": [True] * 4 + [False] * 2 + [True] * 4,
        "padded": [False] * 5 + [True] + [False] * 4,
        "carried_dummy": [False] * 7 + [True, False, True],
        "crash": [False] * 7 + [True, False, False]})
    leaks = F.leaks_frame([{"rank": 1, "iter_created": 2, "iter_skipped": 2, "cause_ranks": [0]}])
    return d, leaks, {"iter": 3, "rank": 1, "active": 3}


def test_active_svg_hand_worked():
    d, leaks, crash = hand_worked()
    root = _parse(S.active_svg(F.active_view(d, leaks=leaks, crash=crash, cap=4, title="T <&>")))
    assert [t.text for t in _texts(root, "title")] == ["T <&>"]
    assert [t.text for t in _texts(root, "legend")] == [
        "rank 0 (zero batch)", "rank 1 (1 leak, crash)", "expected_num_active_requests",
        "cap = 4 (max_num_active_requests)", "dummy leaks (fleet skipped)", "crash (rank 1, iter 3)"]
    to_it, to_val, xt, yt = _axis_maps(root)
    assert sorted(xt, key=int) == ["0", "1", "2", "3", "4"]
    assert sorted(yt, key=int) == ["0", "1", "2", "3", "4"]     # a count from 0, to the cap
    paths = list(root.iter("{http://www.w3.org/2000/svg}path"))
    (cr,) = [p for p in paths if p.get("class") == "crash"]
    assert (float(cr.get("data-x")), float(cr.get("data-y"))) == (xt["3"], yt["3"])
    (lk,) = [p for p in paths if p.get("class") == "leak"]
    assert (float(lk.get("data-x")), float(lk.get("data-y"))) == (xt["2"], yt["1"])
    (exp,) = [p for p in paths if p.get("class") == "expected"]
    assert [(round(to_it(x), 1), round(to_val(y), 1)) for x, y in _points(exp.get("d"))] == [
        (0, 1), (1, 1), (2, 2), (3, 3), (4, 3)]
    (r1,) = [p for p in paths if p.get("class") == "rank rank-1"]
    # steps-mid: each value held from half-way before to half-way after its iteration
    pts = [(round(to_it(x), 1), round(to_val(y), 1)) for x, y in _points(r1.get("d"))]
    assert pts == [(0, 0), (0.5, 0), (0.5, 1), (1.5, 1), (1.5, 1), (2.5, 1), (2.5, 3), (3.5, 3),
                   (3.5, 3), (4, 3)]


def _cells(path) -> list[tuple[float, float, float, float]]:
    return [tuple(map(float, m)) for m in
            re.findall(r"M([-\d.]+),([-\d.]+)h([-\d.]+)v([-\d.]+)", path.get("d"))]


def test_strip_svg_hand_worked():
    """Codes of the hand-worked run: iteration 2 rank 0 zero batch, rank 1 padded then skipped,
    iteration 3 rank 1 the crash; one path per category present."""
    d, leaks, crash = hand_worked()
    root = _parse(S.strip_svg(F.strip_view({"prefix-2026": d}, leaks=leaks, crash=crash)))
    paths = {p.get("class"): p for p in root.iter("{http://www.w3.org/2000/svg}path")
             if (p.get("class") or "").startswith("cells-")}
    names = [F.STRIP_CATEGORIES[int(k.split("-")[1])][0] for k in paths]
    assert sorted(names) == sorted(["ran", "padded, then skipped: dummy leaks",
                                    "zero batch (forces the skip)", "crash",
                                    "carrying a leaked dummy"])
    xt = {t.text: float(t.get("x")) for t in _texts(root, "xtick")}
    yt = {t.text: float(t.get("y")) for t in _texts(root, "ytick")}
    (x, y, w, h), = _cells(paths["cells-6"])            # the crash: one cell
    assert abs(x + w / 2 - xt["3"]) < 0.2 and abs(y + h / 2 - yt["1"]) < 0.2
    (x, y, w, h), = _cells(paths["cells-5"])            # zero batch: rank 0 at 2
    assert abs(x + w / 2 - xt["2"]) < 0.2 and abs(y + h / 2 - yt["0"]) < 0.2
    # rank 1 carries the dummy at 4 only (at 3 the crash wins)
    (x, y, w, h), = _cells(paths["cells-3"])
    assert abs(x + w / 2 - xt["4"]) < 0.2 and abs(y + h / 2 - yt["1"]) < 0.2
    # "ran" on rank 0: iterations 0-1 and 3-4 (two runs merged from four cells)
    ran = [c for c in _cells(paths["cells-0"]) if abs(c[1] + c[3] / 2 - yt["0"]) < 0.2]
    assert len(ran) == 2 and all(abs(c[2] - 2 * (xt["1"] - xt["0"])) < 0.2 for c in ran)
    legend = [t.text for t in _texts(root, "legend")]
    assert legend == [F.STRIP_CATEGORIES[i][0] for i in (0, 3, 4, 5, 6)]


def test_states_svg_labels_and_hatches():
    req = pd.DataFrame({"rank": [0, 0, 1, 2], "state": [13, 14, 10, 14], "dummy": [False] * 4})
    data = S.states_svg(F.states_view(req, iteration=7, leaked_dummies={2: 1}, expected=2, cap=2))
    root = _parse(data)
    labels = [t.text for t in _texts(root, "legend")]
    assert "GENERATION_TO_COMPLETE" in labels and "ADP dummy leaked (replay)" in labels
    assert "expected_num_active_requests = 2 (= the cap)" in labels
    assert [t.text for t in _texts(root, "xtick")] == ["0", "1", "2"]
    assert root.find("s:defs/s:pattern", NS) is not None     # the leaked dummy is hatched
    empty = _parse(S.states_svg(F.states_view(req.iloc[:0], iteration=9)))
    assert "no requests recorded at iteration 9" in ET.tostring(empty, encoding="unicode")


def _long(iters: int, ranks: int) -> pd.DataFrame:
    it = np.repeat(np.arange(iters), ranks)
    rk = np.tile(np.arange(ranks), iters)
    skip = it % 997 == 0
    return pd.DataFrame({"iter": it, "rank": rk, "active": (it * 7 + rk) % 9, "expected": 8,
                         "batch": np.where(skip & (rk == 3), 0, 1), "can_queue": ~skip,
                         "padded": skip & (rk == 5), "crash": (it == iters - 1) & (rk == 5)})


def test_long_run_svgs_are_bounded():
    """100k iterations x 32 ranks (3.2M decisions, a skip every 997 iterations): a few hundred
    elements and a few hundred kB, not one element per decision."""
    d = _long(100_000, 32)
    leaks = F.leaks_frame([{"rank": 5, "iter_created": i, "iter_skipped": i, "cause_ranks": [3]}
                           for i in range(0, 100_000, 997)])
    crash = {"iter": 99_999, "rank": 5, "active": 1}
    active = S.active_svg(F.active_view(d, leaks=leaks, crash=crash, cap=8))
    strip = S.strip_svg(F.strip_view({"a": d, "b": d.assign(can_queue=True)}, leaks=leaks,
                                     crash=crash))
    for data in (active, strip):
        root = _parse(data)
        assert sum(1 for _ in root.iter()) < 1000 and len(data) < 600_000
    root = _parse(active)
    over = [t for t in root.iter("{http://www.w3.org/2000/svg}text")
            if (t.text or "").startswith("whole run")]
    assert over                                                # the overview of the whole run
    assert any((t.text or "").endswith("it.") for t in root.iter("{http://www.w3.org/2000/svg}text"))
