"""``identify --explore`` over the default space and bound for every era fixture: the era x entry
divergence table, and what it costs.

Each era fixture (``tests/trtllm/fixtures/eras``) is laid out as a checkout and identified by a
whole ``forensics identify trtllm:PATH --explore --json`` process under ``nice``, as a user runs
it: every catalogue entry is compared with the fixture's real pad code on every schedule of the
default space (96 configurations) up to the default bound. The baseline, measured in the same
run, is the battery ``forensics identify trtllm:PATH --json`` of the same fixture; with
``--rounds`` above 1 the two are interleaved, era by era, and medians are printed. Wall time is
the process's; CPU time is the process's and its workers' (user + system); peak RSS is the
largest of any process so far (``RUSAGE_CHILDREN``). The machine's load is printed before and
after.

The table gives, per era, the entry named and, per entry, ``=`` where it agrees on every
schedule or its first divergence (field: fixture value vs entry value) and that witness's size
(ranks/iterations/requests). The script exits 1 when an era is not named the entry it models
(``trtllm_checkouts.ERA_ENTRIES``) or that entry diverges.

Usage:
    python benchmarks/explore_eras.py                   # every era, one round
    python benchmarks/explore_eras.py --eras 002f3cc,mid-2025 --rounds 3
    python benchmarks/explore_eras.py --markdown        # the table as docs/explore.md has it
    python benchmarks/explore_eras.py --eras 002f3cc --iterations 1   # a quick look
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
sys.path.insert(0, str(ROOT / "tests" / "trtllm"))  # the era fixtures' layout helper

from replay.catalogue import policy_names  # noqa: E402
from replay.explore import DEFAULT_BOUND, ConfigSpace  # noqa: E402
from trtllm_checkouts import ERA_ENTRIES, place_era  # noqa: E402

#: Short column heads of the catalogue entries (the table must fit a page).
SHORT = {"mid-2025": "mid25", "legacy-2025": "leg25", "early-2026": "early26",
         "prefix-2026": "pre26", "fix-16161": "16161", "fix-16279": "16279",
         "tolerant-17278": "17278", "sched-aware-16921": "16921", "postpad-17379": "17379",
         "newest": "newest", "kv-connector-19164": "19164", "dkv": "dkv"}


def _children() -> tuple[float, int]:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime, use.ru_maxrss


def identify_process(root: Path, explore: bool, iterations: int) -> tuple[dict, float, float, int]:
    """One ``forensics identify --json`` process under nice: its JSON, wall, CPU, peak RSS (KiB)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    args = ["nice", "-n", "5", sys.executable, "-m", "forensics", "identify", f"trtllm:{root}",
            "--json"] + (["--explore", "--iterations", str(iterations)] if explore else [])
    cpu0, _ = _children()
    t = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    cpu1, rss = _children()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), wall, cpu1 - cpu0, rss


def cell(doc: dict, entry: str) -> str:
    """``=`` (agrees) or the first divergence and its size."""
    if entry in doc["agreeing"]:
        return "="
    w = doc["first_divergence"][entry]
    return f"{w['cause']} {w['ranks']}/{w['iterations']}/{w['requests']}"


def verdict(era: str, doc: dict) -> str:
    expected = ERA_ENTRIES[era]
    if doc["named"] == expected:
        return "ok"
    if expected not in doc["agreeing"]:
        return f"MISMATCH: {expected} diverges"
    return f"MISMATCH: named {doc['named']}, expected {expected}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eras", default=",".join(ERA_ENTRIES), help="comma-separated era fixtures")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (medians printed)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--iterations", type=int, default=DEFAULT_BOUND.iterations,
                    help="the bound's iterations (default: the default bound's)")
    a = ap.parse_args()
    bound = dataclasses.replace(DEFAULT_BOUND, iterations=a.iterations)
    eras = [e for e in a.eras.split(",") if e]
    unknown = [e for e in eras if e not in ERA_ENTRIES]
    if unknown:
        raise SystemExit(f"unknown era fixtures: {', '.join(unknown)} "
                         f"(known: {', '.join(ERA_ENTRIES)})")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    docs: dict[str, dict] = {}
    times: dict[str, dict[str, list]] = {e: {"explore": [], "battery": []} for e in eras}
    peak = 0
    with tempfile.TemporaryDirectory() as tmp:
        roots = {era: place_era(Path(tmp) / era, era) for era in eras}
        for _ in range(a.rounds):
            for era in eras:
                doc, wall, cpu, rss = identify_process(roots[era], True, a.iterations)
                docs[era] = doc
                times[era]["explore"].append((wall, cpu))
                _, bwall, bcpu, rss = identify_process(roots[era], False, a.iterations)
                times[era]["battery"].append((bwall, bcpu))
                peak = max(peak, rss)
                print(f"{era}: named {doc['named']} ({verdict(era, doc)}); --explore "
                      f"{wall:.1f} s wall, {cpu:.1f} s CPU, {doc['schedules']:,} schedules; "
                      f"battery {bwall:.1f} s wall, {bcpu:.1f} s CPU", flush=True)
    entries = policy_names()
    print()
    print(f"identify --explore, default space ({ConfigSpace().size()} configurations), "
          f"{bound.describe()}; medians of {a.rounds} round(s)")
    head = ["era", "named", "explore wall s", "explore CPU s", "battery CPU s",
            "explore/battery CPU"]
    rows = []
    for era in eras:
        ex, ba = times[era]["explore"], times[era]["battery"]
        cpu, bcpu = (statistics.median(c for _, c in ex), statistics.median(c for _, c in ba))
        rows.append([era, docs[era]["named"] or "-",
                     f"{statistics.median(w for w, _ in ex):.1f}", f"{cpu:.1f}", f"{bcpu:.1f}",
                     f"{cpu / max(bcpu, 1e-9):.1f}x"])
    _print_table(head, rows, a.markdown)
    print()
    head = ["era"] + [SHORT.get(e, e) for e in entries]
    _print_table(head, [[era] + [cell(docs[era], e) for e in entries] for era in eras], a.markdown)
    alike = {era: docs[era]["alike"] for era in eras if docs[era]["alike"]}
    for era, names in alike.items():
        print(f"{era}: {', '.join(names)} decide as {docs[era]['named']} in every configuration")
    print(f"peak RSS of a process: {peak / 1024:.0f} MiB")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bad = [era for era in eras if verdict(era, docs[era]) != "ok"]
    if bad:
        print("not named the entry they model: " + ", ".join(bad))
        raise SystemExit(1)


def _print_table(head: list[str], rows: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    for row in [head] + rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
