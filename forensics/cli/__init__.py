"""The ``forensics`` command line: a thin click layer over the library.

Each command lives in its own module below and calls one library function; typed library errors
become messages with exit code 2 (bad input).
"""
from __future__ import annotations

import importlib

import click

from forensics import __version__

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
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="forensics")
def cli() -> None:
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
    """


for _name in COMMAND_MODULES:
    cli.add_command(importlib.import_module(f"forensics.cli.{_name}").command)


def main() -> None:
    cli(prog_name="forensics")
