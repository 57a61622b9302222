"""Lone surrogate escapes in JSON (``"\\udcff"``, what ``json.dumps`` writes for an undecodable
byte) are kept as the escape the file wrote, on every reader path: no ``UnicodeEncodeError``.

Inputs are written by hand: ``\\udcff`` below is the six characters of the JSON escape in the
file; the value read back is those six characters too (a backslash, ``u``, ``dcff``)."""
from __future__ import annotations

from pathlib import Path

import pytest

import forensics
from forensics.readers import json_scan
from forensics.readers.surrogates import escaped, escaped_value

ESC = "\\udcff"          # the escape as the file spells it (6 characters)

RUN = ('{"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 2, "pp_size": 1, '
       '"max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": false, '
       '"overlap_scheduler": true, "build": "b' + ESC + '", "run_id": "run-' + ESC + '"}\n')
FRAME = '{{"kind": "frame", "iter": {i}, "rank": {r}, "requests": [{{"id": 1, "state": "GENERATION_IN_PROGRESS"}}]}}\n'
NOTE = '{"kind": "note", "iter": 1, "rank": 0, "message": "odd ' + ESC + ' byte"}\n'


def stats_line(it: int, ts: str, extra: str = "") -> str:
    return ('{"iter": %d, "attentionDpRank": 0, "numActiveRequests": 2, "timestamp": "%s"%s}\n'
            % (it, ts, extra))


PATHS = ["default", "native", "reference"]


@pytest.fixture(params=PATHS)
def reader_path(request, monkeypatch):
    if request.param == "default":
        monkeypatch.delenv(json_scan.PATH_ENV, raising=False)
    else:
        monkeypatch.setenv(json_scan.PATH_ENV, request.param)
    return request.param


def test_escaped_keeps_the_escape_and_leaves_valid_text():
    assert escaped("a\udcffb") == "a" + ESC + "b"
    assert escaped("\U0001f600 ok") == "\U0001f600 ok"      # a pair decoded is valid text
    assert escaped_value({"k\udcfe": ["x\udcff", 1]}) == {"k\\udcfe": ["x" + ESC, 1]}


def test_stats_timestamp_and_field_name_keep_the_escape(tmp_path, reader_path):
    p = tmp_path / "stats.jsonl"
    p.write_text(stats_line(1, "2026-01-01 00:00:01")
                 + stats_line(2, "07-09-2026 " + ESC, ', "kv' + ESC + '": 7')
                 + stats_line(3, "2026-01-01 00:00:03"))
    forensics.ingest([p], tmp_path / "ds")
    st = forensics.load(tmp_path / "ds").stats
    assert st["iter"].tolist() == [1, 2, 3]
    assert st["timestamp_text"].tolist()[1] == "07-09-2026 \\udcff"
    assert st["fields"].iloc[1] == {"kv\\udcff": 7.0}


def test_trace_run_id_build_and_note_keep_the_escape(tmp_path, reader_path):
    p = tmp_path / "trace.jsonl"
    p.write_text(RUN + FRAME.format(i=1, r=0) + NOTE + FRAME.format(i=1, r=1))
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert ds.runs["run"].tolist() == ["run-\\udcff"]
    assert ds.runs["build"].tolist() == ["b\\udcff"]
    assert ds.frames["rank"].tolist() == [0, 1]
    note = ds.events[ds.events["kind"] == "trace_note"]
    assert note["message"].tolist() == ["odd \\udcff byte"] and note["line"].tolist() == [3]


def test_docker_json_file_line_keeps_the_escape(tmp_path, reader_path):
    body = "[TRT-LLM] [RANK 0] [I] hello " + ESC
    p = tmp_path / "container.log"
    p.write_text('{"log":"first line\\n","stream":"stdout","time":"2026-01-01T00:00:00Z"}\n'
                 '{"log":"' + body + '\\n","stream":"stderr","time":"2026-01-01T00:00:01Z"}\n')
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    texts = ds.events["text"].tolist() + ds.unparsed["text"].tolist()
    assert any(t is not None and t.endswith("hello \\udcff") for t in texts), texts


def test_summary_and_postmortem_go_through(tmp_path):
    """The whole post-mortem over a trace whose run id holds the escape: no exit 4."""
    from click.testing import CliRunner

    from forensics.cli import cli

    d = tmp_path / "in"
    d.mkdir()
    (d / "trace.jsonl").write_text(RUN + FRAME.format(i=1, r=0) + FRAME.format(i=1, r=1))
    res = CliRunner().invoke(cli, ["postmortem", str(d), "-o", str(tmp_path / "r")])
    assert res.exit_code in (0, 1, 3), res.output
    # findings.json is JSON: the backslash of the kept escape is itself escaped there
    assert '"run-\\\\udcff"' in (tmp_path / "r" / "findings.json").read_text(encoding="utf-8")
