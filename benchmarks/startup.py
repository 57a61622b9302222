"""Start-up: ``forensics --help`` and the bundled-sample post-mortem, as a user runs them.

Whole processes in paired, interleaved rounds (``wholeprocess``: wall, CPU, peak RSS; medians):

- ``help``: ``python -m forensics --help`` (goal: under 0.3 s);
- ``postmortem``: ``python -m forensics postmortem traces/samples/nvbug-6438685 -o DIR`` after
  one untimed warm-up run (goal: under 1 s warm); it exits 1 ("a crash was found and
  explained"), which is its success here;
- floors measured in the same rounds: ``python -c pass`` (the interpreter) and
  ``python -c "import click"`` (the CLI framework every command needs);
- ``before-help`` / ``before-postmortem`` (with ``--before PATH``): the same commands from
  another checkout (e.g. ``git archive REV | tar -x -C PATH``).

Warm means what a user's second run has: the page cache and compiled bytecode. An installed
package has its ``.pyc`` files; an environment with ``PYTHONDONTWRITEBYTECODE`` set would compile
every module of the checkout on every run (about 0.2 s CPU here), so the timed commands run
without it and with ``PYTHONPYCACHEPREFIX`` in the benchmark's work directory (the warm-up run
fills it; no ``__pycache__`` is written into the checkouts).

``python -m forensics`` is the console script minus any launcher shim the environment adds
(pyenv's adds a bash and a pyenv process). Every process runs from a directory outside any
checkout, so the working directory does not shadow ``PYTHONPATH``. The figures to quote are
CPU seconds (on a shared machine wall time also measures the neighbours).

Usage:
    python benchmarks/startup.py                 # 5 rounds
    python benchmarks/startup.py --rounds 9 --before /tmp/base
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import wholeprocess as wp  # noqa: E402  (the helper beside this script)

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

REPO = _HERE.parent
SAMPLE = REPO / "traces" / "samples" / "nvbug-6438685"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", help="another checkout to time beside this one")
    ap.add_argument("--no-postmortem", action="store_true", help="time --help and floors only")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    py = sys.executable

    def env_for(tree: Path) -> dict[str, str]:
        return wp.warm_bytecode(dict(os.environ, PYTHONPATH=str(tree), MPLBACKEND="Agg"),
                                work / "pycache")

    trees = {"": REPO}
    if args.before:
        trees["before-"] = Path(args.before).resolve()
    try:
        methods = [wp.Method("python -c pass", [py, "-c", "pass"]),
                   wp.Method("import click", [py, "-c", "import click"])]
        for label, tree in trees.items():
            methods.append(wp.Method(f"{label}help", [py, "-m", "forensics", "--help"],
                                     env=env_for(tree)))
            wp.measure(methods[-1].argv, methods[-1].env, str(work))   # warm-up: bytecode
        pm = []
        if not args.no_postmortem:
            for label, tree in trees.items():
                out = work / f"{label}report"
                # exit status 1 means "crash found and explained": wrap to make it success
                argv = ["sh", "-c", f'"$0" -m forensics postmortem "$1" -o "$2" -q; test $? -eq 1',
                        py, str(SAMPLE), str(out)]
                m = wp.Method(f"{label}postmortem", argv, env=env_for(tree),
                              prepare=lambda d=out: shutil.rmtree(d, ignore_errors=True))
                pm.append(m)
                m.prepare()
                wp.measure(argv, m.env, str(work))        # warm-up: page cache, .pyc files
        methods += pm
        wp.run_rounds(methods, args.rounds, cwd=str(work))
        print(wp.table(methods, None, ours="help"))
        for m in methods:
            if m.name.endswith(("help", "postmortem")):
                goal = 0.3 if m.name.endswith("help") else 1.0
                print(f"{m.name}: median {m.median('cpu'):.3f} s cpu, {m.median('wall'):.3f} s "
                      f"wall (goal {goal} s)")
        for p in pm:
            print(f"{p.name} vs help: {p.median('cpu') / methods[2].median('cpu'):.1f}x cpu")
        if len(pm) == 2:   # this checkout against --before, round by round
            cpu = statistics.median(b.cpu / a.cpu for a, b in zip(pm[0].samples, pm[1].samples))
            wall = statistics.median(b.wall / a.wall for a, b in zip(pm[0].samples, pm[1].samples))
            print(f"before-postmortem / postmortem, median of the paired rounds' ratios: "
                  f"cpu {cpu:.2f}x, wall {wall:.2f}x (> 1: this checkout is cheaper)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
