"""The post-mortem pipeline: ingest -> frames -> replay -> verdicts -> report, in one call.

Ingest (reusing the dataset cached in ``OUT_DIR/.dataset`` while the inputs are unchanged), read
the crash signatures in the logs, replay every policy on each traced run, judge with the rules
of :mod:`forensics.verdicts`, then write ``report.md``, ``report.html`` (self-contained),
``findings.json`` and the figures as SVG. The exit status is :mod:`forensics.verdicts`'s.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from forensics import verdicts as V
from forensics.crash_signatures import crash_in_logs, find_signatures
from forensics.dataset.summary import summarize
from forensics.errors import InputError
from forensics.findings import report_findings
from forensics.logs_only import logs_only_findings
from forensics.open_paths import witness_files
from forensics.output_dir import ReportDir, refuse_input_as_output
from forensics.postmortem_result import PostmortemResult
from forensics.readers.on_cluster import as_dataset
from forensics.report.figure_views import figure_views
from forensics.report.narrative import build_document, figure_blocks, figure_policies
from forensics.report.timeline import TIMELINE_FILE, story_result, story_timeline_json
from forensics.report.write import write_report
from replay.frame_windows import FrameWindows
from replay.frames import RunFrames
from replay.resolve import resolve_policies
from replay.stage_clock import CLOCK
from replay.streaming import replay_windows
from replay.walk import run_all

#: Where the dataset is cached inside the report directory.
DATASET_DIR = ".dataset"
#: Where the replays' decisions and ledgers are written (one directory per run and policy).
REPLAY_DIR = ".replay"

Progress = Callable[[str], None]


def postmortem(inputs: Sequence[str | os.PathLike] | str | os.PathLike, out_dir: str | os.PathLike,
               *, policies: Optional[Sequence[str]] = None,
               cache_dir: Optional[str | os.PathLike] = None,
               progress: Optional[Progress] = None, force: bool = False,
               window: Optional[int] = None, client: Any = None, run: Optional[str] = None,
               counts: Optional[Callable[[str, int, int], None]] = None,
               ingest_bar: bool = False, jobs: Optional[int] = None) -> PostmortemResult:
    """Run the whole post-mortem; write the report into ``out_dir`` (replacing an earlier one;
    a non-empty directory without one is refused unless ``force``; an input is never an output).

    ``policies``: specs to replay (default: the catalogue); ``cache_dir``: the dataset cache
    (default ``OUT_DIR/.dataset``); ``window``: iterations per replay window; ``client``: a
    ``distributed.Client`` ingesting one task per file; ``run``: the traced run to replay
    (default: all, the first one's story told); ``progress(message)`` and ``counts(phase, done,
    total)`` report progress; ``ingest_bar``: the ingest's byte bar; ``jobs``: processes reading
    the input files at once. Raises InputError, DatasetError, PolicyError on bad input.

    Example: ``postmortem(["traces/samples/nvbug-6438685"], "report").exit_status`` is 1.
    """
    say = progress or (lambda _: None)
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    out = Path(out_dir)
    pols = resolve_policies(list(policies) if policies else None)
    refuse_input_as_output(out, inputs)
    report_dir = ReportDir(out, force=force, keep=[DATASET_DIR, REPLAY_DIR], ours_if=["findings.json"],
                           legacy_files=["report.md", "report.html", "findings.json", "*.png", "*.svg"]).open()
    CLOCK.reset()
    say("ingesting inputs")
    # the report directory, marked by its manifest since open(), is left out of any walk; an
    # input that breaks its format is refused and named, the others are used
    with CLOCK.phase("ingest"):
        ds = as_dataset(inputs, cache_dir=cache_dir if cache_dir is not None else out / DATASET_DIR,
                        client=client, quiet=not ingest_bar, jobs=jobs, keep_going=True)
    # The dataset's summary (a scan of its tables, ~0.35 s CPU for a fleet hour of 32 ranks,
    # measured) is read on a thread while the crash signatures are read and the runs replayed:
    # only the report needs it. It reads the files through Arrow, no DataFrame of ``ds``.
    with ThreadPoolExecutor(1, thread_name_prefix="summary") as summary_pool:
        summary = summary_pool.submit(summarize, ds)
        return _after_ingest(ds, summary, inputs, out, report_dir, pols, policies, run, window,
                             say, counts)


def _after_ingest(ds, summary_job, inputs, out: Path, report_dir: ReportDir, pols, policies, run,
                  window, say: Progress, counts) -> PostmortemResult:
    """:func:`postmortem` once the dataset is there (``summary_job``: its summary, coming)."""
    refused = list(ds.meta.get("refused", []))

    runs = ds.traced_runs()
    if run is not None:
        if run not in runs:
            raise InputError(f"no traced run {run!r} in the inputs",
                             hint="runs: " + (", ".join(runs) or "none (no request-state trace)"))
        runs = [run]
    # Windows of iterations, replayed under every policy in one pass: memory holds one window.
    with CLOCK.phase("crash signatures"):
        windows = {r: FrameWindows(ds, r, size=window) for r in runs}
        config = windows[runs[0]].config if runs else None
        say("reading crash signatures")
        if not runs:
            signatures, log_crash, lo = _logs_findings(ds, pols, config, has_traces=False)
    lov = None
    if not runs:
        if log_crash is not None and log_crash.kind.is_cause:
            lov = V.judge_logs(ds, log_crash, lo, pols)
            log_crash = dataclasses.replace(log_crash, policies=lov.policies, reason=lov.reason)
            signatures = [log_crash if (s.source, s.line) == (log_crash.source, log_crash.line)
                          else s for s in signatures]
        with CLOCK.phase("replay"):
            results = _replay(ds, windows, pols, out / REPLAY_DIR, say, counts)
    else:
        # The logs' crash signatures are read on a thread while the runs are replayed: the
        # replay needs nothing of them, only the verdicts do. Measured at 64 ranks x 100k
        # iterations, dataset cached, 6 alternating runs each: the signatures phase went from
        # 0.23-0.32 s to 0.08-0.12 s, the replay beside it a little slower (the GIL), the
        # post-mortem 6.96 -> 6.74 s wall (medians, with the timeline's start below).
        with ThreadPoolExecutor(1, thread_name_prefix="signatures") as logs_pool:
            logs_job = logs_pool.submit(_logs_findings, ds, pols, config, has_traces=True)
            with CLOCK.phase("replay"):
                results = _replay(ds, windows, pols, out / REPLAY_DIR, say, counts)
            signatures, log_crash, lo = logs_job.result()
    primary = results[runs[0]] if runs else {}
    # The zoomable timeline of the story's replay (forensics.report.timeline) is built on a
    # thread from here, beside the verdicts and the figures: it reads the story's decisions back
    # from Parquet (outside the GIL), and nothing of it is their input. The story is the
    # replay of the policy the verdicts choose (``story_policy``): the recording build's
    # whenever it reproduces the crash, leaks or crashes, or nothing does, so the timeline is
    # started on that replay before the verdicts are known and started again on the chosen one
    # in the other cases (two workers: the guess is not waited for).
    timeline_pool = ThreadPoolExecutor(2, thread_name_prefix="timeline")
    try:
        guess = story_result(primary, config.build) if primary else None
        story = timeline_pool.submit(_timeline_json, primary, config.build) if primary else None
        with CLOCK.phase("verdicts"):
            j = V.judge(ds, primary, pols, config, log_crash, signatures, lo, refused=refused,
                        has_traces=bool(runs), inputs=inputs, lov=lov)
            identified = _identify_real_code(policies or (), say)
            next_step = j.next_step + "".join(" " + V.era_sentence(s, i)
                                              for s, i in identified.items())
            j = dataclasses.replace(j, next_step=next_step)
        if primary and story_result(primary, j.chain_policy or config.build) is not guess:
            story.cancel()
            story = timeline_pool.submit(_timeline_json, primary, j.chain_policy or config.build)
        summary = summary_job.result()
        say("drawing figures")
        with CLOCK.phase("figures"):
            advised = [a.policy for a in j.recommended]
            drawn = figure_policies(primary, j.chain_policy, j.verdicts, advised)
            figs = figure_blocks(ds, runs[0] if runs else None, figure_views(primary, drawn),
                                 j.chain_policy, j.verdicts, lo, config, log_crash=log_crash,
                                 recommended=advised)
            findings = report_findings(summary, results, j, signatures, log_crash, lo, config, runs,
                                         lov=lov, identified=identified)
        say("writing the report")
        with CLOCK.phase("timeline"):   # what is left of it once the figures are drawn
            if story is not None:
                report_dir.write(TIMELINE_FILE, story.result())
    finally:
        timeline_pool.shutdown(wait=True, cancel_futures=True)
    with CLOCK.phase("report"):
        doc = build_document(summary=summary, run=runs[0] if runs else None, config=config,
                             verdicts=j.verdicts, signatures=signatures, log_crash=log_crash,
                             logs_only=lo, chain_policy=j.chain_policy, chain=j.chain,
                             next_step=j.next_step, status=j.status, reason=j.reason,
                             figures=figs, results=primary, opening=j.opening,
                             headline=j.headline, mechanisms=j.mechanisms,
                             recommended=j.recommended, logs_verdict=lov, verdict=j.verdict,
                             what_to_do=j.what_to_do)
        written, md, html_path, fj = write_report(report_dir, doc, figs, findings,
                                                  extra=witness_files(j.recommended))
    return PostmortemResult(
        out_dir=out, report_md=md, report_html=html_path, findings_json=fj,
        figures=tuple(written), run=runs[0] if runs else None, verdicts=j.verdicts,
        log_crash=log_crash, signatures=tuple(signatures), chain_policy=j.chain_policy,
        chain=tuple(j.chain), logs_only=lo, next_step=j.next_step, exit_status=j.status,
        status_reason=j.reason, summary=summary, findings=findings, opening=j.opening,
        headline=j.headline, mechanisms=j.mechanisms, recommended=j.recommended, logs_verdict=lov,
        verdict=j.verdict, what_to_do=j.what_to_do,
        identified=identified, timings=CLOCK.report())


def _logs_findings(ds, pols, config, *, has_traces: bool) -> tuple[list, Any, Any]:
    """What the logs say: their crash signatures (``find_signatures``), the crash among them
    (``crash_in_logs``, or None) and the logs-only findings (``logs_only_findings``)."""
    with CLOCK.stage("crash signatures"):
        signatures = find_signatures(ds.events, pols, config=config, iterations=ds.iterations)
        lo = logs_only_findings(ds.iterations, ds.events,
                                tp_size=config.tp_size if config else None, has_traces=has_traces)
        return signatures, crash_in_logs(signatures), lo


def _replay(ds, windows: dict, pols, replay_dir: Path, say: Progress, counts) -> dict[str, dict]:
    """Every policy's result on each traced run. A run of one window is replayed in memory
    (``run_all``; writing 20 small Parquet files cost more than the replay itself, measured on
    the bundled sample: 0.16 s CPU streamed, 0.06 s in memory); a longer one window by window,
    its decisions and ledgers written below ``replay_dir`` (``replay_windows``)."""
    if replay_dir.is_dir():  # an earlier run's decisions and ledgers
        shutil.rmtree(replay_dir)
    total = sum(len(w.iters) for w in windows.values()) * len(pols)
    done, results = 0, {}
    for k, (key, w) in enumerate(windows.items()):
        if len(w) == 1:
            say(f"replaying {key} under {len(pols)} policies")
            results[key] = run_all(RunFrames.from_dataset(ds, run=key), pols)
        else:
            def step(i: int, n: int, key: str = key, w=w, before: int = done) -> None:
                say(f"replaying {key} under {len(pols)} policies"
                    + (f" (window {i + 1}/{n})" if n > 1 else ""))
                if counts is not None and i:   # the windows before this one are done
                    counts("replay", before + min(i * w.size, len(w.iters)) * len(pols), total)
            results[key] = replay_windows(w, pols, replay_dir / f"run-{k:03d}", progress=step)
        done += len(w.iters) * len(pols)
        if counts is not None:
            counts("replay", done, total)
    return results


def _timeline_json(results: dict, policy: str | None) -> bytes:
    """``timeline.json`` of the story (``story_timeline_json``), its time a stage of its own
    (it runs beside the figures)."""
    with CLOCK.stage("timeline"):
        return story_timeline_json(results, policy)


def _identify_real_code(policies: Sequence, say: Progress) -> dict:
    """``forensics identify`` of every ``trtllm:`` policy given: the build's era."""
    # A spec, or its policy resolved already (``--isolate``: the code runs in a child process).
    names = {(s if isinstance(s, str) else getattr(s, "name", "")): s for s in policies}
    specs = {name: s for name, s in names.items() if name.startswith("trtllm:")}
    if not specs:
        return {}
    # Imported only when a ``trtllm:`` policy is given (36 ms measured, on no other path).
    from replay.identify import identify
    out = {}
    for name, spec in specs.items():
        say(f"identifying {name}")
        out[name] = identify(spec)
    return out

__all__ = ["DATASET_DIR", "REPLAY_DIR", "PostmortemResult", "postmortem"]
