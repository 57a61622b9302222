"""``forensics bisect``: the first TensorRT-LLM revision whose pad code stops or starts leaking."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors


@click.command("bisect")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=str))
@click.option("--repo", required=True, type=click.Path(path_type=str, file_okay=False),
              help="TensorRT-LLM git checkout.")
@click.option("--good", required=True, help="Older revision (sha, tag, branch).")
@click.option("--bad", required=True, help="Newer revision.")
@click.option("--run", "run_key", default=None, help="Run key when INPUT holds several runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def command(input_path: str, repo: str, good: str, bad: str, run_key: str | None,
            as_json: bool) -> None:
    """Find the commit whose real pad code changes the verdict.

    Replays INPUT under each revision's real pad code, walking only commits that touch the
    executor or scheduler files, and reports the first whose verdict changes.

    \b
    Example:
      forensics bisect crash.ds --repo ~/src/TensorRT-LLM --good v1.2.0 --bad main
    """
    from replay.bisect import bisect_input
    with library_errors():
        result = bisect_input(input_path, repo, good, bad, run=run_key)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo("\n".join(result.summary()))
