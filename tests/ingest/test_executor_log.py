"""The executor-log parser reads every documented variant into the right typed rows (docs §8)."""
from __future__ import annotations

import datetime
import gzip
import io
import math
import random
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from forensics.readers import event_kinds
from forensics.readers.executor_log import parse_executor_log

from . import log_lines
from .test_line_accounting import REAL, assert_accounted, collect, write


def parse_pieces(tmp_path: Path, pieces: list[log_lines.Piece], **kw):
    text, where = log_lines.render(pieces)
    path = write(tmp_path, text, None)
    it, ev, un = assert_accounted(path, text.count("\n"), **kw)
    return it.to_pylist(), ev.to_pylist(), un.to_pylist(), where


def same(a, b) -> bool:
    if isinstance(b, float) and a is not None:
        return math.isclose(a, b)
    return a == b


@pytest.mark.parametrize("version", log_lines.VERSIONS)
@pytest.mark.parametrize("style", ["rank", "norank", "mpi_rank", "torch_rank", "none"])
def test_iteration_line_every_version_and_prefix(tmp_path, version, style):
    piece = log_lines.iteration(version, style, it=41, rank=3, nsched=7, host_ms=None)
    it, ev, un, _ = parse_pieces(tmp_path, [piece])
    assert len(it) == 1 and not ev and not un
    row = it[0]
    for col, want in piece.expect.items():
        if col == "extra":
            assert dict(row["extra"]) == want
        else:
            assert same(row[col], want), (col, row[col], want)


def test_iteration_fields_read_by_name_unknown_into_extra(tmp_path):
    body, _exp = log_lines.iteration_body(
        "V5", it=9, global_rank=6, rank=2, extra_states={"num_paused": 4},
        extra_fields={"num_active": 3, "num_fetched": 1, "num_dummy": 0, "num_unscheduled": 2})
    # shuffle the comma-separated top-level fields: parsing must not depend on position
    head, states = body.split(", states = ")
    fields = head.split(", ")
    random.Random(3).shuffle(fields[1:])
    text = ", ".join(fields) + ", states = " + states
    it, _, _, _ = parse_pieces(tmp_path, [log_lines.Piece([text], "iteration")])
    row = it[0]
    assert (row["iter"], row["rank"], row["local_rank"]) == (9, 6, 2)
    assert row["adp_dummy_gen_tokens"] == 1 and row["format"] == "V5"
    assert dict(row["extra"]) == {"states.num_paused": "4", "num_active": "3",
                                  "num_fetched": "1", "num_dummy": "0", "num_unscheduled": "2"}


def test_na_values_are_null_and_truncated_line_kept(tmp_path):
    lines = [("[11/30/2026-12:00:01] [TRT-LLM] [RANK 0] [I] iter = 1, global_rank = 0, rank = 0, "
             "num_scheduled_requests = 0, currank_total_requests = 0/0, host_step_time = N/A, "
             "prev_device_step_time = N/A, timestamp = 2026-11-30 12:00:01, kv_cache_util = N/A, "
             "states = {'num_ctx_requests': 0, 'num_c")]
    it, _, _, _ = parse_pieces(tmp_path, [log_lines.Piece(lines, "iteration")])
    row = it[0]
    assert row["host_step_time_ms"] is None and row["kv_cache_util"] is None
    assert row["format"] == "V4" and row["num_ctx_requests"] == 0
    assert dict(row["extra"]) == {"'num_c": None}


