"""``forensics replay``: replay a recorded run under executor versions and find dummy leaks."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors


def _render(results) -> None:
    """A rich table per policy, then the causal chains."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=False, width=120)
    for name, res in results.items():
        verdict = ("[green]ok[/]" if res.ok else
                   "[red]crash[/]" if res.crash is not None else "[yellow]leaks[/]")
        t = Table(title=f"{name}: {verdict}  ({res.policy.title})", title_justify="left",
                  show_header=True, header_style="bold")
        for col in ("what", "iter", "rank", "detail"):
            t.add_column(col)
        for leak in res.leaks:
            t.add_row("leak", f"{leak.iter_created} -> skipped {leak.iter_skipped}", str(leak.rank),
                      f"{leak.role} dummy; zero batch on rank(s) "
                      + ", ".join(str(c) for c in leak.cause_ranks))
        if res.crash is not None:
            c = res.crash
            t.add_row("crash", str(c.iter), str(c.rank), f"{c.kind}: active {c.active} > expected "
                      f"{c.expected}" if c.kind == "assert" else c.message)
        if res.first_divergence is not None:
            d = res.first_divergence
            t.add_row("divergence", str(d.iter), str(d.rank),
                      f"{d.field}: recorded {d.recorded}, replayed {d.replayed}")
        t.add_row("summary", "", "", f"{res.decisions['iter'].nunique()} iterations, "
                  f"{len(res.ledger)} dummies, {len(res.skipped_iters)} fleet-wide skips"
                  + (f", {len(res.dropped_iters)} iterations not replayable" if res.dropped_iters else ""))
        console.print(t)
        for chain in res.explain():
            console.print(f"  - {chain}")
        for note in res.notes:
            console.print(f"  note: {note}")
        console.print()


@click.command("replay")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to replay under (repeatable; default: every catalogue policy).")
@click.option("--run", "run_id", default=None, metavar="RUN",
              help="The run to replay when the input holds several.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def command(inputs, policies, run_id, as_json) -> None:
    """Replay a run under executor versions; find leaked dummies.

    Pads, fleet-wide skips, leaked dummies and the crash, per policy.

    INPUT is a dataset or any input `forensics ingest` accepts (ingested on the fly).
    Exit code 0 when no chosen policy leaks or crashes, 1 when one does, 2 on bad input.

    \b
    Example:
      forensics replay crash.ds
      forensics replay trace.jsonl --policy prefix-2026 --policy fix-16161 --json
    """
    from replay.engine import replay_input
    from replay.results import results_json

    with library_errors():
        results = replay_input(list(inputs), list(policies) or None, run=run_id)
    if as_json:
        click.echo(json.dumps(results_json(results), sort_keys=False))
    else:
        _render(results)
    if any(not r.ok for r in results.values()):
        raise SystemExit(1)
