"""JSON of any depth is kept as unparsed or refused naming file and line, never a crash.

Issue 13: stats JSON nested 20,000 deep killed the ingest with a segfault (exit 139, inside the
native JSON reader) and 5,000 deep with a ``RecursionError`` traceback. Each case runs the CLI in
a subprocess, as a user would, so that a segfault fails the test instead of killing pytest.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import forensics
from forensics.readers import json_scan

REPO = Path(__file__).resolve().parents[2]
RUN_LINE = (REPO / "traces" / "samples" / "healthy" / "trace.jsonl").read_text().splitlines()[0]
DEPTHS = [990, 5000, 20000]


def _deep(depth: int, kind: str = "object") -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"b": ' * depth + "1" + "}" * depth


def _ingest(path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "forensics", "ingest", str(path), "-o", str(out),
                           "-q", *extra], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("nest", ["object", "list"])
def test_deep_stats_line_kept_in_unparsed(depth, nest, tmp_path):
    path = tmp_path / "stats.jsonl"
    path.write_text(f'{{"iter": 1, "x": 2}}\n{{"iter": 2, "a": {_deep(depth, nest)}}}\n{{"iter": 3}}\n')
    proc = _ingest(path, tmp_path / "ds")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    ds = forensics.load(tmp_path / "ds")
    # json.loads decodes the 990-deep line of lists (no recursion limit hit) but not the rest
    rows = ds.stats[["line", "iter"]].to_dict("records")
    unparsed = ds.unparsed["line"].tolist()
    assert sorted([r["line"] for r in rows] + unparsed) == [1, 2, 3]
    assert {"line": 1, "iter": 1} in rows and {"line": 3, "iter": 3} in rows
    if unparsed:
        assert unparsed == [2] and len(ds.unparsed["text"].iloc[0]) > 2 * depth


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_first_line_detected_and_kept(depth, tmp_path):
    """A deep first line: kind detection, the fast path and the per-object reader all hold."""
    path = tmp_path / "stats.jsonl"
    path.write_text(_deep(depth) + '\n{"iter": 3}\n')
    proc = _ingest(path, tmp_path / "ds", "--kind", "stats")
    assert proc.returncode == 0, proc.stderr
    ds = forensics.load(tmp_path / "ds")
    assert ds.stats["line"].tolist() == [2] and ds.unparsed["line"].tolist() == [1]


@pytest.mark.parametrize("depth", [5000, 20000])
def test_deep_object_in_stats_array_refused_with_file_and_line(depth, tmp_path):
    path = tmp_path / "stats.json"
    path.write_text(f'[\n{{"iter": 1}},\n{{"iter": 2, "a": {_deep(depth)}}}\n]\n')
    proc = _ingest(path, tmp_path / "ds")
    assert proc.returncode == 2
    assert "stats.json:3: malformed IterationStats JSON array: object nested too deeply" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "ds").exists()


@pytest.mark.parametrize("depth", [5000, 20000])
def test_deep_trace_record_refused_with_file_and_line(depth, tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text(RUN_LINE + '\n{"kind": "frame", "iter": 0, "rank": 0, "requests": [], "a": '
                    + _deep(depth) + "}\n")
    proc = _ingest(path, tmp_path / "ds")
    assert proc.returncode == 2
    assert "trace.jsonl:2: not a JSON object (nested too deeply)" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("depth", [5000, 20000])
@pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")
def test_compiled_paths_decline_deep_blocks(depth, monkeypatch):
    """In-process too: the compiled scanner declines (the per-object readers decide)."""
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    deep = _deep(depth).encode()
    assert json_scan.stats(b'{"iter": 1, "a": ' + deep + b"}\n", 1, "s") is None
    frame = b'{"kind": "frame", "iter": 0, "rank": 0, "requests": [], "a": ' + deep + b"}\n"
    assert json_scan.frames(frame, 2, 4) is None
    assert json.loads(b'{"kind": "frame", "iter": 0, "rank": 0, "requests": []}')  # sanity


def test_flatten_any_depth_json_decodes():
    """The per-object flattening has no recursion limit of its own (order kept)."""
    from forensics.readers.stats_json import flatten_numeric
    obj: dict = {"z": 1}
    for _ in range(3000):
        obj = {"a": obj, "n": 2}
    flat = flatten_numeric({"first": 0, "deep": obj, "last": True})
    keys = list(flat)
    assert keys[0] == "first" and keys[-1] == "last" and len(keys) == 3000 + 3
    assert keys[1] == "deep." + "a." * 3000 + "z" and keys[2] == "deep." + "a." * 2999 + "n"
