"""Exporting a trace as a standalone pytest file: the frames inline, the verdicts asserted.

The file needs only this package installed: it rebuilds the frames with
``replay.frames.RunFrames.from_records`` from a Python literal, replays them with ``replay.run``
under each policy and asserts the leak/crash verdicts (and where) that the replay gave when the
file was written. A failing assertion prints the replay's causal chain.

Minimizing first (``minimize_first=True``) keeps the failure of one *target* policy and the pass
of one *contrast* policy: the target is the recording build's policy when it is among the
chosen ones and fails, else the first chosen policy that crashes, else the first that leaks; the
contrast is the first chosen policy that neither leaks nor crashes. The other policies' verdicts
are those of the minimized trace.
"""
from __future__ import annotations

import dataclasses
import os
import textwrap
from pathlib import Path
from typing import Any, Optional, Sequence

from forensics.expectations import Expectation, Outcome, from_outcome
from forensics.trace_records import TraceSize, records_from_frames

#: Expectation keys asserted by the exported file, in this order.
ASSERTED_KEYS = ("leak", "crash", "crash_iter", "crash_rank", "first_leak_iter")


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What was exported.

    Fields:
        path: the written test file.
        records: the trace inlined in it.
        expectations: the asserted verdicts, one per policy.
        before, after: trace sizes before and after minimization (equal without it).
        minimized_for: ``(target, contrast)`` policies kept by minimization, or None.
    """

    path: Path
    records: list[dict]
    expectations: tuple[Expectation, ...]
    before: TraceSize
    after: TraceSize
    minimized_for: Optional[tuple[str, Optional[str]]]


def _records_of(frames_or_records: Any) -> list[dict]:
    if isinstance(frames_or_records, list):
        return [dict(r) for r in frames_or_records]
    if hasattr(frames_or_records, "req_offsets"):  # a RunFrames
        return records_from_frames(frames_or_records)
    from forensics.trace_records import load_records
    return load_records(frames_or_records)


def _policy_names(policies: Optional[Sequence[Any]]) -> list[str]:
    from replay.catalogue import policy_names
    if not policies:
        return policy_names()
    return [str(getattr(p, "name", p)) for p in policies]


def outcomes(records: list[dict], policies: Sequence[str]) -> dict[str, Outcome]:
    """The replay outcome of the records under each policy."""
    import replay
    from replay.frames import RunFrames
    from replay.resolve import resolve_policy

    frames = RunFrames.from_records(records)
    return {p: Outcome.of(replay.run(frames, policy=resolve_policy(p))) for p in policies}


def choose_target(records: list[dict], results: dict[str, Outcome]) -> tuple[Optional[str], Optional[str]]:
    """``(target, contrast)`` for minimization (see the module docstring); target None if none fails."""
    build = str(records[0].get("build", ""))
    failing = [p for p, o in results.items() if o.leak or o.crash]
    passing = [p for p, o in results.items() if not (o.leak or o.crash)]
    if build in failing:
        target = build
    else:
        crashing = [p for p in failing if results[p].crash]
        target = (crashing or failing or [None])[0]
    return target, (passing[0] if passing else None)


def export_test(frames_or_records: Any, policies: Optional[Sequence[Any]] = None,
                out_path: str | os.PathLike = "test_trace.py", *, minimize_first: bool = False,
                source: str = "", force: bool = False) -> ExportResult:
    """Write a standalone pytest file replaying a trace under policies with its verdicts pinned.

    Args:
        frames_or_records: trace records (v1 or v2), a ``RunFrames``, a dataset, or an input path.
        policies: policy specs to pin (default: the whole catalogue).
        out_path: the ``test_*.py`` file to write.
        minimize_first: shrink the trace first (``forensics.minimize``).
        source: where the trace came from, for the file's docstring.
        force: replace ``out_path`` if it exists (refused otherwise).

    Returns:
        :class:`ExportResult`.
    """
    from forensics.output_dir import atomic_path, refuse_existing

    refuse_existing([out_path], force=force)
    records = _records_of(frames_or_records)
    names = _policy_names(policies)
    before = TraceSize.of(records)
    minimized_for = None
    results = outcomes(records, names)
    if minimize_first:
        target, contrast = choose_target(records, results)
        if target is not None:
            from forensics.minimize import minimize
            shrunk = minimize(records, target, contrast)
            records = shrunk.records
            minimized_for = (target, contrast)
            results = outcomes(records, names)
    expectations = tuple(from_outcome(p, results[p]) for p in names)
    after = TraceSize.of(records)
    path = Path(out_path)
    text = render_test(records, expectations, source=source, before=before, after=after,
                       minimized_for=minimized_for, filename=path.name)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return ExportResult(path=path, records=records, expectations=expectations, before=before,
                        after=after, minimized_for=minimized_for)


def _expected_literal(e: Expectation) -> str:
    values = {"leak": e.leak, "crash": bool(e.crash), "crash_iter": e.crash_iter,
              "crash_rank": e.crash_rank, "first_leak_iter": e.first_leak_iter}
    return "{" + ", ".join(f"{k!r}: {values[k]!r}" for k in ASSERTED_KEYS) + "}"


_TEMPLATE = '''"""Replay regression test exported by `forensics export-test` (adp-forensics {version}).

