"""``forensics bisect``: the first TensorRT-LLM revision whose pad code stops or starts leaking."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import BadInput, library_errors
from forensics.cli.options import Output, isolate_option, quiet_option, run_option


@click.command("bisect")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=str))
@click.option("--repo", required=True, type=click.Path(path_type=str, file_okay=False),
              help="TensorRT-LLM git checkout.")
@click.option("--good", required=True, help="Older revision (sha, tag, branch).")
@click.option("--bad", required=True, help="Newer revision.")
@run_option
@isolate_option
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@quiet_option
def command(input_path: str, repo: str, good: str, bad: str, run_id: str | None, isolate: bool,
            as_json: bool, quiet: bool) -> None:
    """Find the commit whose real pad code changes the verdict.

    Replays INPUT under each revision's real pad code, walking only commits that touch the
    executor or scheduler files, and reports the first whose verdict changes.

    Each revision's extracted pad code runs as you, like `git bisect run` runs the tree it
    checks out; --isolate runs it in a child process with no network and a read-only view of
    the file system.

    \b
    Example:
      forensics bisect crash.ds --repo ~/src/TensorRT-LLM --good v1.2.0 --bad main
    """
    from replay.bisect import bisect_input
    _check_checkout(repo)
    with library_errors():
        result = bisect_input(input_path, repo, good, bad, run=run_id, isolate=isolate)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        Output(quiet).echo("\n".join(result.summary()))


def _check_checkout(repo: str) -> None:
    """A clear error before any revision is looked up: the path must be a git checkout."""
    import subprocess
    from pathlib import Path

    if not Path(repo).is_dir():
        hint = "pass a TensorRT-LLM git checkout (git clone https://github.com/NVIDIA/TensorRT-LLM)"
        raise BadInput(f"--repo {repo}: no such directory\nhint: {hint}", path=repo, hint=hint)
    try:
        ok = subprocess.run(["git", "-C", repo, "rev-parse", "--git-dir"], capture_output=True,
                            timeout=30).returncode == 0
    except FileNotFoundError:
        hint = "install git; bisect walks the checkout's history"
        raise BadInput(f"git is not installed\nhint: {hint}", hint=hint) from None
    if not ok:
        hint = ("pass the directory of a TensorRT-LLM clone, e.g. --repo ~/src/TensorRT-LLM; to "
                "replay one source tree without history use "
                f"`forensics replay INPUT --policy trtllm:{repo}`")
        raise BadInput(f"--repo {repo}: not a git checkout (no .git above it)\nhint: {hint}",
                       path=repo, hint=hint)
