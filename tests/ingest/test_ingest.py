"""The ingest entry point: discovery, kind detection, atomicity, determinism, bad inputs, caching."""
from __future__ import annotations

import gc
import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import xxhash
import zstandard

import forensics
from forensics.dataset.schema import TABLES
from forensics.errors import DatasetError, InputError, TraceFormatError
from forensics.readers import discover, ingest
from forensics.readers.dataset_cache import as_dataset
from forensics.readers.kinds import detect_kind, recognised

SHARED = Path(__file__).resolve().parents[3] / "shared"
REAL_LOGS = SHARED / "samples" / "real-logs"

PREFIX = "[11/30/2026-10:00:{s:02d}] [TRT-LLM] [RANK {r}] [I] "
ITER_V3 = ("iter = {i}, global_rank = {r}, rank = {r}, currank_total_requests = 3/9, "
           "host_step_time = 12.5ms, prev_device_step_time = 10.25ms, "
           "timestamp = 2026-11-30 10:00:{s:02d}, num_scheduled_requests: 2, "
           "states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 2}}")


def log_text(rank: int, iters: range) -> str:
    lines = [PREFIX.format(s=i % 60, r=rank) + ITER_V3.format(i=i, r=rank, s=i % 60) for i in iters]
    lines.insert(1, "some line nobody understands")
    return "\n".join(lines) + "\n"


def stats_text(iters: range, ranks: int = 2) -> str:
    return "\n".join(json.dumps({"iter": i, "attentionDpRank": r, "numActiveRequests": 2,
                                 "inflightBatchingStats": {"numScheduledRequests": 1}})
                     for i in iters for r in range(ranks)) + "\n"


RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": True,
       "overlap_scheduler": False, "build": "prefix-2026", "run_id": "run-a"}


