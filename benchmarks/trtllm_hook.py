"""Cost of replaying real pad code (``trtllm:PATH``) against the catalogue policy it maps to.

Builds a synthetic disaggregated run (``--ranks`` ranks x ``--iters`` iterations, seeded random
request states), then replays it under ``fix-16161`` (vectorised) and under the fix-16161-shaped
fixture source of ``tests/trtllm/fixtures`` (one stand-in executor per frame), best of
``--rounds``. Prints both times, the per-frame cost of the hook and the ratio.

    python benchmarks/trtllm_hook.py [--ranks 8] [--iters 500] [--rounds 3]
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/replay.py would shadow the replay package when a script here runs directly.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from replay.walk import run  # noqa: E402
from replay.frames import RunFrames  # noqa: E402
from replay.resolve import resolve_policy  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "trtllm" / "fixtures"
STATES = ["DISAGG_GENERATION_INIT", "DISAGG_GENERATION_TRANS_IN_PROGRESS", "CONTEXT_INIT",
          "GENERATION_IN_PROGRESS", "GENERATION_IN_PROGRESS", "GENERATION_TO_COMPLETE"]


def records(ranks: int, iters: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = [{"kind": "run", "format": "adp-trace", "version": 1, "tp_size": ranks,
                        "pp_size": 1, "max_batch_size": 8, "max_num_active_requests": 8,
                        "disaggregated": True, "overlap_scheduler": True, "build": "bench"}]
    for it in range(iters):
        for r in range(ranks):
            reqs = [{"id": 1 + r * 100 + k, "state": rng.choice(STATES)}
                    for k in range(rng.randint(0, 4))]
            out.append({"kind": "frame", "iter": it, "rank": r, "requests": reqs})
    return out


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    frames = RunFrames.from_records(records(args.ranks, args.iters))
    with tempfile.TemporaryDirectory() as tmp:
        ex = Path(tmp) / "tensorrt_llm" / "_torch" / "pyexecutor" / "py_executor.py"
        ex.parent.mkdir(parents=True)
        shutil.copy(FIXTURE / "py_executor_fix16161.py", ex)
        hooked = resolve_policy(f"trtllm:{tmp}")
        base = best(lambda: run(frames, None, "fix-16161"), args.rounds)
        real = best(lambda: run(frames, None, hooked), args.rounds)
    n = args.ranks * args.iters
    print(f"{n} frames: catalogue fix-16161 {base * 1e3:.1f} ms, "
          f"trtllm fixture {real * 1e3:.1f} ms ({real / n * 1e6:.1f} us/frame), "
          f"ratio {real / base:.1f}x")


if __name__ == "__main__":
    main()
