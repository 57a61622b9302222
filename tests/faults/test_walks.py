"""Directory walks: an unreadable entry is refused and reported while the rest ingests; any file
name works and is recorded losslessly; a file still growing is fingerprinted as read."""
from __future__ import annotations

import builtins
import errno
import json
import os
from pathlib import Path

import xxhash
from click.testing import CliRunner

import forensics
from forensics.cli import cli
from forensics.readers import ingest, native_scan

LINE = ("[TRT-LLM] [RANK {r}] [I] iter = {i}, global_rank = {r}, rank = {r}, "
        "currank_total_requests = 1/1, host_step_time = 1.0ms, prev_device_step_time = 1.0ms, "
        "timestamp = 2026-01-01 00:00:00, num_scheduled_requests: 1, states = "
        "{{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 1}}\n")


def _logs(d: Path) -> Path:
    (d / "logs" / "sub").mkdir(parents=True)
    (d / "logs" / "rank0.log").write_text(LINE.format(r=0, i=1))
    (d / "logs" / "sub" / "rank1.log").write_text(LINE.format(r=1, i=1))
    return d / "logs"


def test_unreadable_subdirectory_is_refused_and_the_rest_ingests(tmp_path, monkeypatch):
    logs = _logs(tmp_path)
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("sub"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    res = CliRunner().invoke(cli, ["ingest", str(logs), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "sub: cannot list directory: Permission denied" in res.output
    ds = forensics.load(tmp_path / "ds")
    assert list(ds.iterations["rank"]) == [0]
    assert ds.meta["refused"] == [{"name": str(logs / "sub"),
                                   "reason": "cannot list directory: Permission denied"}]


def test_unreadable_file_is_refused_and_the_rest_ingests(tmp_path, monkeypatch):
    logs = _logs(tmp_path)
    real = builtins.open

    def fake_open(file, *a, **k):
        if os.fspath(file).endswith("rank0.log"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real(file, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    report = ingest([logs], tmp_path / "ds")
    assert [(r.name, r.reason) for r in report.refused] == [
        (str(logs / "rank0.log"), "cannot read: Permission denied")]
    assert report.rows["iterations"] == 1


def test_non_utf8_file_name_is_read_and_recorded_losslessly(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    raw = os.fsencode(str(logs)) + b"/rank\xff\xfe0.log"
    with open(raw, "wb") as f:
        f.write(LINE.format(r=0, i=3).encode())
    res = CliRunner().invoke(cli, ["ingest", str(logs), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 0, res.output
    ds = forensics.load(tmp_path / "ds")
    shown = str(logs) + "/rank\\xff\\xfe0.log"
    assert list(ds.iterations["source"]) == [shown]
    (entry,) = ds.meta["inputs"]
    assert entry["name"] == shown and bytes.fromhex(entry["name_hex"]) == raw
    assert "name_hex" not in json.loads((tmp_path / "ds" / "_meta.json").read_text())["files"]
    # the summary prints it too
    assert CliRunner().invoke(cli, ["summary", str(tmp_path / "ds")]).exit_code == 0


def test_a_growing_file_is_fingerprinted_as_read(tmp_path, monkeypatch):
    """The file grows while it is read: the fingerprint describes the bytes read (all of them
    here, the reader reads on to the end), not the file as it was before reading."""
    log = tmp_path / "grow.log"
    body = "".join(LINE.format(r=0, i=i) for i in range(36000))  # ~9 MiB: several blocks
    log.write_text(body)
    before = xxhash.xxh3_128_hexdigest(body.encode())
    import forensics.readers as ingest_mod
    from forensics.readers.progress import ingest_progress

    grown = []

    def bar(total, n_files, quiet):
        ctx = ingest_progress(total, "x", quiet=True)

        class Wrap:
            def __enter__(self):
                inner = ctx.__enter__()

                def advance(n):
                    if not grown:
                        with open(log, "a") as f:
                            f.write("".join(LINE.format(r=0, i=i) for i in range(36000, 36100)))
                        grown.append(True)
                    inner(n)
                return advance

            def __exit__(self, *exc):
                return ctx.__exit__(*exc)
        return Wrap()

    monkeypatch.setattr(ingest_mod, "_progress_bar", bar)
    # Several blocks on either reader: the compiled one (1 MB and up) reads 16 MiB blocks, and a
    # file read whole in its first block has met its end before it grows.
    monkeypatch.setattr(native_scan, "BLOCK_BYTES", 2 << 20)
    report = ingest([log], tmp_path / "ds")
    final = log.read_bytes()
    (fp,) = report.inputs
    assert grown and report.rows["iterations"] == 36100
    assert fp.size == len(final) and fp.xxh3_128 == xxhash.xxh3_128_hexdigest(final) != before
