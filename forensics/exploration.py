"""One ``forensics explore`` run: explore policies (``replay.explore``), write the witnesses,
export their tests.

Files: ``DIR/<policy>--<mechanism>.jsonl`` per witness (a v2 trace ``forensics replay`` reads),
``TESTS/test_explore_<policy>_<mechanism>.py`` per witness (``forensics.export_test``: the trace
inline, the verdict of the explored policy pinned; a divergence pins both policies).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Optional, Sequence

from forensics.export_test import export_test
from forensics.output_dir import make_dir, refuse_existing
from forensics.trace_records import write_records
from replay.catalogue import policy_names
from replay.explore.explorer import Progress, explore
from replay.explore.result import ExploreResult, Witness
from replay.explore.space import DEFAULT_BOUND, KV_OUTCOMES, Bound, ConfigSpace, KvOutcome


@dataclasses.dataclass
class Exploration:
    """Every policy's result and the files written.

    Fields:
        results: one per explored policy, in the order given.
        traces: ``{(policy, witness slug): path}`` of the written traces.
        tests: ``{(policy, witness slug): path}`` of the exported tests.
    """

    results: list[ExploreResult]
    traces: dict[tuple[str, str], Path] = dataclasses.field(default_factory=dict)
    tests: dict[tuple[str, str], Path] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.results)

    @property
    def interrupted(self) -> bool:
        return any(r.interrupted for r in self.results)

    def summary(self) -> list[str]:
        lines: list[str] = []
        for r in self.results:
            lines += r.summary()
            for w in r.witnesses:
                for label, files in (("trace", self.traces), ("test", self.tests)):
                    path = files.get((r.policy, w.slug))
                    if path is not None:
                        lines.append(f"    {label}: {path}")
        return lines

    def to_json(self) -> dict:
        out = {"failed": self.failed, "interrupted": self.interrupted, "results": []}
        for r in self.results:
            d = r.to_json()
            for w in d["witnesses"]:
                trace = self.traces.get((r.policy, w["slug"]))
                test = self.tests.get((r.policy, w["slug"]))
                w["trace"] = None if trace is None else str(trace)
                w["test"] = None if test is None else str(test)
            out["results"].append(d)
        return out


def file_stem(policy: str, witness: Witness) -> str:
    """``prefix-2026--crash-generation-to-complete`` (a ``trtllm:`` path reduced to its name)."""
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", policy.rsplit("/", 1)[-1]).strip("-") or "policy"
    return f"{name}--{witness.slug}"


def explore_policies(specs: Sequence[str] = (), space: ConfigSpace = ConfigSpace(),
                     bound: Bound = DEFAULT_BOUND, *, against: Optional[str] = None,
                     out_dir: Optional[str] = None, tests_dir: Optional[str] = None,
                     force: bool = False, kv_outcomes: tuple[KvOutcome, ...] = KV_OUTCOMES,
                     progress: Optional[Progress] = None) -> Exploration:
    """Explore each policy (default: the whole catalogue), then write what was asked.

    Args:
        specs: policy specs (catalogue names, ``trtllm:``, ``py:``).
        space, bound: what to enumerate.
        against: differential mode's reference (a catalogue name or any spec).
        out_dir: write each witness's trace there.
        tests_dir: export a standalone pytest per witness there.
        force: replace files of the same names.
        progress: ``progress(done, total, schedules)`` over every policy's configurations.
    """
    specs = list(specs) or policy_names()
    results = []
    cache: dict = {}  # configurations two policies decide alike are searched once
    total_schedules = 0
    for i, spec in enumerate(specs):
        step = None
        if progress is not None:
            def step(done, n, schedules, _i=i, _base=total_schedules):
                progress(_i * 100 + (100 * done) // max(n, 1), 100 * len(specs), _base + schedules)
        res = explore(spec, space, bound, against=against, kv_outcomes=kv_outcomes, progress=step,
                      cache=cache)
        total_schedules += res.schedules
        results.append(res)
        if res.interrupted:
            break
    run = Exploration(results=results)
    by_name = dict(zip([r.policy for r in results], specs))
    if out_dir is not None:
        make_dir(out_dir)
        wanted = {(r.policy, w.slug): Path(out_dir) / f"{file_stem(r.policy, w)}.jsonl"
                  for r in results for w in r.witnesses}
        refuse_existing(wanted.values(), force=force)
        for r in results:
            for w in r.witnesses:
                run.traces[(r.policy, w.slug)] = write_records(w.records, wanted[(r.policy, w.slug)])
    if tests_dir is not None:
        make_dir(tests_dir)
        for r in results:
            for w in r.witnesses:
                stem = file_stem(r.policy, w).replace("-", "_").replace(".", "_")
                pins = [by_name[r.policy]] + ([against] if r.against else [])
                done = export_test(list(w.records), pins, Path(tests_dir) / f"test_explore_{stem}.py",
                                   source=f"forensics explore: {w.summary()}", force=force)
                run.tests[(r.policy, w.slug)] = done.path
    return run


__all__ = ["Exploration", "explore_policies", "file_stem"]
