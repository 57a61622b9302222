"""``forensics summary``: what a dataset holds, on one screen."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import Output, quiet_option
from forensics.dataset.summary import summarize
from forensics.report.summary import render_text


@click.command("summary")
@click.argument("dataset", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@quiet_option
def command(dataset: str, as_json: bool, quiet: bool) -> None:
    """Summarise what a dataset holds.

    Ranks seen, iteration ranges (log lines, stats, trace frames), rows per table, events by
    kind, iteration line formats (V1..V5), trace runs, frames per traceback and the collector
    formats seen (kubectl, docker, journald, tab-separated exports, srun, mpirun, pdsh).

    \b
    Example:
      forensics summary crash.ds
      forensics summary crash.ds --json | jq .events_by_kind
    """
    with library_errors():
        summary = summarize(dataset)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        Output(quiet).echo(render_text(summary))
