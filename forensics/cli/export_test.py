"""``forensics export-test``: a trace as a standalone pytest regression test."""
from __future__ import annotations

import click

from forensics.cli.errors import library_errors


@click.command("export-test")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(path_type=str, dir_okay=False),
              help="The test file to write (test_NAME.py).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="A policy whose verdicts to pin (repeatable; default: the whole catalogue).")
@click.option("--minimize/--no-minimize", "minimize_first", default=True, show_default=True,
              help="Shrink the trace first (keeps the failing policy failing, a passing one passing).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
def command(input_path: str, output: str, policies: tuple[str, ...], minimize_first: bool,
            force: bool) -> None:
    """Write a trace as a standalone pytest regression test.

    The test file holds INPUT's frames inline and asserts each policy's verdicts.

    \b
    Example:
      forensics export-test crash.ds -o tests/test_nvbug_6438685.py
      pytest tests/test_nvbug_6438685.py
    """
    from forensics.export_test import export_test

    with library_errors():
        result = export_test(input_path, list(policies) or None, output,
                             minimize_first=minimize_first, source=input_path, force=force)
    if result.minimized_for is not None:
        click.echo(f"minimized: {result.before.describe()} -> {result.after.describe()}")
    for e in result.expectations:
        verdict = "leaks" if e.leak else "no leak"
        verdict += f", crashes at iteration {e.crash_iter} on rank {e.crash_rank}" if e.crash else ""
        click.echo(f"  {e.policy}: {verdict}")
    click.echo(f"wrote {result.path}")
