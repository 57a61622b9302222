"""``forensics explore``: every schedule up to a bound, minimal witness per failure mechanism."""
from __future__ import annotations

import contextlib

import click

from forensics.cli.errors import library_errors
from forensics.cli.options import Output, echo_json, json_option, progress_enabled, quiet_option


def _bools(values: tuple[str, ...], true: str) -> tuple[bool, ...] | None:
    return tuple(dict.fromkeys(v == true for v in values)) or None


@click.command("explore")
@click.option("--policy", "policies", multiple=True, metavar="SPEC",
              help="Policy to explore (repeatable): a catalogue name, trtllm:PATH[@REV] or "
                   "py:...; default: every catalogue entry.")
@click.option("--against", default=None, metavar="SPEC",
              help="Differential mode: report where --policy decides differently from this one.")
@click.option("--ranks", type=click.IntRange(1, 3), default=None,
              help="Largest attention-DP group (default 2).")
@click.option("--requests", type=click.IntRange(1, 4), default=None,
              help="Requests a rank holds at once (default 2).")
@click.option("--iterations", type=click.IntRange(1, 8), default=None,
              help="Iterations per schedule (default 3).")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["disagg", "aggregated"]),
              help="Serving mode (repeatable; default both).")
@click.option("--pp", "pp_sizes", multiple=True, type=click.IntRange(1, 8),
              help="pp_size (repeatable; default 1 and 2).")
@click.option("--overlap", "overlap", multiple=True, type=click.Choice(["on", "off"]),
              help="The overlap loop (repeatable; default both).")
@click.option("--model", "models", multiple=True,
              help="model_arch (repeatable; default every gated model and one outside the gates).")
@click.option("--max-batch-size", "batch_sizes", multiple=True, type=click.IntRange(1, 8),
              help="max_batch_size (repeatable; default 1 and 2).")
@click.option("--cap", "caps", multiple=True, type=click.IntRange(1, 16),
              help="max_num_active_requests (repeatable; default pp_size * max_batch_size).")
@click.option("--dkv", "dkv", multiple=True, type=click.Choice(["on", "off"]),
              help="dkv_enabled (repeatable; default both).")
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Write each witness as a v2 trace DIR/<policy>--<mechanism>.jsonl.")
@click.option("--export-tests", "tests_dir", default=None, type=click.Path(file_okay=False),
              help="Write a standalone pytest per witness into this directory.")
@click.option("--force", is_flag=True, help="Replace files of the same names.")
@json_option
@quiet_option
def command(policies, against, ranks, requests, iterations, modes, pp_sizes, overlap, models,
            batch_sizes, caps, dkv, out_dir, tests_dir, force, as_json, quiet) -> None:
    """Search every small schedule; a minimal witness per failure.

    Enumerates, for every configuration (serving mode, pp_size, overlap, model, max_batch_size,
    cap, dkv), every schedule of abstract request states, arrivals, completions and KV outcomes up
    to the bound, decides it with the replay's step function (real code for trtllm: and py:
    specs), and prints each failure mechanism (leak, wasted capacity, crash, hang in a
    collective) with its smallest schedule, or "no counterexample in N schedules". With
    --against, the witnesses are the first divergences between the two policies. Exit 1 when a
    failure (divergence) is found, 0 when none. See docs/explore.md.

    \b
    Example:
      forensics explore --policy prefix-2026 -o witnesses/ --export-tests tests/explored/
      forensics replay witnesses/prefix-2026--crash-generation-to-complete.jsonl
      forensics explore --policy trtllm:~/src/TensorRT-LLM@000515e --against tolerant-17278
    """
    from replay.explore import DEFAULT_BOUND, Bound, ConfigSpace
    from forensics.exploration import explore_policies

    space = ConfigSpace(**{k: v for k, v in dict(
        disaggregated=_bools(modes, "disagg"), pp_sizes=tuple(pp_sizes) or None,
        overlap=_bools(overlap, "on"), models=tuple(models) or None,
        max_batch_sizes=tuple(batch_sizes) or None, caps=tuple(caps) or None,
        dkv=_bools(dkv, "on")).items()
        if v is not None})
    with library_errors():
        bound = Bound(ranks=ranks or DEFAULT_BOUND.ranks, requests=requests or DEFAULT_BOUND.requests,
                      iterations=iterations or DEFAULT_BOUND.iterations,
                      min_ranks=min(DEFAULT_BOUND.min_ranks, ranks or DEFAULT_BOUND.ranks))
        with _bar(progress_enabled(quiet) and not as_json) as progress:
            run = explore_policies(policies, space, bound, against=against, out_dir=out_dir,
                                   tests_dir=tests_dir, force=force, progress=progress)
    if as_json:
        echo_json(run.to_json())
    else:
        Output(quiet).echo("\n".join(run.summary()))
    raise SystemExit(1 if run.failed else 0)


@contextlib.contextmanager
def _bar(enabled: bool):
    """A ``progress(done, total, schedules)`` bar of configurations on stderr (terminal only)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]explore: configurations"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[schedules]} schedules"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = None

        def progress(done: int, total: int, schedules: int) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task("explore", total=total, schedules=0)
            bar.update(task, completed=done, schedules=schedules)

        yield progress
