"""``forensics replay``: replay a recorded run under executor versions and find dummy leaks."""
from __future__ import annotations

import json

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import (Output, cell, isolate_option, quiet_option, run_option,
                                   verdict_markup)


def _render(console: Output, results) -> None:
    """A rich table per policy, then the causal chains (the fatal leak first)."""
    from rich.table import Table

    for name, res in results.items():
        verdict = verdict_markup(res.verdict)
        if res.gated is not None:  # the run names no model and the version's gates read it
            verdict += f" ({cell(res.verdict_text)})"
        t = Table(title=f"{cell(name)}: {verdict}  ({cell(res.policy.title)})", title_justify="left",
                  show_header=True, header_style="bold")
        for col in ("what", "iter", "rank", "detail"):
            t.add_column(col)
        for leak in res.leak_records:
            t.add_row("leak", f"{leak.iter_created} -> skipped {leak.iter_skipped}", str(leak.rank),
                      f"{leak.role} dummy; zero batch on rank(s) "
                      + ", ".join(str(c) for c in leak.cause_ranks))
        if res.crash is not None:
            c = res.crash
            t.add_row("crash", str(c.iter), str(c.rank), f"{c.kind}: active {c.active} > expected "
                      f"{c.expected}" if c.kind == "assert" else cell(c.message))
        if res.first_divergence is not None:
            d = res.first_divergence
            t.add_row("divergence", str(d.iter), str(d.rank),
                      cell(f"{d.field}: recorded {d.recorded}, replayed {d.replayed}"))
        # One column of each table: a streamed replay (a long run) reads it from its files.
        iters = res.read_decisions(columns=["iter"])["iter"].nunique()
        dummies = len(res.read_ledger(columns=["dummy"]))
        t.add_row("summary", "", "", f"{iters} iterations, "
                  f"{dummies} dummies, {len(res.skipped_iters)} fleet-wide skips"
                  + (f", {len(res.dropped_iters)} iterations not replayable" if res.dropped_iters else ""))
        console.print(t)
        for chain in res.explain():
            console.echo(f"  - {chain}")
        for note in res.notes:
            console.echo(f"  note: {note}")
        console.echo()


@click.command("replay")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to replay under (repeatable; default: every catalogue policy).")
@run_option
@isolate_option
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@quiet_option
def command(inputs, policies, run_id, isolate, as_json, quiet) -> None:
    """Replay a run under executor versions; find leaked dummies.

    Pads, fleet-wide skips, leaked dummies and the crash, per policy.

    INPUT is a dataset or any input `forensics ingest` accepts (ingested on the fly).
    Exit code 0 when no chosen policy leaks or crashes, 1 when one does, 2 on bad input.

    A trtllm:/py: policy runs that source's code as you, with your permissions (like `git
    bisect run`): the stand-in namespace is not a sandbox. Use --isolate for code you have not
    read.

    \b
    Example:
      forensics replay crash.ds
      forensics replay trace.jsonl --policy prefix-2026 --policy fix-16161 --json
      forensics replay crash.ds --policy trtllm:~/src/TensorRT-LLM#v1.2.0 --isolate
    """
    from replay.engine import replay_input
    from replay.isolation import isolate_specs
    from replay.results import results_json

    with library_errors():
        chosen = list(policies) or None
        results = replay_input(list(inputs), isolate_specs(chosen) if isolate else chosen,
                               run=run_id)
    if as_json:
        click.echo(json.dumps(results_json(results), sort_keys=False))
    else:
        _render(Output(quiet), results)
    if any(not r.ok for r in results.values()):
        raise SystemExit(1)
