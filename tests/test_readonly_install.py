"""The compiled scanner works for any user on any install (issue 25): a non-editable install
made read-only, run as an unprivileged user whose HOME cannot be written, ingests a log large
enough for the compiled path (>= 1 MB) without an error: nothing is written into the package,
and with no writable cache the reference reader reads it (the issue's failure was exit 4,
``RuntimeError: cannot cache function ...: no locator available``)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import forensics
from forensics.readers import native_scan
from unprivileged import run_as_nobody, skip_reason, world_readable_tmp

REPO = Path(__file__).resolve().parents[1]
LINE = ("[11/30/2026-12:00:01] [TRT-LLM] [RANK {r}] [I] iter = {i}, global_rank = {r}, "
        "rank = {r}, currank_total_requests = 1/1, host_step_time = 1.0ms, "
        "prev_device_step_time = 1.0ms, timestamp = 2026-11-30 12:00:01, "
        "num_scheduled_requests: 1, states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
        "'num_generation_tokens': 1}}\n")


def _install(site: Path) -> None:
    """pip install (not editable) of a copy of the repository into ``site``: with the build
    requirements installed here, else in an isolated environment as pip does by default (the
    same files installed; measured: ~1.3 s CPU against ~5 s for the isolated build)."""
    src = site.parent / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "tests", "notebooks", "benchmarks",
        "traces", "*.ds"))
    errors = []
    for extra in (["--no-build-isolation"], []):
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              *extra, "--target", str(site), str(src)],
                             capture_output=True, text=True, timeout=600)
        if out.returncode == 0:
            break
        errors.append(out.stderr[-400:])
        shutil.rmtree(site, ignore_errors=True)
    else:
        pytest.skip("pip cannot build the package here: " + " | ".join(errors))
    shutil.rmtree(src)


def _read_only(tree: Path) -> None:
    for root, dirs, files in os.walk(tree):
        for n in files:
            os.chmod(os.path.join(root, n), 0o444)
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o555)
    os.chmod(tree, 0o555)


@pytest.mark.slow
def test_read_only_install_as_an_unprivileged_user_without_a_home(tmp_path):
    why = skip_reason()
    if why:
        pytest.skip(why)
    root = world_readable_tmp("forensics-ro-")
    try:
        site = root / "site"
        _install(site)
        _read_only(site)
        log = root / "big.log"
        lines = 0
        with open(log, "w") as f:
            while f.tell() < native_scan.MIN_BYTES + (1 << 20):
                f.write("".join(LINE.format(r=r, i=lines // 4 + 1) for r in range(4)))
                lines += 4
        os.chmod(log, 0o644)
        env = {"HOME": "/nonexistent", "PYTHONPATH": str(site)}
        where = run_as_nobody(["-c", "import forensics; print(forensics.__file__)"], env=env,
                              cwd=root)
        assert where.stdout.strip() == str(site / "forensics" / "__init__.py"), where.stderr
        res = run_as_nobody(["-m", "forensics", "ingest", str(log), "-o", str(root / "ds")],
                            env=env, cwd=root)
        assert res.returncode == 0, res.stderr[-3000:]
        assert "Traceback" not in res.stderr and "cannot cache" not in res.stderr
        assert "no writable cache directory" in res.stderr    # said once, not silent
        ds = forensics.load(root / "ds")
        assert len(ds.iterations) == lines and len(ds.unparsed) == 0
        # nothing was written into the installed package
        assert not [p for p in site.rglob("*") if p.stat().st_mode & stat.S_IWUSR]
        assert not list(site.rglob("*.nbi")) and not list(site.rglob("*.o"))
    finally:
        for r, dirs, _ in os.walk(root):
            os.chmod(r, 0o755)
        shutil.rmtree(root, ignore_errors=True)
