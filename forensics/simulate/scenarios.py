"""Named simulation scenarios: a workload, a default policy, a length and a seed.

Each one shows one behaviour of the attention-DP pad dummy (traces/README.md documents them with
the command that regenerates the committed sample and the expected verdict per policy).
"""
from __future__ import annotations

import dataclasses

from forensics.errors import ConfigError
from forensics.simulate.workload import (
    AGGREGATED,
    CONTEXT_SERVER,
    GENERATION_SERVER,
    LengthDist,
    Workload,
)

#: Verdicts in :attr:`Scenario.verdicts`.
CRASH, LEAK, CLEAN = "crash", "leak", "clean"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A named, reproducible simulation.

    Fields:
        name: stable name (``nvbug-6438685``).
        summary: one line for ``--help``.
        workload: the fleet and its traffic.
        policy: catalogue policy used when none is given.
        iters: loop bodies to run by default.
        seed: default seed.
        verdicts: expected outcome per catalogue policy with the default seed and length:
            ``crash`` (a rank asserts), ``leak`` (dummies survive skipped iterations, no crash)
            or ``clean`` (no dummy ever survives).
        sample: a small sample is committed under ``traces/samples/<name>/``.
    """

    name: str
    summary: str
    workload: Workload
    policy: str
    iters: int
    seed: int
    verdicts: dict[str, str]
    sample: bool = True


_ALL_POLICIES = ("mid-2025", "legacy-2025", "early-2026", "prefix-2026", "fix-16161", "fix-16279",
                 "tolerant-17278", "sched-aware-16921", "postpad-17379", "newest")


def _v(default: str, **over: str) -> dict[str, str]:
    out = {p: default for p in _ALL_POLICIES}
    out.update({k.replace("_", "-"): v for k, v in over.items()})
    return out


_SCENARIOS = [
    Scenario(
        name="nvbug-6438685",
        summary=("wide-EP generation servers (8 ranks, max_batch_size 4, overlap): a KV-transfer "
                 "burst meets finishing requests; asserts under prefix-2026, clean under fix-16161"),
        workload=Workload(ranks=8, max_batch_size=4, mode=GENERATION_SERVER, overlap=True,
                          arrival_rate=0.25, burst_every=60, burst_size=32, burst_start=40,
                          kv_latency=LengthDist(2.0, 0.4), burst_kv_latency=LengthDist(8.0, 0.4),
                          output_len=LengthDist(20.0, 0.6, minimum=2), model_arch="deepseek_v4"),
        policy="prefix-2026", iters=600, seed=3,
        # DeepSeek-V4 at pp_size 1: inside #16279's gate, so the merged fix is clean too.
        verdicts=_v(CLEAN, mid_2025=LEAK, legacy_2025=LEAK, early_2026=LEAK, prefix_2026=CRASH),
    ),
    Scenario(
        name="surplus-17278",
        summary=("generation servers with pp_size 2 (every upstream gate is off): dummies leak, the "
                 "merged fix-16279 still asserts, tolerant-17278 and later warn about the surplus; "
                 "only the never-merged, ungated fix-16161 is clean"),
        workload=Workload(ranks=8, pp_size=2, max_batch_size=2, mode=GENERATION_SERVER, overlap=True,
                          arrival_rate=0.25, burst_every=40, burst_size=32, burst_start=40,
                          kv_latency=LengthDist(2.0, 0.4), burst_kv_latency=LengthDist(8.0, 0.4),
                          output_len=LengthDist(12.0, 0.6, minimum=2)),
        policy="tolerant-17278", iters=200, seed=17278,
        verdicts=_v(LEAK, prefix_2026=CRASH, fix_16161=CLEAN, fix_16279=CRASH),
    ),
    Scenario(
        name="aggregated-overlap",
        summary=("aggregated serving with the overlap scheduler: GENERATION_TO_COMPLETE still "
                 "counts, so dummies leak even under fix-16161 (the path the fix leaves open)"),
        workload=Workload(ranks=4, max_batch_size=8, mode=AGGREGATED, overlap=True,
                          arrival_rate=0.3, burst_every=0, output_len=LengthDist(12.0, 0.5, minimum=2)),
        policy="fix-16161", iters=200, seed=16161,
        verdicts=_v(LEAK, postpad_17379=CLEAN, newest=CLEAN),
    ),
    Scenario(
        name="context-server",
        summary=("context servers in gen-first mode: a rank holding only "
                 "DISAGG_CONTEXT_WAIT_SCHEDULER requests; the legacy count includes state 7, the "
                 "fix's window does not"),
        workload=Workload(ranks=4, max_batch_size=4, mode=CONTEXT_SERVER, overlap=False,
                          arrival_rate=0.25, wait_scheduler_fraction=0.7,
                          wait_scheduler_latency=LengthDist(6.0, 0.5)),
        policy="prefix-2026", iters=200, seed=7,
        # No model named: the simulator runs outside #16279's gate (the window stays off); the
        # non-overlap forward intent of #16921 (any model) counts with the scheduler's test.
        verdicts=_v(CLEAN, mid_2025=LEAK, legacy_2025=LEAK, early_2026=LEAK, prefix_2026=LEAK,
                    fix_16279=LEAK, tolerant_17278=LEAK),
    ),
    Scenario(
        name="healthy",
        summary=("generation servers without the overlap scheduler at moderate load: dummies pad "
                 "ranks awaiting KV and are removed every iteration; no leak under any policy"),
        workload=Workload(ranks=4, max_batch_size=8, mode=GENERATION_SERVER, overlap=False,
                          arrival_rate=0.8, burst_every=80, burst_size=10,
                          kv_latency=LengthDist(3.0, 0.5), output_len=LengthDist(30.0, 0.6)),
        policy="fix-16161", iters=200, seed=1,
        verdicts=_v(CLEAN),
    ),
    Scenario(
        name="fleet-1h",
        summary=("32 generation-server ranks for ~100k iterations (about an hour at 36 ms): a "
                 "benchmark input, generated on demand"),
        workload=Workload(ranks=32, max_batch_size=16, mode=GENERATION_SERVER, overlap=True,
                          arrival_rate=6.0, burst_every=400, burst_size=64,
                          kv_latency=LengthDist(3.0, 0.5), burst_kv_latency=LengthDist(8.0, 0.5),
                          output_len=LengthDist(60.0, 0.7, minimum=2)),
        policy="fix-16161", iters=100_000, seed=3600,
        verdicts={"fix-16161": CLEAN},
        sample=False,
    ),
]

#: Every scenario by name.
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _SCENARIOS}


def get_scenario(name: str) -> Scenario:
    """A scenario by name, with the known names in the error."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ConfigError(f"unknown scenario {name!r}", hint="scenarios: " + ", ".join(SCENARIOS)) from None


def scenario_names() -> list[str]:
    return list(SCENARIOS)
