"""``forensics simulate``: write a simulated run's executor log, stats and trace."""
from __future__ import annotations

import contextlib

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import (Output, OutputPath, UpperChoice, echo_json, progress_enabled,
                                   quiet_option)
from forensics.simulate import SCENARIOS, simulate
from forensics.simulate.log_writer import LOG_FORMATS


def _scenario_help() -> str:
    width = max(len(n) for n in SCENARIOS)
    rows = "\n".join(f"  {n:<{width}}  {s.summary.split(':')[0]}" for n, s in SCENARIOS.items())
    return ("Simulate an attention-DP fleet under a policy and write executor.log, stats.jsonl "
            "and trace.jsonl into DIR (same seed, byte-identical files).\n\n"
            "\b\nScenarios (traces/README.md says what each shows):\n" + rows + "\n\n"
            "\b\nExample:\n"
            "  forensics simulate --scenario nvbug-6438685 -o out/\n"
            "  forensics simulate --scenario nvbug-6438685 --policy fix-16161 --log-format V3 -o fixed/")


@click.command("simulate", help=_scenario_help(),
               short_help="Simulate a fleet; write its log, stats and trace.")
@click.option("--scenario", "scenario", required=True, metavar="NAME", help="Scenario name (listed above).")
@click.option("--policy", default=None, metavar="NAME",
              help="Catalogue policy to run (default: the scenario's).")
@click.option("--ranks", type=int, default=None, help="Attention-DP ranks (default: the scenario's).")
@click.option("--iters", type=int, default=None, help="Loop bodies to run (default: the scenario's).")
@click.option("--seed", type=int, default=None, help="Seed of every random draw (default: the scenario's).")
@click.option("--cap", type=int, default=None, help="max_num_active_requests (default: pp * max_batch_size).")
@click.option("--log-format", type=UpperChoice(LOG_FORMATS), default="V4",
              show_default=True, help="Iteration-line variant.")
@click.option("--log-ranks", default="all", show_default=True,
              help="Ranks printing iteration lines: 'all' or e.g. '0' or '0,1,3'.")
@click.option("--launcher", type=click.Choice(["srun", "mpirun"]), default=None,
              help="Wrap every line in a launcher prefix.")
@click.option("--prefix-style", type=click.Choice(["rank", "single", "mpi_rank", "torch"]),
              default="rank", show_default=True,
              help="Logger prefix: [RANK n], none, [MPI_Rank n] or [_torch][RANK n].")
@click.option("--compress", type=click.Choice(["gz", "zst"]), default=None,
              help="Compress every file (advisable for fleet-1h).")
@click.option("-o", "--output", "out_dir", required=True, type=OutputPath(file_okay=False),
              help="Directory to write into.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout.")
@click.option("--force", is_flag=True, help="Replace files of the same names in the directory.")
@quiet_option
def command(scenario, policy, ranks, iters, seed, cap, log_format, log_ranks, launcher, prefix_style,
            compress, out_dir, as_json, force, quiet) -> None:
    with library_errors(), _bar(progress_enabled(quiet)) as progress:
        res = simulate(scenario, out_dir=out_dir, policy=policy, ranks=ranks, iters=iters, seed=seed,
                       cap=cap, log_format=log_format, log_ranks=log_ranks, launcher=launcher, prefix_style=prefix_style,
                       compression=compress, progress=progress, force=force)
    s = res.summary
    if as_json:
        echo_json(res.to_json())
        return
    out = Output(quiet)
    out.echo(f"{res.scenario} under {res.policy} (seed {res.seed}): {s.iters} iterations, "
             f"{res.verdict}")
    if s.crash_iter is not None:
        out.echo(f"  crash: {s.crash_kind} at iter {s.crash_iter} on rank(s) "
                 f"{', '.join(map(str, s.crash_ranks))}")
    out.echo(f"  leaked dummies: {s.leaked_dummies}, skipped iterations: {s.skipped_iters}, "
             f"surplus warnings: {s.surplus_warnings}")
    for role, path in res.files.items():
        out.echo(f"  {role}: {path}")


@contextlib.contextmanager
def _bar(enabled: bool):
    """A ``progress(done, total)`` callback drawing a bar of loop bodies on stderr (terminal only)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]simulate: iterations"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = None

        def progress(done: int, total: int) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task("simulate", total=total)
            # A redraw per loop body would cost more than the body on long runs.
            if done == total or done % max(1, total // 500) == 0:
                bar.update(task, completed=done)

        yield progress
