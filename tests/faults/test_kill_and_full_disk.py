"""Fault injection: ingests SIGKILLed at random moments and at each step of the swap, and an
ingest onto a full file system; after each, ``-o`` holds a complete old or new dataset and the
next run succeeds, leaving nothing else behind."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import forensics
from forensics.dataset.schema import TABLES

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "traces" / "samples" / "healthy" / "trace.jsonl"


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """About 16 MB of log, stats and trace (a dataset well over the 256 KB file system below):
    an ingest of a few seconds."""
    from forensics.simulate import simulate
    d = tmp_path_factory.mktemp("big")
    simulate("healthy", out_dir=d, iters=3000)
    (d / "trace.expect.toml").unlink()
    return d


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_DEBUG", None)
    return env


def _complete(ds_path: Path) -> frozenset[str]:
    """Assert ``ds_path`` is a whole dataset; return the names of its inputs."""
    ds = forensics.load(ds_path)
    for table in TABLES:
        files = ds.files(table)
        assert files and all(f.is_file() for f in files), table
        assert ds.num_rows(table) == ds.meta["rows"][table], table
    return frozenset(Path(i["name"]).name for i in ds.meta["inputs"])


OLD = frozenset({"trace.jsonl"})
NEW = frozenset({"executor.log", "stats.jsonl", "trace.jsonl"})


def _only_the_dataset(parent: Path) -> None:
    assert sorted(p.name for p in parent.iterdir()) == ["ds"]


def test_sigkill_at_random_moments(tmp_path, big):
    out = tmp_path / "ds"
    forensics.ingest([SMALL], out)
    rng = random.Random(14)
    for _ in range(4):
        p = subprocess.Popen([sys.executable, "-m", "forensics", "ingest", str(big), "-o", str(out),
                              "-q"], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert _complete(out) in (OLD, NEW)
    report = forensics.ingest([big], out)   # the next run succeeds and cleans up
    assert _complete(out) == NEW and report.rows["frames"] > 0
    _only_the_dataset(tmp_path)


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import forensics.dataset.writer as writer
    point = sys.argv[1]

    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "writing":
        writer._TableFile.flush = die
    elif point == "before-exchange":
        writer.exchange = die
    elif point == "after-exchange":
        real = writer.exchange
        def exchange(a, b):
            real(a, b)
            die()
        writer.exchange = exchange
    elif point == "fallback-between-renames":
        writer.exchange = lambda a, b: False
        real_rename, calls = os.rename, []
        def rename(a, b):
            calls.append(a)
            if len(calls) == 2:
                die()
            real_rename(a, b)
        os.rename = rename
    import forensics.readers
    forensics.readers.ingest([sys.argv[2]], sys.argv[3])
    print("finished")
""")


@pytest.mark.parametrize("point", ["writing", "before-exchange", "after-exchange",
                                   "fallback-between-renames"])
def test_sigkill_at_each_step_of_the_swap(tmp_path, point):
    out = tmp_path / "ds"
    forensics.ingest([SMALL], out)
    new_input = REPO / "traces" / "samples" / "nvbug-6438685"
    res = subprocess.run([sys.executable, "-c", KILL_SCRIPT, point, str(new_input), str(out)],
                         env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stderr
    got = _complete(out)  # the fallback's stranded old dataset is put back by the reader
    assert got == (NEW if point == "after-exchange" else OLD)
    forensics.ingest([new_input], out)
    assert _complete(out) == NEW
    _only_the_dataset(tmp_path)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_file_system(tiny_tmpfs, big):
    out = tiny_tmpfs / "ds"
    forensics.ingest([SMALL], out)
    res = subprocess.run([sys.executable, "-m", "forensics", "ingest", str(big), "-o", str(out)],
                         env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "No space left on device" in res.stderr
    assert "hint:" in res.stderr
    assert _complete(out) == OLD
    _only_the_dataset(tiny_tmpfs)
    forensics.ingest([SMALL], out)  # the next run (that fits) succeeds
    assert _complete(out) == OLD
    _only_the_dataset(tiny_tmpfs)
