"""``forensics export-test``: a trace as a standalone pytest regression test."""
from __future__ import annotations

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import (Output, OutputPath, echo_json, json_option, quiet_option,
                                   run_option)


@click.command("export-test")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=OutputPath(dir_okay=False),
              help="The test file to write (test_NAME.py).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="A policy whose verdicts to pin (repeatable; default: the whole catalogue).")
@click.option("--minimize/--no-minimize", "minimize_first", default=True, show_default=True,
              help="Shrink the trace first (keeps the failing policy failing, a passing one passing).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@run_option
@json_option
@quiet_option
def command(input_path: str, output: str, policies: tuple[str, ...], minimize_first: bool,
            force: bool, run_id: str | None, as_json: bool, quiet: bool) -> None:
    """Write a trace as a standalone pytest regression test.

    The test file holds INPUT's frames inline and asserts each policy's verdicts.

    \b
    Example:
      forensics export-test crash.ds -o tests/test_nvbug_6438685.py
      pytest tests/test_nvbug_6438685.py
    """
    from forensics.export_test import export_test
    from forensics.trace_records import load_records

    with library_errors():
        source = load_records(input_path, run=run_id) if run_id is not None else input_path
        result = export_test(source, list(policies) or None, output,
                             minimize_first=minimize_first, source=input_path, force=force)
    rows = [{"policy": e.policy, "verdict": _verdict(e), "crash_iter": e.crash_iter,
             "crash_rank": e.crash_rank, "first_leak_iter": e.first_leak_iter}
            for e in result.expectations]
    if as_json:
        echo_json({"path": str(result.path), "before": result.before.describe(),
                   "after": result.after.describe(),
                   "minimized_for": list(result.minimized_for) if result.minimized_for else None,
                   "expectations": rows})
        return
    out = Output(quiet)
    if result.minimized_for is not None:
        out.echo(f"minimized: {result.before.describe()} -> {result.after.describe()}")
    for r in rows:
        where = (f" at iteration {r['crash_iter']} on rank {r['crash_rank']}"
                 if r["verdict"] == "crash" else "")
        out.echo(f"  {r['policy']}: {r['verdict']}{where}")
    out.echo(f"wrote {result.path}")


def _verdict(e) -> str:
    """The verdict word of every command (``clean``, ``leak``, ``crash``)."""
    return "crash" if e.crash else "leak" if e.leak else "clean"
