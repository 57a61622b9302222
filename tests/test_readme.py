"""The README's Python snippet runs as written, from a checkout."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_python_snippet_runs_as_written(tmp_path):
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    code = blocks[0]
    # A checkout-like directory: the README's relative paths resolve, nothing is written in the repo.
    (tmp_path / "traces").symlink_to(REPO / "traces")
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    first = out.stdout.splitlines()[0]
    assert first.startswith("<ReplayResult prefix-2026 on 'sim-nvbug-6438685-prefix-2026-3': crash")
    assert len(first) < 300
    assert "iter_created" in out.stdout and "AssertionError" in out.stdout
    assert (tmp_path / "crash.ds").is_dir()
