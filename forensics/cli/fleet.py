"""``forensics fleet``: one row per run with every policy's leak / crash / near-miss verdict."""
from __future__ import annotations

import json

import click

from forensics.cli.cluster_options import cluster_client, cluster_options
from forensics.cli.errors import BadInput, library_errors, set_exit_status
from forensics.cli.options import Output, OutputPath, cell, quiet_option, run_option


def _known(v) -> bool:
    import pandas as pd
    try:
        return not bool(pd.isna(v))
    except (TypeError, ValueError):
        return True


def _cell(row, policy: str) -> str:
    leak = row[f"{policy}.leak"]
    if not _known(leak):
        return "-"
    if bool(row[f"{policy}.crash"]):
        return f"[red]crash@{row[f'{policy}.crash_iter']}[/]"
    if bool(leak):
        return f"[yellow]leak x{row[f'{policy}.leaks']} @{row[f'{policy}.first_leak_iter']}[/]"
    if bool(row[f"{policy}.near_miss"]):
        return "[cyan]near miss[/]"
    return "[green]clean[/]"


def _render(console: Output, table, policies: list[str]) -> None:
    from rich.table import Table

    escape = cell
    t = Table(title="Fleet: verdict per run and policy (crash@iter, leak xN @first leak iter)",
              title_justify="left", header_style="bold")
    # The same run id from two inputs (a rerun, a copied trace) is told apart by its path.
    runs = [r for r in table["run"] if _known(r)] if "run" in table else []
    with_path = len(set(runs)) < len(runs)
    cols = ["run", *(["input"] if with_path else []), "ranks", "mbs", "cap", "overlap", "iters"]
    for col in cols:
        t.add_column(col)
    for p in policies:
        t.add_column(cell(p))
    for _, row in table.iterrows():
        cells = [escape(str(row["run"] if _known(row["run"]) else row["input"])),
                 *([escape(str(row["input"]))] if with_path else []),
                 *(str(row[c]) if _known(row[c]) else "-"
                   for c in ("ranks", "max_batch_size", "cap", "overlap", "iters"))]
        t.add_row(*cells, *(_cell(row, p) for p in policies))
        if _known(row.get("note")):
            t.add_row(escape(f"  note: {row['note']}"), *([""] * (len(cols) - 1 + len(policies))))
    console.print(t)


@click.command("fleet")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to replay under (repeatable; default: every catalogue policy).")
@run_option
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the table as CSV (one row per run).")
@click.option("-o", "--output", type=OutputPath(), default=None, metavar="FILE",
              help="Also write the table to this Parquet file.")
@cluster_options
@quiet_option
def command(inputs, policies, run_id, as_json, as_csv, output, workers, scheduler, quiet) -> None:
    """Tabulate leaks, crashes and near misses of many runs.

    Replays each run under each policy: leaks, crashes, near misses and time to first leak.

    Each INPUT is one run: a directory of one run's files, a trace file or a dataset.
    Columns are defined in `forensics.fleet`. Exit code 0 when no run leaks or crashes under
    any chosen policy, 1 when one does, 2 on bad input.

    With --workers or --scheduler each run is one Dask task (ingest and replay, reading its
    files where it runs; the files of a big run are ingested in parallel when there are fewer
    runs than workers); the table is the same.

    \b
    Example:
      forensics fleet runs/*/ --policy prefix-2026 --policy fix-16161
      forensics fleet runs/*/ --csv > fleet.csv
      forensics fleet runs/*/ --workers 2 -o fleet.parquet
    """
    from forensics.cluster import task_bar
    from forensics.fleet_table import fleet, fleet_failed, fleet_json, fleet_policies

    if as_json and as_csv:
        raise click.UsageError("--json and --csv are exclusive")
    with library_errors(), cluster_client(workers, scheduler) as client, \
            task_bar("replaying runs", enabled=client is not None) as done:
        table = fleet(list(inputs), list(policies) or None, client=client, output=output,
                      done=done)
    if run_id is not None:
        known = sorted({str(r) for r in table["run"] if _known(r)})
        table = table[table["run"] == run_id].reset_index(drop=True)
        if not len(table):
            raise BadInput(f"no run {run_id!r} in the inputs; runs: {', '.join(known) or 'none'}")
    set_exit_status(1 if fleet_failed(table) else 0)
    if as_json:
        click.echo(json.dumps(fleet_json(table)))
    elif as_csv:
        click.echo(table.to_csv(index=False), nl=False)
    else:
        _render(Output(quiet), table, fleet_policies(table))
    if fleet_failed(table):
        raise SystemExit(1)