def test_numbers_too_large_for_their_column_are_kept_in_extra_not_fatal(tmp_path):
    """global_rank is int32 (at most 9 digits kept as a number), the cumulative counts int64 (18):
    larger values would overflow the cast, so they stay verbatim in ``extra``; a 19-digit iter
    cannot be an iteration line at all, so that line stays a plain logger event, text intact."""
    lines = [("[11/30/2026-12:00:01] [TRT-LLM] [RANK 3] [I] iter = 7, global_rank = 99999999999, "
              "rank = 0, currank_total_requests = 1/99999999999999999999, host_step_time = 1.5ms, "
              "prev_device_step_time = N/A, timestamp = 2026-11-30 12:00:01, "
              "num_scheduled_requests: 2, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
              "'num_generation_tokens': 2}"),
             "[11/30/2026-12:00:02] [TRT-LLM] [RANK 3] [I] iter = 1234567890123456789, rank = 0"]
    it, ev, _, _ = parse_pieces(tmp_path, [log_lines.Piece(lines, "iteration")])
    assert len(it) == 1
    row = it[0]
    assert (row["iter"], row["rank"], row["num_scheduled_requests"]) == (7, 3, 2)
    assert row["currank_requests"] is None and row["total_requests"] is None
    assert dict(row["extra"]) == {"global_rank": "99999999999",
                                  "currank_total_requests": "1/99999999999999999999"}
    assert [(e["kind"], e["message"]) for e in ev] == [("log", "iter = 1234567890123456789, rank = 0")]


def test_rank_from_global_rank_then_logger_then_launcher_else_null(tmp_path):
    pieces = [
        log_lines.Piece(["[11/30/2026-12:00:01] [TRT-LLM] [RANK 5] [I] iter = 1, rank = 1"], "x"),
        log_lines.Piece(["[1,7]<stderr>:iter = 2, rank = 1"], "x"),
        log_lines.Piece(["iter = 3, rank = 1"], "x"),
        log_lines.Piece(["3: iter = 4, global_rank = 2, rank = 1"], "x"),
    ]
    it, _, _, _ = parse_pieces(tmp_path, pieces)
    assert [r["rank"] for r in it] == [5, 7, None, 2]
    assert [r["local_rank"] for r in it] == [1, 1, 1, 1]


@pytest.mark.parametrize("style", ["rank", "norank", "mpi_rank", "torch_rank", "cpp", "glog",
                                   "pylogging"])
@pytest.mark.parametrize("launcher", [None, "srun", "mpirun"])
@pytest.mark.parametrize("quote", [False, True])
def test_generic_logger_lines_keep_severity_rank_time(tmp_path, style, launcher, quote):
    piece = log_lines.wrap(log_lines.generic(style, "W", rank=4), launcher=launcher, rank=2,
                           quote=quote)
    _, ev, un, _ = parse_pieces(tmp_path, [piece])
    assert not un and len(ev) == 1
    for col, want in piece.expect.items():
        assert ev[0][col] == want, (col, ev[0][col], want)
    assert ev[0]["kind"] == piece.kind


@pytest.mark.parametrize("make", [
    lambda: log_lines.surplus(5, 4, rank=1), lambda: log_lines.dummy_alloc_failed(rank=1),
    lambda: log_lines.dummy_no_kv_capacity(rank=1),
    lambda: log_lines.dummy_skipped(2, 0, rank=1), lambda: log_lines.kv_timeout(77, rank=1),
    lambda: log_lines.kv_error(1, 3, rank=1), lambda: log_lines.event_loop_error("x y", rank=1),
    lambda: log_lines.version_banner("0.20.0rc3"), lambda: log_lines.collector_timestamp(),
], ids=["surplus", "alloc", "no_kv_capacity", "skipped", "kv_timeout", "kv_error", "event_loop",
        "version", "collector"])
def test_known_messages_are_typed_events(tmp_path, make):
    piece = make()
    _, ev, un, _ = parse_pieces(tmp_path, [piece])
    assert not un and len(ev) == 1
    assert ev[0]["kind"] == piece.kind
    for col, want in piece.expect.items():
        assert ev[0][col] == want, (col, ev[0][col], want)


@pytest.mark.parametrize("form", log_lines.TRACEBACK_FORMS)
def test_traceback_forms_one_event_with_innermost_frame(tmp_path, form):
    lead = log_lines.logged("about to fail", "log", rank=6)
    tb = log_lines.traceback(form)
    tail = log_lines.iteration("V4", it=2, rank=6)
    _, ev, un, where = parse_pieces(tmp_path, [lead, tb, tail])
    assert not un
    (tb_ev,) = [e for e in ev if e["kind"] == tb.kind]
    lines = where[1][1]
    assert (tb_ev["line"], tb_ev["line_end"]) == (lines[0], lines[-1])
    assert tb_ev["rank"] == 6   # the rank of the prefixed line before it
    for col, want in tb.expect.items():
        assert tb_ev[col] == want, (col, tb_ev[col], want)


