"""Regenerate the committed samples under traces/samples/ (or check them).

Each scenario of ``forensics.simulate.scenarios`` marked ``sample=True`` is simulated with its
default policy, seed and length into ``traces/samples/<scenario>/`` (executor.log, stats.jsonl,
trace.jsonl). The same command always writes byte-identical files.

Usage:
    python traces/regenerate.py            # rewrite every sample
    python traces/regenerate.py --check    # exit 1 if a committed sample differs from a fresh run
    python traces/regenerate.py healthy    # only some scenarios
"""
from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

from forensics.simulate import SCENARIOS, simulate

SAMPLES = Path(__file__).resolve().parent / "samples"


def regenerate(names: list[str], root: Path) -> list[Path]:
    """Simulate each named scenario into ``root/<name>/``; the files written."""
    written = []
    for name in names:
        res = simulate(name, out_dir=root / name)
        written.extend(res.files.values())
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenarios to regenerate (default: every sample)")
    ap.add_argument("--check", action="store_true", help="compare with a fresh run, write nothing")
    args = ap.parse_args(argv)
    names = args.scenarios or [n for n, s in SCENARIOS.items() if s.sample]
    if not args.check:
        for path in regenerate(names, SAMPLES):
            print(f"wrote {path.relative_to(SAMPLES.parent.parent)} ({path.stat().st_size:,} bytes)")
        return 0
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in regenerate(names, Path(tmp)):
            committed = SAMPLES / path.relative_to(tmp)
            if not committed.exists() or not filecmp.cmp(path, committed, shallow=False):
                print(f"differs: {committed}")
                bad += 1
    print("samples up to date" if not bad else f"{bad} sample file(s) differ; run traces/regenerate.py")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
