"""``forensics postmortem``: from crash logs (and traces) to a report in one command."""
from __future__ import annotations

import contextlib
import importlib
import json

import click

from forensics.cli.cluster_options import cluster_client, cluster_options
from forensics.cli.errors import library_errors, set_exit_status
from forensics.cli.options import (
    Output,
    OutputPath,
    cell,
    isolate_option,
    echo_json,
    json_option,
    progress_enabled,
    quiet_option,
    run_option,
    verdict_markup,
)
from forensics.cli.process_setup import (imports_without_gc, one_blas_thread, started_as,
                                        system_arrow_pool)
from forensics.output_dir import write_atomic
from forensics.report.inline import plain


@contextlib.contextmanager
def _phases(enabled: bool):
    """``(progress(message), counts(phase, done, total))`` drawing on stderr: a line per step
    and a bar with the real total for the replay (iterations replayed over all policies).
    The ingest draws its own byte bar. Nothing when ``enabled`` is False."""
    if not enabled:
        yield (lambda message: None), None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=console, transient=True)
    tasks: dict[str, int] = {}

    def progress(message: str) -> None:
        if not message.startswith("replaying"):
            console.print(f"[dim]{cell(message)}[/]", highlight=False)

    def counts(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            bar.start()
            tasks[phase] = bar.add_task(f"{phase}: iterations", total=total)
        bar.update(tasks[phase], completed=done)
        if done >= total:
            bar.stop()

    try:
        yield progress, counts
    finally:
        bar.stop()


def _render(out: Output, r) -> None:
    """The terminal summary in the report's order: the verdict, what to do, then the evidence
    (the causal chain, the crash in the logs, the replays, the exit status)."""
    from rich.table import Table

    e = cell

    out.print(f"[bold]{e(plain(r.verdict or r.headline))}[/]")
    if r.what_to_do:
        out.print("[bold]What to do:[/]")
        for step in r.what_to_do:
            out.echo(f"  - {step.plain()}")
    else:
        out.print(f"[bold]Next step:[/] {e(r.next_step)}")
    if r.opening and (r.chain or r.log_crash is not None):
        out.print("[bold]Causal chain:[/]")
        out.echo(f"  {plain(r.opening)}")
    crash = r.log_crash
    if crash is None:
        out.print("[bold]Crash in the logs:[/] none")
    else:
        it = "unknown" if crash.iter is None else str(crash.iter)
        rank = "unknown" if crash.rank is None else str(crash.rank)
        code = f" ({crash.code_location.rsplit('/', 1)[-1]})" if crash.code_location else ""
        out.print(f"[bold]Crash in the logs:[/] [red]{e(crash.title)}[/] on rank {rank}, "
                  f"iteration {it}, at {e(crash.where)}{e(code)}")
        if crash.policies:
            out.print(f"  produced by: {e(', '.join(crash.policies))}")
    if r.verdicts:
        t = Table(title=f"Replay of run {e(str(r.run))}", title_justify="left", show_lines=False)
        t.add_column("policy")
        t.add_column("verdict")
        t.add_column("what happens", overflow="fold")
        for v in r.verdicts:
            name = v.policy + (" *" if v.is_recording_build else "")
            mark = (" (matches the logged crash)" if v.reproduces_log_crash else
                    " (matches the logged warnings)" if v.reproduces_log_warnings else "")
            t.add_row(e(name), verdict_markup(v.verdict), e(v.text + mark))
        out.print(t)
        if any(v.is_recording_build for v in r.verdicts):
            out.print("  * the build that recorded the run")
    else:
        out.print("[bold]Replay:[/] not possible (no request-state trace in the inputs)")
        out.print("[bold]From the logs alone:[/]")
        for line in r.logs_only.conclusions():
            out.echo(f"  - {line}")
    for k, m in enumerate(r.mechanisms):
        out.print(f"[bold]Mechanism {k + 1} of {len(r.mechanisms)} ({m.title()}):[/] {e(m.text)}")
    out.print(f"[bold]Exit status {r.exit_status}:[/] {e(r.status_reason)}")
    out.echo(f"Report: {r.report_html} (also {r.report_md.name}, {r.findings_json.name}, "
              f"{len(r.figures)} figure(s) in {r.out_dir})")


@click.command("postmortem")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", "out_dir", required=True, type=OutputPath(),
              help="Report directory (report.md, report.html, findings.json, figures).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Replay only this policy (repeatable; default: the whole catalogue).")
@click.option("--force", is_flag=True,
              help="Write into a non-empty directory that holds no report of this tool.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes reading the input files at once, one file each; 1: one file "
                   "after the other (default: a large run's files are read on two threads of "
                   "this process; N processes cost N interpreters' memory).")
@click.option("--timings", "timings_file", type=click.Path(dir_okay=False, path_type=str),
              default=None, metavar="FILE",
              help="Write where the time went (wall and CPU seconds per phase and per stage: "
                   "reading, frames, replay, writing) to FILE as JSON.")
@cluster_options
@run_option
@isolate_option
@json_option
@quiet_option
def command(inputs: tuple[str, ...], out_dir: str, policies: tuple[str, ...], force: bool,
            jobs: int | None, timings_file: str | None, workers: int | None,
            scheduler: str | None, run_id: str | None, isolate: bool, as_json: bool,
            quiet: bool) -> None:
    """Explain a crashed fleet from its logs; write a report.

    INPUT is any mix of executor logs, iteration-stats JSON and request-state traces (files or
    directories), or a dataset. The ingested dataset is cached in REPORT_DIR/.dataset and reused
    while the inputs are unchanged. --json prints findings.json.

    Exit status: 0 no leak or crash, 1 leak or crash explained, 2 bad input, 3 a crash in the
    logs that is not explained (the summary says why).

    With --workers/--scheduler (the [dask] extra) the input files are ingested in parallel.
    A --policy trtllm:/py: runs that code as you (like `git bisect run`); --isolate runs it in
    a child process with no network and a read-only view of the file system.

    \b
    Example:
      forensics postmortem traces/samples/nvbug-6438685 -o report
      forensics postmortem fleet-logs/ -o report --workers 2
    """
    lean = started_as("postmortem")
    if lean:
        one_blas_thread()
        # Its ingest, as ``forensics ingest``'s, and its replay: mimalloc handed each window's
        # freed buffers back and faulted fresh pages in for the next (64x100k: ~380k faults).
        system_arrow_pool()
    with imports_without_gc() if lean else contextlib.nullcontext():
        from forensics.pipeline import postmortem
        from replay.isolation import isolate_specs
        # What every traced post-mortem imports on its way, here with the collector off.
        for name in ("forensics.cluster", "forensics.readers", "replay.streaming", "replay.frames"):
            importlib.import_module(name)

    show = progress_enabled(quiet)
    with library_errors(), cluster_client(workers, scheduler) as client, \
            _phases(show) as (progress, counts):
        chosen = list(policies) or None
        result = postmortem(list(inputs), out_dir,
                            policies=isolate_specs(chosen) if isolate else chosen,
                            progress=progress, counts=counts, run=run_id, ingest_bar=show,
                            force=force, client=client, jobs=jobs)
    set_exit_status(result.exit_status)
    if timings_file:
        write_atomic(timings_file, json.dumps(result.timings, indent=1).encode() + b"\n")
    if as_json:
        echo_json(result.findings)
    elif not quiet:      # rich is imported only for a summary that is printed
        _render(Output(quiet), result)
    raise click.exceptions.Exit(result.exit_status)