def trace_text(rank: int, iters: range, run: dict = RUN) -> str:
    recs = [dict(run, rank=rank)] + [
        {"kind": "frame", "iter": i, "rank": rank,
         "requests": [{"id": 10 + i, "state": "GENERATION_IN_PROGRESS"}]} for i in iters]
    return "\n".join(json.dumps(r) for r in recs) + "\n"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A run directory: two rank logs (one zstd), a stats file, per-rank traces, junk."""
    d = tmp_path / "run"
    (d / "logs").mkdir(parents=True)
    (d / "logs" / "rank0.log").write_text(log_text(0, range(1, 6)))
    (d / "logs" / "rank1.log.zst").write_bytes(
        zstandard.ZstdCompressor().compress(log_text(1, range(1, 6)).encode()))
    (d / "iteration_stats.json").write_text(stats_text(range(5)))
    (d / "traces").mkdir()
    for r in range(2):
        (d / "traces" / f"rank-{r}.jsonl").write_text(trace_text(r, range(3)))
    (d / "core.1234").write_bytes(b"\x7fELF\x00\x00")        # not recognised: skipped
    (d / ".hidden.log").write_text("hidden\n")                # hidden: skipped
    return d


def read_tables(path: Path) -> dict:
    return {t: pq.read_table(path / t) for t in TABLES}  # a table by path: its directory


# --- discovery and kinds ---------------------------------------------------------------------

def test_recognised_names():
    assert recognised("a/rank0.log") and recognised("x.LOG.GZ") and recognised("s.jsonl.zst")
    assert recognised("slurm-12.out") and recognised("w.stderr") and recognised("stats.json")
    assert not recognised("core.1234") and not recognised("model.bin")
    assert not recognised(".hidden.log") and not recognised("x.gz")


def test_detect_kind_by_content():
    assert detect_kind('[\n  {"iter": 1}') == "stats"
    assert detect_kind('[{"iter": 1}]') == "stats"
    assert detect_kind("[]") == "stats"
    assert detect_kind('{"iter": 1, "numActiveRequests": 2}\n') == "stats"
    assert detect_kind(json.dumps(RUN) + "\n") == "trace"
    assert detect_kind('{"kind": "frame", "iter": 1, "rank": 0, "requests": []}') == "trace"
    assert detect_kind(PREFIX.format(s=0, r=0) + "iter = 1") == "log"
    assert detect_kind("[TensorRT-LLM][WARNING] foo") == "log"
    assert detect_kind("") == "log"


def test_discover_walks_sorted_and_skips(inputs: Path, tmp_path: Path):
    out = inputs / "ds"                                  # output inside the input directory
    out.mkdir()
    (out / "_meta.json").write_text("{}")
    (out / "x.json").write_text("[]")
    files, refused, skipped = discover([inputs, tmp_path / "nope.log"], exclude=out)
    names = [Path(f.name).relative_to(inputs).as_posix() for f in files]
    assert names == ["iteration_stats.json", "logs/rank0.log", "logs/rank1.log.zst",
                     "traces/rank-0.jsonl", "traces/rank-1.jsonl"]
    assert [r.reason for r in refused] == ["no such file or directory"]
    assert [Path(s).name for s in skipped] == ["core.1234"]


def test_a_dataset_given_as_input_is_refused(inputs: Path, tmp_path: Path):
    ds = ingest([inputs / "logs"], tmp_path / "ds").path
    report = ingest([ds, inputs / "iteration_stats.json"], tmp_path / "ds2")
    assert [(r.name, r.reason.split(" (")[0]) for r in report.refused] == [
        (str(ds), "is a dataset, not raw input")]


def test_explicit_file_is_read_whatever_its_name(tmp_path: Path):
    p = tmp_path / "stats.dump"
    p.write_text(stats_text(range(2), ranks=1))
    report = ingest([p], tmp_path / "ds")
    assert report.inputs[0].kind == "stats" and report.rows["stats"] == 2


# --- the whole ingest ------------------------------------------------------------------------

def test_ingest_directory_every_kind(inputs: Path, tmp_path: Path):
    report = ingest([inputs], tmp_path / "ds")
    assert report.ok and report.refused == ()
    kinds = {Path(fp.name).name: fp.kind for fp in report.inputs}
    assert kinds == {"iteration_stats.json": "stats", "rank0.log": "log", "rank1.log.zst": "log",
                     "rank-0.jsonl": "trace", "rank-1.jsonl": "trace"}
    ds = forensics.load(report.path)
    assert sorted(ds.iterations.groupby("rank")["iter"].max().to_dict().items()) == [(0, 5), (1, 5)]
    assert len(ds.stats) == 10 and set(ds.stats["rank"]) == {0, 1}
    assert list(ds.runs["run"]) == ["run-a", "run-a"]         # one run record per rank file
    assert len(ds.frames) == 6 and len(ds.requests) == 6
    assert set(ds.unparsed["text"]) == {"some line nobody understands"}
    assert report.summary.ranks == (0, 1)
    meta = json.loads((report.path / "_meta.json").read_text())
    assert meta["schema_version"] == "2.3" and meta["tool_version"] == forensics.__version__
    for fp in meta["inputs"]:
        assert set(fp) == {"name", "size", "xxh3_128", "kind"}
        data = Path(fp["name"]).read_bytes()
        assert fp["size"] == len(data) and fp["xxh3_128"] == xxhash.xxh3_128_hexdigest(data)
    assert [Path(s).name for s in meta["skipped"]] == ["core.1234"]


def test_ingesting_twice_gives_identical_tables(inputs: Path, tmp_path: Path):
    a = ingest([inputs], tmp_path / "a").path
    b = ingest([inputs], tmp_path / "b").path
    ta, tb = read_tables(a), read_tables(b)
    for t in TABLES:
        assert ta[t].equals(tb[t]), t
    assert (a / "_meta.json").read_text() == (b / "_meta.json").read_text()


def test_kind_override(tmp_path: Path):
    p = tmp_path / "looks_like_log.txt"
    p.write_text(stats_text(range(3), ranks=1))
    assert ingest([p], tmp_path / "d1").rows["stats"] == 3
    report = ingest([p], tmp_path / "d2", kind="log")
    assert report.inputs[0].kind == "log" and report.rows["stats"] == 0
    assert report.rows["unparsed"] == 3
    with pytest.raises(InputError, match="unknown kind"):
        ingest([p], tmp_path / "d3", kind="pcap")


def test_binary_and_missing_refused_others_ingested(inputs: Path, tmp_path: Path):
    binary = tmp_path / "weights.log"
    binary.write_bytes(bytes(range(256)) * 4)
    report = ingest([binary, inputs / "logs" / "rank0.log", tmp_path / "missing.log"],
                    tmp_path / "ds")
    assert not report.ok
    assert [(Path(r.name).name, r.reason.split(",")[0]) for r in report.refused] == [
        ("missing.log", "no such file or directory"), ("weights.log", "binary file")]
    ds = forensics.load(report.path)
    assert len(ds.iterations) == 5
    assert [Path(r["name"]).name for r in ds.meta["refused"]] == ["missing.log", "weights.log"]


def test_nothing_to_ingest_is_an_error_and_writes_nothing(tmp_path: Path):
    binary = tmp_path / "blob.out"
    binary.write_bytes(b"\x00" * 100)
    with pytest.raises(InputError, match="nothing to ingest"):
        ingest([binary], tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_output_that_is_not_a_dataset_is_never_replaced(inputs: Path, tmp_path: Path):
    from forensics.output_dir import OutputError
    with pytest.raises(OutputError, match="the output is also an input"):
        ingest([inputs / "logs"], inputs / "logs")
    assert (inputs / "logs" / "rank0.log").is_file()
    with pytest.raises(DatasetError, match="exists and is not a dataset"):
        ingest([inputs / "iteration_stats.json"], inputs / "logs")
    assert (inputs / "logs" / "rank0.log").is_file()
    (tmp_path / "empty").mkdir()
    assert ingest([inputs / "logs"], tmp_path / "empty").rows["iterations"] == 10


def test_interrupted_ingest_leaves_no_dataset(inputs: Path, tmp_path: Path, monkeypatch):
    from forensics.readers import stats_json

    real = stats_json.read_stats

    def explode(path, source, **kw):
        for batch in real(path, source, **kw):
            yield batch
            raise KeyboardInterrupt("interrupted midway")

    monkeypatch.setattr(stats_json, "read_stats", explode)
    with pytest.raises(KeyboardInterrupt):
        ingest([inputs], tmp_path / "ds")
    assert list(tmp_path.iterdir()) == [inputs]              # no dataset, no temp dir left


def test_interrupted_reingest_keeps_the_old_dataset(inputs: Path, tmp_path: Path, monkeypatch):
    out = ingest([inputs / "iteration_stats.json"], tmp_path / "ds").path
    before = read_tables(out)
    from forensics.readers import stats_json

    def explode(path, source, **kw):
        raise RuntimeError("parser bug")
        yield  # pragma: no cover

    monkeypatch.setattr(stats_json, "read_stats", explode)
    with pytest.raises(RuntimeError):
        ingest([inputs], out)
    after = read_tables(out)
    assert all(before[t].equals(after[t]) for t in TABLES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "run"]


def test_invalid_utf8_is_replaced(tmp_path: Path):
    p = tmp_path / "rank0.log"
    p.write_bytes(log_text(0, range(1, 3)).encode() + b"caf\xe9 \xff\xfe broken bytes\n")
    report = ingest([p], tmp_path / "ds")
    ds = forensics.load(report.path)
    assert len(ds.iterations) == 2
    assert "caf\ufffd \ufffd\ufffd broken bytes" in set(ds.unparsed["text"])


@pytest.mark.parametrize("suffix", ["gz", "zst"])
def test_truncated_compressed_log_keeps_what_was_read(tmp_path: Path, suffix: str):
    body = log_text(0, range(1, 4001)).encode()
    data = gzip.compress(body) if suffix == "gz" else zstandard.ZstdCompressor().compress(body)
    p = tmp_path / f"rank0.log.{suffix}"
    p.write_bytes(data[: len(data) // 2])
    report = ingest([p], tmp_path / "ds")
    assert report.ok
    ds = forensics.load(report.path)
    n = len(ds.iterations)
    assert 100 < n < 4000
    # every complete line read is kept (the last, cut line may carry a cut number)
    assert list(ds.iterations["iter"])[: n - 1] == list(range(1, n))
    assert "input_truncated" in set(ds.events["kind"])


def test_truncated_stats_gz_still_ingested(tmp_path: Path):
    data = gzip.compress(stats_text(range(2000)).encode())
    p = tmp_path / "stats.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    ds = forensics.load(ingest([p], tmp_path / "ds").path)
    assert 0 < len(ds.stats) < 4000
    assert list(ds.events["kind"]) == ["input_truncated"]


def test_trace_runs_merge_across_rank_files_and_duplicates_refused(tmp_path: Path):
    a, b = tmp_path / "rank-0.jsonl", tmp_path / "rank-1.jsonl"
    a.write_text(trace_text(0, range(4)))
    b.write_text(trace_text(1, range(4)))
    ds = forensics.load(ingest([a, b], tmp_path / "ds").path)
    assert sorted(ds.frames.groupby("rank").size().to_dict().items()) == [(0, 4), (1, 4)]
    assert set(ds.frames["run"]) == {"run-a"}

    dup = tmp_path / "rank-0-again.jsonl"
    dup.write_text(trace_text(0, range(3, 5)))
    with pytest.raises(TraceFormatError) as e:
        ingest([a, b, dup], tmp_path / "ds2")
    assert e.value.path == str(dup) and e.value.line == 2
    assert "duplicate frame (iter 3, rank 0)" in e.value.message
    assert not (tmp_path / "ds2").exists()

    other = tmp_path / "other.jsonl"
    other.write_text(trace_text(1, range(9, 10), run=dict(RUN, tp_size=4)))
    with pytest.raises(TraceFormatError, match="differs"):
        ingest([a, other], tmp_path / "ds3")


def test_traced_runs_are_the_runs_with_frames_in_record_order(tmp_path: Path):
    """Three trace files: run-z (frames), run-a (a run record and no frame), run-b (frames).
    A replay can use run-z and run-b only, listed in the order their run records were read."""
    (tmp_path / "1.jsonl").write_text(trace_text(0, range(2), run=dict(RUN, run_id="run-z")))
    (tmp_path / "2.jsonl").write_text(json.dumps(RUN) + "\n")
    (tmp_path / "3.jsonl").write_text(trace_text(0, range(2), run=dict(RUN, run_id="run-b")))
    ds = forensics.load(ingest([tmp_path / n for n in ("1.jsonl", "2.jsonl", "3.jsonl")],
                               tmp_path / "ds").path)
    assert list(ds.runs["run"]) == ["run-z", "run-a", "run-b"]
    assert ds.traced_runs() == ["run-z", "run-b"]
    assert ds.arrow("frames", columns=["run"]).column_names == ["run"]


# --- as_dataset --------------------------------------------------------------------------------

def test_as_dataset_loads_a_dataset_directory(inputs: Path, tmp_path: Path):
    path = ingest([inputs], tmp_path / "ds").path
    ds = as_dataset(path)
    assert ds.path == path and len(ds.frames) == 6


def test_as_dataset_reuses_cache_while_inputs_unchanged(inputs: Path, tmp_path: Path, monkeypatch):
    cache = tmp_path / "cache.ds"
    first = as_dataset([inputs], cache_dir=cache)
    assert len(first.stats) == 10
    import forensics.readers.dataset_cache as ingest_mod

    calls = []
    real_ingest = ingest_mod.ingest
    monkeypatch.setattr(ingest_mod, "ingest", lambda *a, **k: calls.append(a) or real_ingest(*a, **k))
    again = as_dataset([inputs], cache_dir=cache)
    assert calls == [] and len(again.stats) == 10
    # same size, different bytes: the digest differs, so it is ingested again
    stats = inputs / "iteration_stats.json"
    stats.write_text(stats.read_text().replace('"numActiveRequests": 2', '"numActiveRequests": 3'))
    changed = as_dataset([inputs], cache_dir=cache)
    assert len(calls) == 1 and set(changed.stats["num_active_requests"]) == {3}


def test_as_dataset_ingests_again_over_a_2_0_cache(inputs: Path, tmp_path: Path, monkeypatch):
    """A 2.0 dataset recorded sha256 digests: it is still read, but as a cache its inputs cannot
    be compared, so they are ingested again (and the cache rewritten as 2.3)."""
    cache = tmp_path / "cache.ds"
    as_dataset([inputs], cache_dir=cache)
    meta_path = cache / "_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["schema_version"] = "2.0"
    for fp in meta["inputs"]:
        fp["sha256"] = "0" * 64
        del fp["xxh3_128"]
    meta_path.write_text(json.dumps(meta))
    assert len(forensics.load(cache).stats) == 10          # read as it is
    import forensics.readers.dataset_cache as ingest_mod

    calls = []
    real_ingest = ingest_mod.ingest
    monkeypatch.setattr(ingest_mod, "ingest", lambda *a, **k: calls.append(a) or real_ingest(*a, **k))
    again = as_dataset([inputs], cache_dir=cache)
    assert len(calls) == 1 and len(again.stats) == 10
    assert json.loads(meta_path.read_text())["schema_version"] == "2.3"


def test_as_dataset_without_cache_uses_a_temp_dir_removed_with_the_dataset(inputs: Path):
    ds = as_dataset([inputs / "logs"])
    assert len(ds.iterations) == 10
    tmp = ds.path.parent
    assert tmp.is_dir()
    del ds
    gc.collect()
    assert not tmp.exists()


# --- the shared real samples -------------------------------------------------------------------

@pytest.fixture
def real_logs() -> Path:
    if not REAL_LOGS.is_dir():
        pytest.skip("shared samples absent")
    return REAL_LOGS


def assert_every_line_accounted_once(report) -> None:
    """Each line of each text input is the line of one row or inside one event/stats range."""
    ds = forensics.load(report.path)
    covered: dict[str, list[int]] = {}
    for table in ("iterations", "unparsed", "runs", "frames"):
        df = getattr(ds, table)
        for src, line in zip(df["source"], df["line"]):
            covered.setdefault(src, []).append(int(line))
    for table in ("events", "stats"):
        df = getattr(ds, table)
        kinds = df["kind"] if table == "events" else [None] * len(df)
        for src, a, b, kind in zip(df["source"], df["line"], df["line_end"], kinds):
            if kind != "input_truncated":          # points one past the last line read
                covered.setdefault(src, []).extend(range(int(a), int(b) + 1))
    for fp in report.inputs:
        raw = Path(fp.name).read_bytes()
        if fp.name.endswith(".zst"):
            raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
        n = len(raw.split(b"\n")) - (1 if raw.endswith(b"\n") else 0)
        assert sorted(covered.get(fp.name, [])) == list(range(1, n + 1)), fp.name


def test_generated_inputs_every_line_accounted_once(inputs: Path, tmp_path: Path):
    (inputs / "pretty_stats.json").write_text(json.dumps(
        [{"iter": i, "attentionDpRank": 0, "kvCacheStats": {"usedNumBlocks": i}} for i in range(3)],
        indent=2) + "\n")
    report = ingest([inputs], tmp_path / "ds")
    assert len(report.inputs) == 6
    assert_every_line_accounted_once(report)


def test_real_samples_every_line_accounted_once(real_logs: Path, tmp_path: Path):
    report = ingest([real_logs], tmp_path / "ds")
    assert report.ok and len(report.inputs) == len(list(real_logs.glob("*.txt")))
    assert {fp.kind for fp in report.inputs} == {"log"}
    assert_every_line_accounted_once(report)


def test_forensics_ingest_is_callable_after_submodule_imports(inputs: Path, tmp_path: Path):
    import forensics.readers.kinds

    assert forensics.ingest is forensics.readers.ingest
    report = forensics.ingest([inputs / "iteration_stats.json"], tmp_path / "ds")
    assert report.rows["stats"] == 10


def test_progress_counts_every_on_disk_byte(inputs: Path, tmp_path: Path, monkeypatch):
    import contextlib

    import forensics.readers as ingest_mod

    calls: list[tuple[int, bool, list[int]]] = []

    @contextlib.contextmanager
    def fake(total, description="", quiet=False, **kw):
        seen: list[int] = []
        calls.append((total, quiet, seen))
        yield seen.append

    monkeypatch.setattr(ingest_mod, "ingest_progress", fake)
    monkeypatch.setattr(ingest_mod, "PROGRESS_MIN_BYTES", 0)
    report = ingest([inputs], tmp_path / "ds", quiet=False)
    total = sum(fp.size for fp in report.inputs)
    assert [(t, q, sum(s)) for t, q, s in calls] == [(total, False, total)]
    monkeypatch.setattr(ingest_mod, "PROGRESS_MIN_BYTES", total + 1)   # small input: no bar
    ingest([inputs], tmp_path / "ds2", quiet=False)
    assert calls[-1][1] is True