{provenance}
Each policy replays the trace below and must give the verdicts in EXPECTED; a failure prints
the replay's causal chain. Run with `pytest {filename}` wherever adp-forensics is installed.
"""
import pytest

import replay
from replay.frames import RunFrames

#: The trace, request-state trace format v{trace_version} (traces/FORMAT.md): the run record, then one frame
#: per (iter, rank) with the rank's active_requests at pad entry.
RECORDS = [
{records}
]

#: Per policy: some dummy leaks, the run crashes, where, and the first iteration whose skip leaked.
EXPECTED = {{
{expected}
}}


@pytest.fixture(scope="module")
def frames():
    return RunFrames.from_records(RECORDS, source=__file__)


@pytest.mark.parametrize("policy", list(EXPECTED))
def test_replay(frames, policy):
    result = replay.run(frames, policy=policy)
    crash = result.crash
    got = {{
        "leak": not result.leaks.empty,
        "crash": crash is not None,
        "crash_iter": None if crash is None else crash.iter,
        "crash_rank": None if crash is None else crash.rank,
        "first_leak_iter": None if result.leaks.empty else int(result.leaks["iter_skipped"].min()),
    }}
    want = EXPECTED[policy]
    wrong = [f"{{key}}: expected {{want[key]!r}}, replay gives {{got[key]!r}}"
             for key in want if got[key] != want[key]]
    chain = "\\n".join(result.explain()) or f"no leak and no crash under {{policy}}"
    assert not wrong, f"{{policy}}: " + "; ".join(wrong) + "\\ncausal chain:\\n" + chain
'''


def render_test(records: list[dict], expectations: Sequence[Expectation], *, source: str = "",
                before: Optional[TraceSize] = None, after: Optional[TraceSize] = None,
                minimized_for: Optional[tuple[str, Optional[str]]] = None,
                filename: str = "THIS_FILE.py") -> str:
    """The text of the exported test file (pure; :func:`export_test` writes it)."""
    from forensics.version import __version__

    prov = [f"Source: {source}." if source else "Source: in-memory records."]
    if minimized_for is not None and before is not None and after is not None:
        target, contrast = minimized_for
        against = f" and passing under {contrast}" if contrast else ""
        prov.append(f"Minimized (kept failing under {target}{against}): {before.describe()} -> "
                    f"{after.describe()}.")
    elif after is not None:
        prov.append(f"Size: {after.describe()}.")
    prov = [textwrap.fill(p, width=96) for p in prov]
    body = ",\n".join(f"    {r!r}" for r in records)
    expected = ",\n".join(f"    {e.policy!r}: {_expected_literal(e)}" for e in expectations)
    run = next((r for r in records if r.get("kind") == "run"), {})
    text = _TEMPLATE.format(version=__version__, provenance="\n".join(prov), records=body,
                            expected=expected, filename=filename,
                            trace_version=run.get("version", "?"))
    return text


__all__ = ["ExportResult", "export_test", "render_test", "outcomes", "choose_target",
           "ASSERTED_KEYS"]
