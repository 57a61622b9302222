"""``forensics identify``: which catalogue policy a TensorRT-LLM build behaves like."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors


@click.command("identify")
@click.argument("spec", metavar="trtllm:PATH[@REV]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def command(spec: str, as_json: bool) -> None:
    """Which catalogue policy a build's real pad code behaves as.

    Replays a battery of small hand-made traces (one per behaviour the executor's unit tests and
    sources pin) through the build's pad code and through every catalogue policy, and prints,
    behaviour by behaviour, which policies decide as the build does. Exit 0 when one policy
    matches on every behaviour, 1 when none does (the behaviours without a match are listed).
    The build's extracted method bodies run: use it on sources you trust.

    \b
    Example:
      forensics identify trtllm:~/src/TensorRT-LLM@v1.2.0
      forensics identify trtllm:installed --json
    """
    from replay.identify import identify
    if not spec.startswith("trtllm:"):
        spec = f"trtllm:{spec}"
    with library_errors():
        result = identify(spec)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo("\n".join(result.summary()))
    raise SystemExit(0 if result.ok else 1)
