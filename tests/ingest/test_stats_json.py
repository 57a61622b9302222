"""Iteration-stats JSON reader: layouts, typed columns, flattening, bad input, line accounting."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest
import zstandard

from forensics.errors import StatsFormatError
from forensics.readers import stats_json
from forensics.readers.stats_json import read_stats, stats_row


def _stats(i: int, rank: int | None = None) -> dict:
    d = {
        "iter": i, "timestamp": f"11/30/2026-10:00:{i:02d}", "iterLatencyMS": 12.5 + i,
        "numActiveRequests": 3, "numQueuedRequests": 1, "numCompletedRequests": i,
        "maxNumActiveRequests": 8, "cpuMemUsage": 100, "schedulerMode": "guaranteed",
        "kvCacheStats": {"usedNumBlocks": 7 + i, "freeNumBlocks": 100},
        "inflightBatchingStats": {"numContextRequests": 1, "numGenRequests": 2,
                                  "numScheduledRequests": 3, "numPausedRequests": 0,
                                  "numCtxTokens": 128, "microBatchId": 0},
    }
    if rank is not None:
        d["attentionDpRank"] = rank
    return d


def _read(path, source="s.json"):
    batches = list(read_stats(path, source))
    cat = lambda name: pa.concat_tables([getattr(b, name) for b in batches])
    return cat("stats"), cat("events"), cat("unparsed")


def _covered(stats: pa.Table, events: pa.Table, unparsed: pa.Table) -> list[int]:
    lines: list[int] = []
    for t in (stats, events):
        for a, b in zip(t.column("line").to_pylist(), t.column("line_end").to_pylist()):
            lines.extend(range(a, b + 1))
    lines.extend(unparsed.column("line").to_pylist())
    return sorted(lines)


def test_typed_columns_and_flattened_fields():
    row = stats_row(_stats(5, rank=2))
    assert (row["iter"], row["rank"], row["timestamp"]) == (5, 2, "11/30/2026-10:00:05")
    assert row["num_active_requests"] == 3 and row["num_queued_requests"] == 1
    assert row["num_completed_requests"] == 5 and row["max_num_active_requests"] == 8
    assert (row["num_context_requests"], row["num_gen_requests"], row["num_scheduled_requests"],
            row["num_paused_requests"], row["num_ctx_tokens"]) == (1, 2, 3, 0, 128)
    assert row["iter_latency_ms"] == 17.5
    assert row["host_step_time_ms"] is None and row["prev_device_step_time_ms"] is None
    fields = dict(row["fields"])
    # every other numeric field, dotted; typed ones and strings are not repeated
    assert fields == {"cpuMemUsage": 100.0, "kvCacheStats.usedNumBlocks": 12.0,
                      "kvCacheStats.freeNumBlocks": 100.0, "inflightBatchingStats.microBatchId": 0.0}


def test_rank_null_without_attention_dp_and_odd_values_kept_in_fields():
    row = stats_row({"iter": 1, "numActiveRequests": 2.5, "flag": True, "xs": [4, {"y": 5}]})
    assert row["rank"] is None
    assert row["num_active_requests"] is None          # not an integer: not typed ...
    assert dict(row["fields"]) == {"numActiveRequests": 2.5, "flag": 1.0, "xs.0": 4.0,
                                   "xs.1.y": 5.0}     # ... but kept in fields


def test_pretty_array_rows_span_object_lines(tmp_path):
    p = tmp_path / "stats.json"
    p.write_text(json.dumps([_stats(0, 0), _stats(0, 1), _stats(1, 0)], indent=2) + "\n")
    stats, events, unparsed = _read(p)
    n_lines = len(p.read_text().splitlines())
    obj_lines = len(json.dumps(_stats(0, 0), indent=2).splitlines())  # as nested in the array
    assert stats.column("iter").to_pylist() == [0, 0, 1]
    assert stats.column("rank").to_pylist() == [0, 1, 0]
    assert stats.column("line").to_pylist() == [2, 2 + obj_lines, 2 + 2 * obj_lines]
    assert stats.column("line_end").to_pylist() == [1 + obj_lines, 1 + 2 * obj_lines,
                                                    1 + 3 * obj_lines]
    # '[' and ']' lines belong to no object: unparsed, verbatim
    assert unparsed.to_pylist() == [{"source": "s.json", "line": 1, "text": "["},
                                    {"source": "s.json", "line": n_lines, "text": "]"}]
    assert events.num_rows == 0
    assert _covered(stats, events, unparsed) == list(range(1, n_lines + 1))


def test_compact_one_line_array(tmp_path):
    p = tmp_path / "stats.json"
    p.write_text(json.dumps([_stats(0), _stats(1)]))
    stats, events, unparsed = _read(p)
    assert stats.column("line").to_pylist() == [1, 1]
    assert unparsed.num_rows == 0 and events.num_rows == 0


def test_json_lines_bad_line_goes_to_unparsed(tmp_path):
    p = tmp_path / "stats.jsonl"
    lines = [json.dumps(_stats(0, 0)), "not json at all", json.dumps(_stats(1, 0)), "",
             "[1, 2]", '{"iter": 2, "broken": }', json.dumps(_stats(3, 1))]
    p.write_text("\n".join(lines) + "\n")
    stats, events, unparsed = _read(p, "x.jsonl")
    assert stats.column("line").to_pylist() == [1, 3, 7]
    assert stats.column("line").to_pylist() == stats.column("line_end").to_pylist()
    assert stats.column("iter").to_pylist() == [0, 1, 3]
    assert unparsed.column("line").to_pylist() == [2, 4, 5, 6]
    assert unparsed.column("text").to_pylist() == ["not json at all", "", "[1, 2]",
                                                   '{"iter": 2, "broken": }']
    assert _covered(stats, events, unparsed) == list(range(1, 8))


def test_malformed_object_in_array_names_file_and_line(tmp_path):
    p = tmp_path / "stats.json"
    p.write_text('[\n  {"iter": 0},\n  {"iter": 1,\n   "x": oops},\n  {"iter": 2}\n]\n')
    with pytest.raises(StatsFormatError) as e:
        _read(p, "bad.json")
    assert e.value.path == "bad.json" and e.value.line == 4
    assert str(e.value).startswith("bad.json:4: malformed IterationStats JSON array")


def test_array_element_not_object_is_an_error(tmp_path):
    p = tmp_path / "stats.json"
    p.write_text('[\n  {"iter": 0},\n  7\n]\n')
    with pytest.raises(StatsFormatError) as e:
        _read(p, "bad.json")
    assert e.value.line == 3 and "not a JSON object" in e.value.message


def test_file_ending_inside_array_keeps_complete_objects(tmp_path):
    text = json.dumps([_stats(0), _stats(1), _stats(2)], indent=2)
    cut = text[: text.rindex('"iter": 2') + 5]    # killed while writing the third object
    p = tmp_path / "stats.json"
    p.write_text(cut)
    stats, events, unparsed = _read(p)
    n_lines = len(cut.splitlines())
    assert stats.column("iter").to_pylist() == [0, 1]
    assert events.column("kind").to_pylist() == ["input_truncated"]
    assert events.column("severity").to_pylist() == ["E"]
    assert events.column("line").to_pylist() == [n_lines + 1]     # one past the last line read
    # the incomplete third object's lines are kept verbatim
    assert unparsed.column("text").to_pylist()[-1] == cut.splitlines()[-1]
    assert _covered(stats, events.slice(0, 0), unparsed) == list(range(1, n_lines + 1))


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    body = "\n".join(json.dumps(_stats(i, i % 4)) for i in range(3000)).encode()
    data = gzip.compress(body)
    p = tmp_path / "stats.jsonl.gz"
    p.write_bytes(data[: len(data) * 2 // 3])
    stats, events, unparsed = _read(p)
    assert 100 < stats.num_rows < 3000
    assert stats.column("iter").to_pylist() == list(range(stats.num_rows))
    assert events.column("kind").to_pylist() == ["input_truncated"]
    assert "decompression stopped" in events.column("message")[0].as_py()


def test_zstd_and_invalid_utf8(tmp_path):
    good = json.dumps(_stats(0)).encode()
    bad = b'{"iter": 1, "timestamp": "caf\xe9\xff"}'
    p = tmp_path / "stats.jsonl.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(good + b"\n" + bad + b"\n"))
    stats, events, unparsed = _read(p)
    assert stats.column("iter").to_pylist() == [0, 1]
    assert stats.column("timestamp").to_pylist()[1] == "caf\ufffd\ufffd"
    assert events.num_rows == 0 and unparsed.num_rows == 0


def test_streams_in_bounded_batches_across_chunks(tmp_path, monkeypatch):
    """Objects straddling read chunks decode whole; batches stay small."""
    monkeypatch.setattr(stats_json, "READ_BYTES", 97)
    monkeypatch.setattr(stats_json, "CHUNK_CHARS", 97)
    monkeypatch.setattr(stats_json, "BATCH_ROWS", 10)
    p = tmp_path / "stats.json"
    objs = [_stats(i, i % 2) for i in range(45)]
    p.write_text(json.dumps(objs, indent=1) + "\n")
    batches = list(read_stats(p, "s"))
    assert max(b.stats.num_rows for b in batches) <= 10
    stats = pa.concat_tables([b.stats for b in batches])
    assert stats.column("iter").to_pylist() == list(range(45))
    n_lines = len(p.read_text().splitlines())
    unparsed = pa.concat_tables([b.unparsed for b in batches])
    assert _covered(stats, stats.slice(0, 0), unparsed) == list(range(1, n_lines + 1))


def test_progress_reports_bytes_on_disk(tmp_path):
    p = tmp_path / "stats.jsonl"
    p.write_text("\n".join(json.dumps(_stats(i)) for i in range(50)) + "\n")
    seen: list[int] = []
    list(read_stats(p, "s", progress=seen.append))
    assert seen and sum(seen) == p.stat().st_size      # deltas adding up to the file size
    assert all(n > 0 for n in seen)


def test_truncated_zstd_is_detected_even_at_a_line_boundary(tmp_path):
    """zstd's stream reader ends silently on a cut; the reader must still say so."""
    part = lambda r: "".join(json.dumps(_stats(i)) + "\n" for i in r).encode()
    cctx = zstandard.ZstdCompressor()
    second = cctx.compress(part(range(100, 200)))
    p = tmp_path / "stats.jsonl.zst"
    p.write_bytes(cctx.compress(part(range(100))) + second[:12])   # frame 2 cut after its header
    stats, events, unparsed = _read(p)
    assert stats.column("iter").to_pylist() == list(range(100))
    assert unparsed.num_rows == 0
    assert events.column("kind").to_pylist() == ["input_truncated"]
    assert events.column("line").to_pylist() == [101]
    assert "zstd stream truncated" in events.column("message")[0].as_py()


def test_stats_timestamps_are_typed_and_unparsed_text_kept(tmp_path):
    """IterationStats print ``MM-DD-YYYY HH:MM:SS`` (the process's local clock): a timestamp
    column; a time in another shape stays verbatim in ``timestamp_text``."""
    import pandas as pd

    import forensics
    p = tmp_path / "stats.jsonl"
    p.write_text('{"iter": 1, "timestamp": "07-09-2026 16:18:39", "numActiveRequests": 2}\n'
                 '{"iter": 2, "timestamp": "yesterday noon", "numActiveRequests": 3}\n')
    forensics.ingest([p], tmp_path / "ds")
    st = forensics.load(tmp_path / "ds").stats.sort_values("iter")
    assert st["timestamp"].iloc[0] == pd.Timestamp("2026-07-09 16:18:39")
    assert pd.isna(st["timestamp"].iloc[1]) and st["timestamp_text"].iloc[1] == "yesterday noon"
    assert pd.isna(st["timestamp_text"].iloc[0])
