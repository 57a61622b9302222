"""``forensics postmortem``: from crash logs (and traces) to a report in one command."""
from __future__ import annotations

import contextlib
import sys

import click

from forensics.cli.cluster_options import cluster_client, cluster_options
from forensics.cli.errors import library_errors


def _progress(console, enabled: bool):
    """A context yielding a ``progress(message)`` callback: a spinner on stderr, or nothing."""
    if not enabled:
        return contextlib.nullcontext(lambda message: None)

    @contextlib.contextmanager
    def spinner():
        with console.status("starting") as status:
            yield lambda message: status.update(message)
    return spinner()


def _render(console, r) -> None:
    """The short terminal summary."""
    from rich.table import Table

    crash = r.log_crash
    if crash is None:
        console.print("[bold]Crash in the logs:[/] none")
    else:
        it = "unknown" if crash.iter is None else str(crash.iter)
        rank = "unknown" if crash.rank is None else str(crash.rank)
        code = f" ({crash.code_location.rsplit('/', 1)[-1]})" if crash.code_location else ""
        console.print(f"[bold]Crash in the logs:[/] [red]{crash.kind.value}[/] on rank {rank}, "
                      f"iteration {it}, at {crash.where}{code}", highlight=False)
        if crash.policies:
            console.print(f"  produced by: {', '.join(crash.policies)}", highlight=False)
    if r.verdicts:
        t = Table(title=f"Replay of run {r.run}", title_justify="left", show_lines=False)
        t.add_column("policy")
        t.add_column("verdict")
        t.add_column("what happens", overflow="fold")
        colour = {"crash": "red", "leak": "yellow", "clean": "green"}
        for v in r.verdicts:
            name = v.policy + (" *" if v.is_recording_build else "")
            mark = (" (matches the logged crash)" if v.reproduces_log_crash else
                    " (matches the logged warnings)" if v.reproduces_log_warnings else "")
            t.add_row(name, f"[{colour.get(v.verdict, 'white')}]{v.verdict}[/]", v.text + mark)
        console.print(t)
        if any(v.is_recording_build for v in r.verdicts):
            console.print("  * the build that recorded the run", highlight=False)
    else:
        console.print("[bold]Replay:[/] not possible (no request-state trace in the inputs)")
        console.print("[bold]From the logs alone:[/]")
        for line in r.logs_only.conclusions():
            console.print(f"  - {line}", highlight=False)
    if r.chain:
        console.print(f"[bold]Causal chain ({r.chain_policy}):[/] {r.chain[0]}", highlight=False)
    console.print(f"[bold]Status {r.exit_status}:[/] {r.status_reason}", highlight=False)
    console.print(f"[bold]Next step:[/] {r.next_step}", highlight=False)
    console.print(f"Report: {r.report_html} (also {r.report_md.name}, {r.findings_json.name}, "
                  f"{len(r.figures)} figure(s) in {r.out_dir})", highlight=False)


@click.command("postmortem")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=str),
              help="Report directory (report.md, report.html, findings.json, figures).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Replay only this policy (repeatable; default: the whole catalogue).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--force", is_flag=True,
              help="Write into a non-empty directory that holds no report of this tool.")
@cluster_options
def command(inputs: tuple[str, ...], out_dir: str, policies: tuple[str, ...], quiet: bool,
            force: bool, workers: int | None, scheduler: str | None) -> None:
    """Explain a crashed fleet from its logs; write a report.

    INPUT is any mix of executor logs, iteration-stats JSON and request-state traces (files or
    directories), or a dataset. The ingested dataset is cached in REPORT_DIR/.dataset and reused
    while the inputs are unchanged.

    Exit status: 0 no leak or crash, 1 leak or crash explained, 2 bad input, 3 a crash in the
    logs that is not explained (the summary says why).

    With --workers/--scheduler (the [dask] extra) the input files are ingested in parallel.

    \b
    Example:
      forensics postmortem traces/samples/nvbug-6438685 -o report
      forensics postmortem fleet-logs/ -o report --workers 2
    """
    from rich.console import Console

    from forensics.report.postmortem import postmortem

    err = Console(stderr=True)
    out = Console(highlight=False, soft_wrap=False)
    show = not quiet and sys.stderr.isatty()
    with library_errors(), cluster_client(workers, scheduler) as client, \
            _progress(err, show) as progress:
        result = postmortem(list(inputs), out_dir, policies=list(policies) or None,
                            progress=progress, force=force, client=client)
    _render(out, result)
    raise click.exceptions.Exit(result.exit_status)
