"""Options every command spells the same way, and the terminal output they share.

- ``--json``: print exactly one JSON object on stdout (nothing else goes to stdout).
- ``-q/--quiet``: no human summary on stdout and no progress on stderr; errors still go to
  stderr and the exit status still gives the verdict. ``--json`` output is not silenced.
- ``--run RUN``: the run to use when a dataset holds several.

Verdict words are :data:`VERDICTS` everywhere (``replay``, ``postmortem``, ``fleet``,
``export-test``, ``simulate``): ``clean``, ``leak``, ``crash``.

Off a terminal nothing is wrapped: rich renders at a width no line reaches and trailing spaces
are stripped, so paths and sentences stay whole in logs and pipes.
"""
from __future__ import annotations

import io
import json
import sys
from typing import Any

import click

#: The verdict words of every command (``ReplayResult.verdict``).
VERDICTS = ("clean", "leak", "crash")
VERDICT_COLOURS = {"clean": "green", "leak": "yellow", "crash": "red"}
#: Width used to render off a terminal: wider than any line, so nothing wraps.
UNWRAPPED_WIDTH = 10_000

json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print exactly one JSON object on stdout.")
quiet_option = click.option("-q", "--quiet", is_flag=True,
                            help="No summary on stdout and no progress on stderr (the exit "
                                 "status still gives the verdict).")
run_option = click.option("--run", "run_id", default=None, metavar="RUN",
                          help="The run to use when the input holds several (see `forensics summary`).")


def verdict_markup(verdict: str) -> str:
    """``[green]clean[/]`` for rich."""
    return f"[{VERDICT_COLOURS.get(verdict, 'white')}]{verdict}[/]"


def echo_json(obj: Any) -> None:
    """The one JSON object of ``--json``."""
    click.echo(json.dumps(obj, indent=2, default=_default))


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "to_json"):
        return o.to_json()
    return str(o)


class Output:
    """Where a command's human summary goes: stdout through rich, silenced by ``-q``.

    On a terminal rich wraps to the terminal's width; elsewhere lines are never wrapped and
    carry no trailing spaces.
    """

    def __init__(self, quiet: bool = False, *, stream=None):
        self.quiet = quiet
        self.stream = stream
        self._tty = bool(getattr(stream or sys.stdout, "isatty", lambda: False)())

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.quiet:
            return
        from rich.console import Console
        kwargs.setdefault("highlight", False)
        if self._tty:
            Console(file=self.stream or sys.stdout, soft_wrap=False).print(*objects, **kwargs)
            return
        buf = io.StringIO()
        Console(file=buf, width=UNWRAPPED_WIDTH, soft_wrap=True, color_system=None,
                force_terminal=False).print(*objects, **kwargs)
        text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
        click.echo(text, file=self.stream)

    def echo(self, text: str = "") -> None:
        """Plain text (no markup)."""
        if not self.quiet:
            click.echo(text, file=self.stream)


def progress_enabled(quiet: bool) -> bool:
    """Progress bars go to stderr, only on a terminal and without ``-q``."""
    return not quiet and sys.stderr.isatty()


class UpperChoice(click.Choice):
    """A choice shown and stored in upper case, accepted in any case (``--log-format v3``)."""

    def __init__(self, choices):
        super().__init__([str(c).upper() for c in choices], case_sensitive=True)

    def convert(self, value, param, ctx):
        return super().convert(str(value).upper(), param, ctx)


__all__ = ["Output", "UpperChoice", "VERDICTS", "echo_json", "json_option", "progress_enabled",
           "quiet_option", "run_option", "verdict_markup"]
