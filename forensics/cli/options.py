"""Options every command spells the same way, and the terminal output they share.

- ``--json``: print exactly one JSON object on stdout (nothing else goes to stdout).
- ``-q/--quiet``: no human summary on stdout and no progress on stderr; errors still go to
  stderr and the exit status still gives the verdict. ``--json`` output is not silenced.
- ``--run RUN``: the run to use when a dataset holds several.

Verdict words are :data:`VERDICTS` everywhere (``replay``, ``postmortem``, ``fleet``,
``export-test``, ``simulate``): ``clean``, ``leak``, ``crash``.

Off a terminal nothing is wrapped: rich renders at a width no line reaches and trailing spaces
are stripped, so paths and sentences stay whole in logs and pipes.

Text from the inputs (a run id, a note, a path, a log line) reaches the terminal only through
:func:`terminal_text`: a control character (``ESC``, ``BEL``, a C1 code) is shown escaped
(``\\x1b``), so a crafted input cannot set the terminal's title, move the cursor or hide a line.
:class:`Output` applies it to every string it prints; renderers apply :func:`cell` to the text
they put in rich tables; error messages get it in :mod:`forensics.cli.errors`.
"""
from __future__ import annotations

import dataclasses
import enum
import io
import json
import os
import re
import sys
from typing import Any

import click

from forensics.output_dir import check_output_location

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
isolate_option = click.option(
    "--isolate", is_flag=True,
    help="Run each trtllm:/py: policy's code in a child process with no network and a "
         "read-only view of the file system (Linux user namespaces via unshare; elsewhere "
         "resource limits and a scratch directory). Without it that code runs as you, like "
         "`git bisect run`.")
run_option = click.option("--run", "run_id", default=None, metavar="RUN",
                          help="The run to use when the input holds several (see `forensics summary`).")


#: Characters a terminal acts on instead of showing: C0 controls but newline and tab, DEL, C1
#: controls, and lone surrogates (undecodable bytes of a path, which no stream can encode).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def terminal_text(text: object) -> str:
    r"""``text`` safe to print to a terminal: each control character escaped as Python writes it.

    >>> terminal_text("run\x1b]0;pwned\x07-1")
    'run\\x1b]0;pwned\\x07-1'
    """
    return _CONTROL.sub(_escape_char, str(text))


def _escape_char(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cell(text: object) -> str:
    """Input text for a rich renderable (a table cell, a title): control characters escaped
    (:func:`terminal_text`) and rich markup escaped (``[red]`` stays literal)."""
    from rich.markup import escape
    return escape(terminal_text(text))


def verdict_markup(verdict: str) -> str:
    """``[green]clean[/]`` for rich."""
    return f"[{VERDICT_COLOURS.get(verdict, 'white')}]{verdict}[/]"


def echo_json(obj: Any) -> None:
    """The one JSON object of ``--json``."""
    click.echo(json.dumps(obj, indent=2, default=_default))


def _default(o):
    """JSON values, never a Python repr: numpy scalars, sets, records (``to_json`` or a
    dataclass's fields), enums (their value), paths (their text)."""
    if hasattr(o, "to_json"):
        return o.to_json()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, enum.Enum):
        return o.value
    return os.fspath(o) if isinstance(o, os.PathLike) else str(o)


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
        """Rich markup or renderables; strings are passed through :func:`terminal_text` (table
        cells holding input text are the renderer's to escape, with :func:`cell`)."""
        if self.quiet:
            return
        from rich.console import Console
        objects = tuple(terminal_text(o) if isinstance(o, str) else o for o in objects)
        kwargs.setdefault("highlight", False)
        if self._tty:
            Console(file=self.stream or sys.stdout, soft_wrap=False).print(*objects, **kwargs)
            return
        buf = io.StringIO()
        Console(file=buf, width=UNWRAPPED_WIDTH, soft_wrap=True, color_system=None,
                force_terminal=False).print(*objects, **kwargs)
        text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
        click.echo(terminal_text(text), file=self.stream)

    def echo(self, text: str = "") -> None:
        """Plain text (no markup)."""
        if not self.quiet:
            click.echo(terminal_text(text), file=self.stream)


def progress_enabled(quiet: bool) -> bool:
    """Progress bars go to stderr, only on a terminal and without ``-q``."""
    return not quiet and sys.stderr.isatty()


class OutputPath(click.Path):
    """An output path (``-o``), refused before any work when it cannot be written
    (:func:`~forensics.output_dir.check_output_location`: a part of it is a file, or its place
    is read-only or not writable). The error names the path as given, with a hint."""

    def __init__(self, *, replaced_beside: bool = False, **kwargs: Any):
        kwargs.setdefault("path_type", str)
        super().__init__(**kwargs)
        self.replaced_beside = replaced_beside

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        # a ForensicsError: exit 2 with path and hint
        check_output_location(value, replaced_beside=self.replaced_beside)
        return value


class UpperChoice(click.Choice):
    """A choice shown and stored in upper case, accepted in any case (``--log-format v3``)."""

    def __init__(self, choices):
        super().__init__([str(c).upper() for c in choices], case_sensitive=True)

    def convert(self, value, param, ctx):
        return super().convert(str(value).upper(), param, ctx)


__all__ = ["Output", "OutputPath", "UpperChoice", "VERDICTS", "cell", "echo_json", "isolate_option", "json_option",
           "progress_enabled", "quiet_option", "run_option", "terminal_text", "verdict_markup"]
