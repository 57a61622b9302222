"""The ``forensics`` command line: a thin click layer over the library.

Each command lives in its own module below and calls one library function. Errors follow one
contract, applied here for every command (:mod:`forensics.cli.errors`): typed library errors and
faults of the environment are messages with exit code 2, never a traceback unless ``--debug``.

A command's module is imported only when that command runs (or shows its own ``--help``); the
group's ``--help`` reads each command's one-line summary from its module's source. Importing
every command module made ``forensics --help`` load pandas, pyarrow and the simulator (0.9 s).
"""
from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path

import click

from forensics.version import __version__

#: Command modules, each defining ``command`` (a click command) to register.
COMMAND_MODULES = (
    "ingest",
    "summary",
    "bisect",
    "record",
    "postmortem",
    "minimize",
    "export_test",
    "simulate",
    "replay",
    "fleet",
    "identify",
    "sweep",
    "explore",
)


class _LazyCommands(MutableMapping):
    """The group's commands by name; a command's module is imported on first access."""

    def __init__(self, modules: tuple[str, ...]):
        self._module_of = {m.replace("_", "-"): m for m in modules}
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in self._module_of:
                raise KeyError(name)
            module = importlib.import_module(f"forensics.cli.{self._module_of[name]}")
            self._loaded[name] = module.command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._module_of.setdefault(name, "")

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        del self._module_of[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._module_of)

    def __len__(self) -> int:
        return len(self._module_of)

    def short_help(self, name: str, limit: int) -> str:
        """The command's one-line summary, from its module's source when it is not imported:
        ``short_help=`` of ``@click.command`` or the first sentence of its docstring."""
        module = self._module_of.get(name)
        if name not in self._loaded and module:
            text = _source_short_help(Path(__file__).with_name(f"{module}.py"))
            if text is not None:
                return click.utils.make_default_short_help(text, limit)
        return self[name].get_short_help_str(limit)


def _source_short_help(path: Path) -> str | None:
    """``short_help`` (a literal) of the ``command`` function's decorator, else its docstring;
    None when the source does not say (the module is then imported)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "command":
            for dec in node.decorator_list:
                func = dec.func if isinstance(dec, ast.Call) else None
                if getattr(func, "attr", getattr(func, "id", None)) == "command":
                    kws = {kw.arg: kw.value for kw in dec.keywords}
                    if "short_help" in kws or "help" in kws:
                        value = kws.get("short_help", kws.get("help"))
                        return value.value if isinstance(value, ast.Constant) else None
            doc = ast.get_docstring(node)
            return doc.split("\f")[0] if doc else None
    return None


class _LazyGroup(click.Group):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(COMMAND_MODULES)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if names:
            limit = formatter.width - 6 - max(map(len, names))
            with formatter.section("Commands"):
                formatter.write_dl([(n, self.commands.short_help(n, limit)) for n in names])


class ForensicsGroup(_LazyGroup):
    """The command group: every subcommand runs under the error contract."""

    def invoke(self, ctx: click.Context):
        from forensics.cli.errors import invoke_with_contract   # not on the `--help` path

        return invoke_with_contract(super().invoke, ctx)


@click.group(cls=ForensicsGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="forensics")
@click.option("--debug", is_flag=True, envvar="FORENSICS_DEBUG",
              help="Show the traceback of a failure (also FORENSICS_DEBUG=1).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Crash forensics and replay for TensorRT-LLM's attention-DP executor.

    \b
    One command from crash logs to a report:
      forensics postmortem logs/ traces/ -o report
    Step by step:
      forensics ingest logs/ traces/ -o crash.ds     # Parquet dataset, no line lost
      forensics summary crash.ds
      forensics replay crash.ds                      # every catalogue policy
      forensics replay crash.ds --policy trtllm:~/TensorRT-LLM@v1.2.0
    Make more evidence next time:
      forensics record install   # then ADP_FORENSICS_TRACE_DIR=DIR trtllm-serve ...

    \b
    Exit codes: 0 success (postmortem: no leak or crash), 1 postmortem: a leak or crash
    explained, 2 bad input or a fault of the environment (permissions, full or read-only
    disk, interrupt), 3 postmortem: a logged crash not explained, 4 a bug of the tool.
    """
    ctx.meta["forensics.debug"] = debug


def main() -> None:
    cli(prog_name="forensics")
