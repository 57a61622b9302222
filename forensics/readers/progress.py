"""A progress bar on stderr for long ingests (issue #2 item 9).

Off when stderr is not a terminal (logs, CI, pipes stay clean) or when the user asked for
quiet. The bar counts on-disk bytes, so a compressed input's total is its file size and the
parser's ``progress`` callback (compressed bytes consumed) drives it directly.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO


def _noop(_n: int) -> None:
    return None


@contextlib.contextmanager
def ingest_progress(total_bytes: int, description: str = "ingest", quiet: bool = False, *,
                    stream: TextIO | None = None) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n_bytes)``; draws a rich bar on ``stream`` (stderr) when it is a terminal.

    Example::

        with ingest_progress(os.path.getsize(p), p.name, quiet) as advance:
            for batch in parse_executor_log(p, p.name, progress=advance):
                ...
    """
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if quiet or total_bytes <= 0 or not (isatty and isatty()):
        yield _noop
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    console = Console(file=stream, stderr=stream is sys.stderr)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task(description, total=total_bytes)

        def advance(n: int) -> None:
            bar.advance(task, n)

        yield advance
