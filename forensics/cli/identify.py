"""``forensics identify``: which catalogue policy a TensorRT-LLM build behaves like."""
from __future__ import annotations

import dataclasses

import click

from forensics.cli.errors import library_errors, set_exit_status
from forensics.cli.options import Output, echo_json, isolate_option, json_option, quiet_option


@click.command("identify")
@click.argument("spec", metavar="trtllm:PATH[@REV|#REV]")
@click.option("--explore", "by_exploring", is_flag=True,
              help="Compare on every schedule up to a bound (forensics explore's space), not on "
                   "the battery: name the entries with no divergence, or each entry's first one.")
@click.option("--iterations", type=click.IntRange(1, 8), default=None,
              help="With --explore: iterations per schedule (default: explore's).")
@isolate_option
@json_option
@quiet_option
def command(spec: str, by_exploring: bool, iterations: int | None, isolate: bool, as_json: bool,
            quiet: bool) -> None:
    """Which catalogue policy a build's real pad code behaves as.

    Replays a battery of small hand-made traces (one per behaviour the executor's unit tests and
    sources pin) through the build's pad code and through every catalogue policy, and prints,
    behaviour by behaviour, which policies decide as the build does. Exit 0 when one policy
    matches on every behaviour, 1 when none does (the behaviours without a match are listed).
    The build's extracted method bodies run as you, like `git bisect run` runs the tree it
    checks out (the stand-in namespace is not a sandbox); --isolate runs them in a child process
    with no network and a read-only view of the file system. PATH@REV is PATH at REV unless
    PATH@REV is itself an existing path; PATH#REV always means a revision.

    With --explore the comparison runs over every schedule of `forensics explore`'s default
    space and bound (docs/explore.md) in one differential search: it prints the entries that
    agree on every schedule, the one named (the build's own era first), and every other entry's
    first divergence with its minimal witness.

    \b
    Example:
      forensics identify trtllm:~/src/TensorRT-LLM@v1.2.0
      forensics identify trtllm:installed --json
      forensics identify trtllm:~/src/TensorRT-LLM@000515e --explore
    """
    from replay.identify import identify, identify_explore
    from replay.isolation import isolated_policy
    if not spec.startswith("trtllm:"):
        spec = f"trtllm:{spec}"
    with library_errors():
        policy = isolated_policy(spec) if isolate else spec
        if by_exploring:
            from replay.explore import DEFAULT_BOUND, ConfigSpace
            bound = dataclasses.replace(DEFAULT_BOUND, iterations=iterations or DEFAULT_BOUND.iterations)
            result = identify_explore(policy, ConfigSpace(), bound)
        else:
            result = identify(policy)
    set_exit_status(0 if result.ok else 1)
    if as_json:
        echo_json(result.to_json())
    else:
        Output(quiet).echo("\n".join(result.summary()))
    raise SystemExit(0 if result.ok else 1)
