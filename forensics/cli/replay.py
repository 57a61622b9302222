"""``forensics replay``: replay a recorded run under executor versions and find dummy leaks."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors, set_exit_status
from forensics.cli.options import (Output, cell, isolate_option, quiet_option, run_option,
                                   verdict_markup)


def _verdict_row(name: str, res) -> str:
    """``prefix-2026: crash at iter 76 on rank 2 - 22 leaked dummies, 11 fleet-wide skips (...)``"""
    text = f"[bold]{cell(name)}[/]: {verdict_markup(res.verdict)}"
    if res.gated is not None:  # the run names no model and the version's gates read it
        text += f" ({cell(res.verdict_text)})"
    if res.crash is not None:
        text += f" at iter {res.crash.iter} on rank {res.crash.rank}"
    n, skips = len(res.leak_records), len(res.skipped_iters)
    leaks = "no leak" if n == 0 else f"{n} leaked dumm{'y' if n == 1 else 'ies'}"
    text += f" - {leaks}, {skips} fleet-wide skip{'' if skips == 1 else 's'}"
    if res.dropped_iters:
        text += f", {len(res.dropped_iters)} iterations not replayable"
    return text + f"  ({cell(res.policy.title)})"


def _crash_cell(res) -> str:
    c = res.crash
    if c is None:
        return ""
    what = f"active {c.active} > expected {c.expected}" if c.kind == "assert" else c.kind
    return f"iter {c.iter}, rank {c.rank}: {what}"


def _render(console: Output, results, verbose: bool) -> None:
    """Per policy its verdict row and its leaks grouped by mechanism (every leak's chain with
    ``verbose``), then one table of the verdicts."""
    from rich.table import Table

    from forensics.report.chain import mechanisms  # pandas: not on the `--help` path

    spaced = False
    for name, res in results.items():
        console.print(_verdict_row(name, res))
        for mech in mechanisms(res):
            fatal = (" The fatal one: " + mech.items[0].replace("; fatal: ", "; then ") + "."
                     if mech.fatal else "")
            console.echo(f"  - {mech.title()}: {mech.text}{fatal}")
        if res.crash is not None and res.fatal_leak is None:
            console.echo(f"  - {res.story()[-1]}")
        if verbose and res.leak_records:   # explain() opens with the model condition, if any
            console.echo("  Leak by leak:")
            for chain in res.explain():
                console.echo(f"    - {chain}")
        for note in res.notes:
            console.echo(f"  note: {note}")
        spaced = not res.ok or verbose
        if spaced:
            console.echo()
    t = Table(title="Verdicts", title_justify="left", header_style="bold")
    for col in ("policy", "verdict", "leaks", "skips", "crash", "first divergence"):
        t.add_column(col)
    for name, res in results.items():
        d = res.first_divergence
        t.add_row(cell(name), verdict_markup(res.verdict), str(len(res.leak_records)),
                  str(len(res.skipped_iters)), _crash_cell(res),
                  "" if d is None else cell(f"iter {d.iter}, rank {d.rank}: {d.field} "
                                              f"{d.recorded} -> {d.replayed}"))
    if not spaced:
        console.echo()
    console.print(t)


@click.command("replay")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to replay under (repeatable; default: every catalogue policy).")
@run_option
@isolate_option
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@click.option("-v", "--verbose", is_flag=True,
              help="Every leak's causal chain, not only one paragraph per mechanism.")
@quiet_option
def command(inputs, policies, run_id, isolate, as_json, verbose, quiet) -> None:
    """Replay a run under executor versions; find leaked dummies.

    Per policy: the verdict, the leaked dummies grouped by mechanism (the fatal one named),
    then a table of the verdicts.

    INPUT is a dataset or any input `forensics ingest` accepts (ingested on the fly).
    Exit code 0 when no chosen policy leaks or crashes, 1 when one does, 2 on bad input.

    A trtllm:/py: policy runs that source's code as you, with your permissions (like `git
    bisect run`): the stand-in namespace is not a sandbox. Use --isolate for code you have not
    read.

    \b
    Example:
      forensics replay crash.ds
      forensics replay crash.ds --verbose | less     # every leak's chain
      forensics replay trace.jsonl --policy prefix-2026 --policy fix-16161 --json
      forensics replay crash.ds --policy trtllm:~/src/TensorRT-LLM#v1.2.0 --isolate
    """
    from replay.isolation import isolate_specs
    from replay.results import results_json
    from replay.streaming import replay_input

    with library_errors():
        chosen = list(policies) or None
        results = replay_input(list(inputs), isolate_specs(chosen) if isolate else chosen,
                               run=run_id)
    status = 1 if any(not r.ok for r in results.values()) else 0
    set_exit_status(status)
    if as_json:
        click.echo(json.dumps(results_json(results), sort_keys=False))
    else:
        _render(Output(quiet), results, verbose)
    if status:
        raise SystemExit(status)
