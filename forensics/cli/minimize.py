"""``forensics minimize``: shrink a failing trace to a few ranks and iterations."""
from __future__ import annotations

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import (Output, OutputPath, echo_json, json_option, quiet_option,
                                   run_option)


@click.command("minimize")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=str))
@click.option("--policy", "policy", required=True, metavar="NAME",
              help="The policy the trace must keep leaking (or crashing) under.")
@click.option("--contrast", metavar="NAME", default=None,
              help="A policy the trace must keep passing under (no leak, no crash).")
@click.option("-o", "--output", required=True, type=OutputPath(dir_okay=False),
              help="Where to write the minimized trace (JSON Lines, the newest trace format, traces/FORMAT.md).")
@run_option
@click.option("--pass", "passes", multiple=True, metavar="NAME",
              help="Shrink passes to run, in order (default: decisions, ranks, iterations, requests).")
@click.option("--contiguous-iters", is_flag=True,
              help="Renumber the kept iterations contiguously when that changes no verdict.")
@json_option
@quiet_option
def command(input_path: str, policy: str, contrast: str | None, output: str, run_id: str | None,
            passes: tuple[str, ...], contiguous_iters: bool, as_json: bool, quiet: bool) -> None:
    """Shrink a failing trace by delta debugging.

    Delta debugging over INPUT's ranks, iterations and requests.

    The result still leaks (or, if INPUT crashes, still crashes) under --policy and, with
    --contrast, still passes under that policy. It is a valid trace of the newest format (traces/FORMAT.md).

    \b
    Example:
      forensics minimize crash.ds --policy prefix-2026 --contrast fix-16161 -o small.jsonl
    """
    from forensics.minimize import DEFAULT_PASSES, minimize_input

    with library_errors():
        result = minimize_input(input_path, policy, contrast, out_path=output, run=run_id,
                                passes=passes or DEFAULT_PASSES, contiguous_iters=contiguous_iters)
    o = result.outcome
    kept = f"{result.target} under {result.policy}"
    if o.crash:
        kept += f" ({o.crash_kind} at iteration {o.crash_iter}, rank {o.crash_rank})"
    if result.contrast:
        kept += f", no leak and no crash under {result.contrast}"
    if as_json:
        echo_json({"path": output, "policy": result.policy, "contrast": result.contrast,
                   "target": result.target, "kept": kept, "before": result.before.describe(),
                   "after": result.after.describe(), "replays": result.replays,
                   "rounds": result.rounds})
        return
    out = Output(quiet)
    out.echo(f"before: {result.before.describe()}")
    out.echo(f"after:  {result.after.describe()}")
    out.echo(f"kept:   {kept} ({result.replays} replays, {result.rounds} rounds)")
    out.echo(f"wrote {output}")
