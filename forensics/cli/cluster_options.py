"""``--workers N`` / ``--scheduler ADDRESS``: the Dask options shared by ``fleet``, ``sweep`` and
``postmortem`` (the ``[dask]`` extra; ``forensics.cluster``)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click


def cluster_options(f):
    """Add ``--workers`` and ``--scheduler`` to a command (its ``workers``/``scheduler`` args)."""
    f = click.option("--scheduler", metavar="ADDRESS", default=None,
                     help="Run on an existing Dask cluster: its scheduler address "
                          "(tcp://host:8786) or scheduler file (*.json). Needs the [dask] extra.")(f)
    f = click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Run on a local Dask cluster of N worker processes. Needs the "
                          "[dask] extra.")(f)
    return f


@contextlib.contextmanager
def cluster_client(workers: int | None, scheduler: str | None) -> Iterator[Any]:
    """The client of :func:`forensics.cluster.connect` (None without the options); the cluster
    and its dashboard link are named on stderr."""
    from forensics.cluster import connect

    with connect(workers, scheduler, say=lambda line: click.echo(line, err=True)) as client:
        yield client
