"""``forensics sweep``: a what-if grid simulated and replayed; prevalence per configuration."""
from __future__ import annotations

import json

import click

from forensics.cli.cluster_options import cluster_client, cluster_options
from forensics.cli.errors import library_errors
from forensics.cli.options import OutputPath, cell, json_option, quiet_option
from forensics.errors import ConfigError


def parse_value(text: str):
    """A ``--seeds`` value from the command line: an integer, a float, true/false, else the text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


class GridItem(click.ParamType):
    """``FIELD=V1,V2,...``: a workload field and its values, each checked against the field's
    type (:func:`forensics.what_if.grid_value`) as the option is read, so ``ranks=abc`` or
    ``overlap=maybe`` is a usage error (exit 2) before anything runs."""

    name = "FIELD=V1,V2"

    def convert(self, value, param, ctx):
        from forensics.what_if import grid_value  # pandas: not on the `sweep --help` path

        if isinstance(value, tuple):
            return value
        key, sep, values = str(value).partition("=")
        if not sep or not key.strip() or not values.strip():
            self.fail(f"{value!r}: expected FIELD=V1,V2,...", param, ctx)
        try:
            return key.strip(), tuple(grid_value(key.strip(), v) for v in values.split(","))
        except ConfigError as e:
            self.fail(str(e), param, ctx)


def _render(result) -> None:
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    table = result.configurations
    params = list(result.spec.grid)
    console = Console(highlight=False, soft_wrap=False, width=200)
    console.print(f"Sweep of {cell(result.spec.scenario)}: share of {len(result.spec.seeds)} seed(s) per "
                  f"configuration, {result.spec.iters} iterations each")
    t = Table(header_style="bold")
    for col in (*params, "policy", "runs", "leak", "crash", "near miss", "first crash"):
        t.add_column(col)

    def pct(v: float, colour: str) -> str:
        return f"[{colour}]{v:.0%}[/]" if v else "0%"

    for _, row in table.iterrows():
        first = row["crash_iter_min"]
        t.add_row(*(cell(row[p]) for p in params), cell(row["policy"]), str(row["runs"]),
                  pct(row["leak"], "yellow"), pct(row["crash"], "red"), pct(row["near_miss"], "cyan"),
                  "-" if pd.isna(first) else str(first))
    console.print(t)
    bad = table[table["agrees"] < 1]
    if len(bad):
        click.echo(f"warning: in {len(bad)} configuration(s) the replay disagrees with the "
                   "simulation (a bug: please report it with the spec)", err=True)


@click.command("sweep")
@click.argument("spec_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=str))
@click.option("--scenario", default=None, metavar="NAME",
              help="Scenario whose workload the grid varies (default: nvbug-6438685).")
@click.option("--grid", "grid_items", multiple=True, type=GridItem(), metavar="FIELD=V1,V2",
              help="A workload field and the values to try (repeatable), e.g. ranks=4,8,16.")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Build to run every point under (repeatable; default prefix-2026 and fix-16161).")
@click.option("--seeds", default=None, metavar="N|S1,S2",
              help="Seeds per point and policy: a count (seeds 0..N-1) or a list (default 3).")
@click.option("--iters", type=click.IntRange(min=1), default=None, help="Loop bodies per run (default 300).")
@click.option("-o", "--output", default=None, type=OutputPath(dir_okay=False),
              metavar="FILE", help="Write the per-configuration table to this Parquet file.")
@click.option("--runs", "runs_output", default=None, type=OutputPath(dir_okay=False),
              metavar="FILE", help="Write the per-run table to this Parquet file.")
@json_option
@quiet_option
@cluster_options
def command(spec_file, scenario, grid_items, policies, seeds, iters, output, runs_output, as_json,
            quiet, workers, scheduler) -> None:
    """Simulate a what-if grid: leak, crash and near-miss shares.

    Every combination of the grid's workload parameters, under every policy, with every seed,
    is simulated (forensics simulate) and its trace replayed: one task each on a Dask cluster
    with --workers/--scheduler, else one after the other. SPEC_FILE is a TOML file (format in
    `forensics.sweep`); options override its keys.

    \b
    Example:
      forensics sweep --grid ranks=4,8,16 --grid overlap=true,false --seeds 3 -o sweep.parquet
      forensics sweep sweep.toml --workers 2 --json
    """
    from forensics.cluster import task_bar
    from forensics.what_if import SweepSpec, parse_seeds, sweep

    data: dict = {}
    with library_errors():
        if spec_file is not None:
            import dataclasses
            data = {k: v for k, v in dataclasses.asdict(SweepSpec.from_toml(spec_file)).items()}
        if scenario is not None:
            data["scenario"] = scenario
        if grid_items:
            data["grid"] = {**data.get("grid", {}), **dict(grid_items)}
        if policies:
            data["policies"] = tuple(policies)
        if seeds is not None:
            data["seeds"] = parse_seeds(parse_value(seeds) if "," not in seeds
                                        else [parse_value(s) for s in seeds.split(",")], "--seeds")
        if iters is not None:
            data["iters"] = iters
        spec = SweepSpec(**data)
        with cluster_client(workers, scheduler) as client, \
                task_bar(f"simulating {spec.size} runs", enabled=not quiet) as done:
            result = sweep(spec, client=client, output=output, runs_output=runs_output, done=done)
    if as_json:
        click.echo(json.dumps(result.to_json()))
    elif not quiet:
        _render(result)