def test_interleaved_ranks_tracebacks_do_not_mix(tmp_path):
    """mpirun-tagged ranks 1 and 2 fail at once; their traceback lines alternate."""
    a = log_lines.wrap(log_lines.traceback("full", exc="KeyError", msg="1"), launcher="mpirun",
                       rank=1)
    b = log_lines.wrap(log_lines.traceback("thread", exc="ValueError", msg="2"),
                       launcher="mpirun", rank=2)
    lines = []
    for i in range(max(len(a.lines), len(b.lines))):
        lines += a.lines[i:i + 1] + b.lines[i:i + 1]
    path = write(tmp_path, "\n".join(lines) + "\n", None)
    _, ev, un = assert_accounted(path, len(lines))
    ev = ev.to_pylist()
    firsts = {e["rank"]: e for e in ev if e["kind"] == "traceback"}
    assert firsts[1]["exception_type"] == "KeyError" and firsts[1]["message"] == "1"
    assert firsts[2]["exception_type"] == "ValueError" and firsts[2]["message"] == "2"
    assert firsts[1]["innermost_function"] == firsts[2]["innermost_function"] == "func1"
    cont = [e for e in ev if e["kind"] == event_kinds.CONTINUED]
    assert {e["rank"] for e in cont} == {1, 2}
    assert un.num_rows == 0


def test_mpi_abort_banner_and_cpp_backtrace(tmp_path):
    _, ev, _un, _where = parse_pieces(tmp_path, [log_lines.mpi_abort(3),
                                               log_lines.generic("cpp", "E"),
                                               log_lines.cpp_backtrace(5)])
    kinds = [(e["kind"], e["line"], e["line_end"]) for e in ev]
    assert kinds == [("mpi_abort", 1, 8), ("cpp_log", 9, 9), ("cpp_backtrace", 10, 14)]
    assert ev[0]["rank"] == 3 and ev[0]["severity"] == "F"


def test_traceback_crossing_block_boundary(tmp_path):
    pieces = [log_lines.iteration("V3", it=i, rank=0) for i in range(5)]
    pieces.insert(3, log_lines.traceback("full", depth=6))
    _, ev, _, where = parse_pieces(tmp_path, pieces, block_bytes=300)
    (tb,) = [e for e in ev if e["kind"] == "traceback"]
    assert (tb["line"], tb["line_end"]) == (where[3][1][0], where[3][1][-1])
    assert tb["innermost_function"] == "func5"


