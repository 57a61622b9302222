"""A plain (uncompressed) trace or stats file cut mid-line (its writer killed) reads as its
readable prefix plus one ``input_truncated`` event, as a cut ``.gz``/``.zst`` does; and a
post-mortem goes on with every readable input, naming the one it could not read."""
from __future__ import annotations

import forensics

RUN = ('{"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 2, "pp_size": 1, '
       '"max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": false, '
       '"overlap_scheduler": true, "build": "b", "run_id": "r"}\n')
FRAME = ('{{"kind": "frame", "iter": {i}, "rank": {r}, "requests": '
         '[{{"id": 1, "state": "GENERATION_IN_PROGRESS"}}]}}\n')
STATS = '{{"iter": {i}, "attentionDpRank": 0, "numActiveRequests": 2}}\n'


def frames(n: int) -> str:
    return "".join(FRAME.format(i=i // 2, r=i % 2) for i in range(n))


def test_plain_trace_cut_mid_line_keeps_the_prefix_and_says_truncated(tmp_path):
    p = tmp_path / "trace.jsonl"
    cut = FRAME.format(i=2, r=0)[:25]
    p.write_text(RUN + frames(4) + cut)          # lines 1-5 whole, line 6 cut
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.frames) == 4 and ds.frames["line"].tolist() == [2, 3, 4, 5]
    assert ds.unparsed["text"].tolist() == [cut] and ds.unparsed["line"].tolist() == [6]
    (ev,) = ds.events.itertuples()
    assert ev.kind == "input_truncated" and ev.line == 7
    assert "ends inside a line" in ev.message


def test_plain_trace_whose_last_record_lacks_only_its_newline_is_read_whole(tmp_path):
    p = tmp_path / "trace.jsonl"
    p.write_text(RUN + frames(3) + FRAME.format(i=1, r=1).rstrip("\n"))
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.frames) == 4 and len(ds.events) == 0 and len(ds.unparsed) == 0


def test_plain_stats_cut_mid_line_keeps_the_prefix_and_says_truncated(tmp_path):
    p = tmp_path / "stats.jsonl"
    p.write_text(STATS.format(i=1) + STATS.format(i=2) + STATS.format(i=3)[:12])
    forensics.ingest([p], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert ds.stats["iter"].tolist() == [1, 2]
    assert ds.unparsed["line"].tolist() == [3]
    assert ds.events["kind"].tolist() == ["input_truncated"]


def test_a_trace_cut_before_its_run_record_is_refused_with_the_reason(tmp_path):
    """Nothing readable at all: refused, naming the file (the ingest of it alone fails)."""
    p = tmp_path / "trace.jsonl"
    p.write_text(RUN[:40])
    log = tmp_path / "rank0.log"
    log.write_text("[TRT-LLM] [RANK 0] [I] hello\n")
    report = forensics.ingest([log, p], tmp_path / "ds", keep_going=True)
    assert [r.name for r in report.refused] == [str(p)]
    assert "run record" in report.refused[0].reason
