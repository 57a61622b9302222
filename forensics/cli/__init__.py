"""The ``forensics`` command line: a thin click layer over the library.

Each command lives in its own module below and calls one library function. Errors follow one
contract, applied here for every command (:mod:`forensics.cli.errors`): typed library errors and
faults of the environment are messages with exit code 2, never a traceback unless ``--debug``.
"""
from __future__ import annotations

import importlib

import click

from forensics import __version__
from forensics.cli.errors import invoke_with_contract

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
)


class ForensicsGroup(click.Group):
    """The command group: every subcommand runs under the error contract."""

    def invoke(self, ctx: click.Context):
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


for _name in COMMAND_MODULES:
    cli.add_command(importlib.import_module(f"forensics.cli.{_name}").command)


def main() -> None:
    cli(prog_name="forensics")
