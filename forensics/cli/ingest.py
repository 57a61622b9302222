"""``forensics ingest``: logs, stats JSON and traces into a Parquet dataset."""
from __future__ import annotations

import click

from forensics.cli.errors import BadInput, library_errors
from forensics.cli.options import Output, echo_json, json_option, quiet_option
from forensics.ingest import ingest
from forensics.ingest.kinds import KINDS
from forensics.report.summary import render_text


@click.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=str),
              help="Dataset directory to write (replaced atomically if it exists).")
@click.option("--kind", type=click.Choice(KINDS), default=None,
              help="Read every input as this kind instead of detecting it per file.")
@json_option
@quiet_option
def command(inputs: tuple[str, ...], output: str, kind: str | None, as_json: bool,
            quiet: bool) -> None:
    """Ingest logs, iteration-stats JSON and traces into a dataset.

    INPUT is a file (plain, .gz or .zst) or a directory: every .log .txt .out .err .json .jsonl
    file below it (optionally .gz/.zst) is read. The kind of each file is detected from its
    content. A missing or binary input is refused (exit code 2) while the others are still
    ingested. Open the result with `forensics summary DATASET` or `forensics.load(DATASET)`.

    \b
    Example:
      forensics ingest logs/ iteration_stats.jsonl traces/run.jsonl.zst -o crash.ds
    """
    with library_errors():
        report = ingest(list(inputs), output, kind=kind, quiet=quiet or as_json)
    if as_json:
        echo_json({"path": str(report.path), "inputs": [str(i) for i in report.inputs],
                   "refused": [str(r) for r in report.refused],
                   "skipped": [str(x) for x in report.skipped],
                   "summary": report.summary.to_dict()})
    else:
        out = Output(quiet)
        out.echo(f"ingested {len(report.inputs)} input(s) into {report.path}")
        out.echo(render_text(report.summary))
    if report.skipped and not quiet:
        click.echo(f"skipped {len(report.skipped)} unrecognised file(s) in directories, e.g. "
                   f"{report.skipped[0]}", err=True)
    if report.refused:
        # The dataset was written; exit code 2 still says some inputs were refused.
        raise BadInput("not ingested:\n" + "\n".join(f"  {r}" for r in report.refused))