def test_invalid_utf8_replaced_not_fatal(tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(b"ok line\nbad \xff\xfe byte\n")
    _, _, un = collect(p)
    assert un.column("text").to_pylist() == ["ok line", "bad \ufffd\ufffd byte"]


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_truncated_compressed_input_keeps_lines_and_adds_error(tmp_path, compression):
    lines = [log_lines.iteration("V4", it=i, rank=0).lines[0] for i in range(2000)]
    data = ("\n".join(lines) + "\n").encode()
    comp = gzip.compress(data) if compression == "gzip" else \
        zstandard.ZstdCompressor().compress(data)
    p = tmp_path / "cut.bin"
    p.write_bytes(comp[: len(comp) // 2])
    it, ev, un = collect(p)
    kept = it.num_rows + un.num_rows
    assert 0 < kept < 2000
    (err,) = ev.to_pylist()
    assert err["kind"] == "input_truncated" and err["severity"] == "E"
    assert err["line"] == kept + 1 and "truncated" in err["message"]
    # rows kept are exactly the first lines, in order, with correct iteration numbers
    assert it.column("iter").to_pylist()[:10] == list(range(10))


def test_progress_reports_compressed_bytes(tmp_path):
    lines = [log_lines.iteration("V5", it=i, rank=i % 4).lines[0] for i in range(3000)]
    p = tmp_path / "p.gz"
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    got = []
    list(parse_executor_log(p, "p", progress=got.append, block_bytes=10_000))
    assert sum(got) == p.stat().st_size and len(got) > 1


def test_threads_and_blocks_do_not_change_rows(tmp_path):
    rng = random.Random(7)
    streams = log_lines.random_streams(rng, 80, launcher="srun", ranks=3)
    text, _ = log_lines.render_interleaved(rng, streams)
    path = write(tmp_path, text, None)
    ref = collect(path, threads=1)
    for kw in ({"threads": 2, "block_bytes": 500}, {"threads": 1, "block_bytes": 3000}):
        got = collect(path, **kw)
        for a, b in zip(ref, got):
            assert a.sort_by("line").equals(b.sort_by("line"))


needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/samples absent")


@needs_real
def test_real_pr_3914_v1_and_v2():
    it, _, _ = collect(REAL / "trtllm_pr_3914.txt")
    rows = it.to_pylist()
    assert [r["format"] for r in rows] == ["V1", "V2"]
    assert [r["num_scheduled_requests"] for r in rows] == [None, 10]
    assert rows[0]["elapsed_time_s"] == pytest.approx(0.005060911178588867)
    assert rows[0]["num_generation_tokens"] == 16 and rows[0]["rank"] == 0


@needs_real
def test_real_dynamo_5095_truncated_v3_line_and_cpp_warnings():
    it, ev, _ = collect(REAL / "dynamo_issue_5095.txt")
    (row,) = it.to_pylist()
    assert (row["iter"], row["format"], row["log_time"]) == (
        4084, "V3", datetime.datetime(2025, 12, 25, 15, 6, 47))
    assert row["host_step_time_ms"] == pytest.approx(428.206682205)
    assert set(ev.column("kind").to_pylist()) == {"cpp_log"}
    assert set(ev.column("severity").to_pylist()) == {"W"}


@needs_real
@pytest.mark.parametrize("name", ["trtllm_pr_16161.txt", "trtllm_pr_17278.txt"])
def test_real_adp_assert_abridged_forms(name):
    _, ev, _ = collect(REAL / name)
    (e,) = [e for e in ev.to_pylist() if e["kind"] == "adp_assert"]
    assert e["innermost_function"] == "_pad_attention_dp_dummy_request"
    assert e["exception_type"] == "AssertionError"
    assert e["line_end"] == len((REAL / name).read_text().splitlines())


@needs_real
def test_real_mpi_abort_and_version_banner():
    _, ev, _ = collect(REAL / "trtllm_issue_3736.txt")
    (e,) = ev.to_pylist()
    assert (e["kind"], e["rank"], e["line_end"]) == ("mpi_abort", 0, 16)
    _, ev, _ = collect(REAL / "tensorrt_issue_4501.txt")
    versions = [e["version"] for e in ev.to_pylist() if e["kind"] == "version"]
    assert versions == ["0.20.0rc3"]


@needs_real
def test_real_tracebacks():
    _, ev, _ = collect(REAL / "trtllm_pr_3321.txt")
    (e,) = ev.to_pylist()
    assert (e["exception_type"], e["message"], e["innermost_line"]) == ("KeyError", "None", 151)
    _, ev, _ = collect(REAL / "trtllm_issue_15022.txt")
    kinds = [e["kind"] for e in ev.to_pylist()]
    assert kinds == ["traceback", "cpp_backtrace"]
    assert ev.to_pylist()[0]["exception_type"] == "RuntimeError"
    _, ev, _ = collect(REAL / "trtllm_issue_5820.txt")
    (tb,) = [e for e in ev.to_pylist() if e["kind"] == "traceback"]
    assert tb["innermost_file"].endswith("starlette/middleware/errors.py")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_not_quiet():
    from forensics.readers.progress import ingest_progress
    for stream, quiet in ((io.StringIO(), False), (_Tty(), True)):
        with ingest_progress(100, "x.log", quiet, stream=stream) as advance:
            advance(50)
        assert stream.getvalue() == ""
    tty = _Tty()
    with ingest_progress(100, "x.log", False, stream=tty) as advance:
        advance(60)
    assert "x.log" in tty.getvalue()


def _iterations_both_ways(path) -> tuple[pa.Table, pa.Table]:
    """The iterations of ``path`` read by the reference reader and by the compiled scanner."""
    from forensics.readers import native_scan
    if native_scan.kernel() is None:
        pytest.skip("numba not importable")
    return tuple(pa.concat_tables([b.iterations for b in parse_executor_log(
        path, "s", native=native)]) for native in (False, True))


def test_compiled_scanner_equals_reference_reader_on_every_variant(tmp_path):
    """The compiled scanner and the per-pair reader give the same rows for every variant, and
    an unreadable value stays in ``extra``."""
    rng = random.Random(11)
    texts = []
    for i in range(300):
        v = rng.choice(log_lines.VERSIONS)
        style = rng.choice(["rank", "norank", "mpi_rank", "torch_rank", "none"])
        kw = {"host_ms": rng.choice([None, 1.5, 20.125]), "kv": rng.choice([None, 0.25])}
        if rng.random() < 0.2:
            kw["extra_fields"] = {"num_active": rng.randint(0, 9)}
        if rng.random() < 0.2:
            kw["extra_states"] = {"num_paused": rng.randint(0, 9)}
        line = log_lines.iteration(v, style, it=i, rank=rng.randint(0, 7), **kw).lines[0]
        if rng.random() < 0.05:
            line = line.replace("global_rank = ", "global_rank = x")   # unreadable value
        if rng.random() < 0.05:   # same number of pairs, non-ASCII key / last value
            line = line.replace("global_rank = ", "глобальный = ").replace("}", "é")
        texts.append(log_lines.launcher_prefix(rng.choice(log_lines.LAUNCHERS), 3) + line)
    path = tmp_path / "x.log"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    slow, fast = _iterations_both_ways(path)
    assert slow.num_rows == 300
    assert fast.equals(slow)
    rows = slow.to_pylist()
    bad = [dict(r["extra"]) for r in rows if r["rank"] is None]
    assert any(e.get("global_rank", "").startswith("x") for e in bad)
    assert any("глобальный" in e for e in bad)


@pytest.mark.parametrize("sep", [" = {", ": {", " : {", " ={", "= {", "={", ":{", " :{"])
def test_both_readers_read_the_states_dict_alike(tmp_path, sep):
    """``states`` then a separator the per-pair reader does not split on (``states ={``) is no
    states dict there: the compiled scanner reads it the same way (the row must not depend on
    which reader the line went to)."""
    line = ("[07/09/2026-16:18:39] [TRT-LLM] [RANK 7] [E] iter = 9, global_rank = 7, rank = 7, "
            "num_scheduled_requests = 0, kv_cache_util = N/A, currank_total_requests = 0/0, "
            f"host_step_time = 5ms, states{sep}'num_ctx_requests': 2, 'num_ctx_tokens': 3, "
            "'num_generation_tokens': 4}")
    path = tmp_path / "x.log"
    path.write_text(line + "\n", encoding="utf-8")
    slow, fast = _iterations_both_ways(path)
    assert fast.equals(slow)
    dict_read = sep in (" = {", ": {", " : {")
    assert slow.column("num_ctx_requests").to_pylist() == [2 if dict_read else None]


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_multi_member_compressed_input_read_whole(tmp_path, compression):
    parts = [("\n".join(log_lines.iteration("V2", it=i * 10 + j, rank=0).lines[0]
                        for j in range(10)) + "\n").encode() for i in range(3)]
    comp = (gzip.compress if compression == "gzip"
            else zstandard.ZstdCompressor().compress)
    p = tmp_path / "multi.bin"
    p.write_bytes(b"".join(comp(x) for x in parts))
    it, ev, un = collect(p, block_bytes=100)
    assert it.column("iter").to_pylist() == list(range(30))
    assert ev.num_rows == 0 and un.num_rows == 0
