"""Running forensics work on a Dask cluster (the optional ``[dask]`` extra), or serially without it.

Nothing here imports Dask at module import time: ``import forensics`` and every command without
``--workers``/``--scheduler`` run exactly as they do without the extra installed.

What travels: tasks get *paths* and policy specs and return small row dicts (or dataset
paths); every worker reads its input files itself, where it runs, so a cluster needs the inputs
on a file system every worker sees (the usual shared file system of a Slurm cluster) and the
scheduler never carries trace data. See ``docs/scale.md``.

- :func:`connect`: a ``Client`` on a new ``LocalCluster`` of processes (``workers=N``) or on an
  existing scheduler (``scheduler=ADDRESS``), or None when neither is given.
- :func:`map_tasks`: run a function over items, as Dask tasks or in this process, results in
  input order, with a completion callback that feeds a progress bar.
- :func:`task_bar`: that progress bar (rich, on stderr, only on a terminal).

The ingest on a cluster, one task per file, is :mod:`forensics.readers.on_cluster`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from forensics.errors import ConfigError

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: How to get Dask; named in the error when ``--workers``/``--scheduler`` is used without it.
DASK_EXTRA = "dask"
INSTALL_HINT = f'pip install "adp-forensics[{DASK_EXTRA}]"   (dask and distributed)'
#: Dask configuration of the clusters :func:`connect` starts (measured on the campaign runs of
#: benchmarks/campaign.py; with Dask's defaults the same tasks cost 1.5x the CPU seconds of a
#: serial run, with these about what it costs):
#:
#: - ``MALLOC_TRIM_THRESHOLD_`` unset: Dask's nanny exports 65536 to every worker so that freed
#:   memory goes back to the OS sooner; setting it switches off glibc's dynamic mmap threshold,
#:   so every large NumPy or Arrow buffer of an ingest or replay is a fresh ``mmap`` whose pages
#:   fault in again (4x the minor page faults, 2.7x the system time).
#: - the statistical profiler off (it samples the task thread's stack every 10 ms) and the
#:   event-loop tick, system and memory monitors at 1-2 s instead of 20-500 ms: an idle
#:   2-worker cluster cost 11 % of a core, 5 % with these; a worker then notices memory
#:   pressure within a second.
#:
#: ``docs/scale.md`` says how to do the same for ``dask worker``.
WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}
#: Seconds to wait for a scheduler named by ``--scheduler``.
CONNECT_TIMEOUT = 10
#: Callback after each finished task: ``(done, total)``.
Done = Callable[[int, int], None]


def dask_available() -> bool:
    """Whether ``dask.distributed`` can be imported (the ``[dask]`` extra is installed)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def in_worker_task() -> bool:
    """Whether this runs inside a Dask worker's task: the cluster already has one worker per
    core, so work there takes one thread (the replay) and reads one file at a time (the
    ingest); more would only contend for the same cores. Never imports Dask itself."""
    if "distributed" not in sys.modules:
        return False
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def require_dask(what: str = "--workers/--scheduler") -> None:
    """Raise a :class:`ConfigError` naming the extra to install when Dask is missing."""
    if not dask_available():
        raise ConfigError(f"{what} needs Dask, which is not installed (the optional "
                          f"[{DASK_EXTRA}] extra)", hint=INSTALL_HINT)


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None, *,
            memory_limit: str | None = None, say: Callable[[str], None] | None = None
            ) -> Iterator[Any]:
    """Yield a ``distributed.Client``, or None when neither ``workers`` nor ``scheduler`` is given.

    Args:
        workers: start a ``LocalCluster`` of this many worker *processes*, one thread each (the
            replay is pure Python and NumPy: threads would share one interpreter lock). It is
            shut down on exit.
        scheduler: the address of a running scheduler (``tcp://host:8786``) or a scheduler
            file (``*.json``, what ``dask scheduler --scheduler-file`` writes); the cluster is
            left running on exit.
        memory_limit: per-worker memory limit of the LocalCluster (``"4GiB"``; default Dask's
            share of the machine).
        say: called once with a line naming the cluster and its dashboard link.

    Raises:
        ConfigError: both given, ``workers`` below 1, or Dask not installed (names the extra).
    """
    if workers is None and scheduler is None:
        yield None
        return
    if workers is not None and scheduler is not None:
        raise ConfigError("--workers and --scheduler are exclusive",
                          hint="--workers N starts a local cluster; --scheduler ADDRESS joins one")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    require_dask()
    import dask
    from distributed import Client, LocalCluster

    # Dask's own start-up chatter goes to the logger; keep the terminal for our output.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        if workers is not None:
            # ":0" picks a free port for the dashboard: several users share a machine.
            # The error of a failed task is raised here with its file and line; the workers'
            # own "Compute Failed" log of it would only repeat it on the terminal.
            environ = dict(os.environ)
            try:
                with dask.config.set(WORKER_CONFIG):
                    cluster = stack.enter_context(LocalCluster(
                        n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", memory_limit=memory_limit or "auto",
                        silence_logs=logging.CRITICAL))
            finally:
                # The nanny exports OMP_NUM_THREADS=1 (and more) into *this* process to spawn
                # the workers; the work done here afterwards (a post-mortem's replay and
                # report) keeps the machine's threads.
                os.environ.clear()
                os.environ.update(environ)
            client = stack.enter_context(Client(cluster))
            what = f"local cluster of {workers} worker process(es)"
        else:
            if str(scheduler).endswith(".json") and not Path(scheduler).is_file():
                # distributed would wait for the file to appear, without a limit
                raise ConfigError("no such scheduler file", path=str(scheduler),
                                  hint="`dask scheduler --scheduler-file FILE` writes it")
            try:
                if str(scheduler).endswith(".json"):
                    client = stack.enter_context(Client(scheduler_file=str(scheduler),
                                                        timeout=CONNECT_TIMEOUT))
                else:
                    client = stack.enter_context(Client(str(scheduler), timeout=CONNECT_TIMEOUT))
            except (OSError, ValueError) as e:  # unreachable, refused, bad address or file
                raise ConfigError(f"cannot reach the Dask scheduler {scheduler}: {e}",
                                  hint="start one with `dask scheduler` (docs/scale.md)") from None
            n = len(client.scheduler_info().get("workers", {}))
            what = f"scheduler {client.scheduler.address} ({n} worker(s))"
        if say is not None:
            link = dashboard_link(client)
            say(f"{what}; dashboard: {link}" if link else what)
        yield client


def dashboard_link(client: Any) -> str | None:
    """The dashboard URL of ``client``'s cluster, or None (no dashboard, e.g. bokeh missing)."""
    try:
        return client.dashboard_link or None
    except Exception:  # the link is a convenience; never fail a run over it
        return None


def map_tasks(fn: Callable[..., Any], items: Sequence[tuple], *, client: Any = None,
              done: Done | None = None, key: str | None = None) -> list[Any]:
    """``[fn(*item) for item in items]``, as Dask tasks on ``client`` or here when it is None.

    Results come back in the order of ``items`` whatever order the tasks finish in; ``done`` is
    called after each one. The first task to fail cancels the rest and its exception is raised
    here (library errors keep their type and message).
    """
    total = len(items)
    if client is None:
        out = []
        for i, item in enumerate(items):
            out.append(fn(*item))
            if done is not None:
                done(i + 1, total)
        return out
    import uuid

    from distributed import as_completed

    name = f"{key or getattr(fn, '__name__', 'task')}-{uuid.uuid4().hex[:8]}"
    # A key of its own per item: two identical items (the same run twice) are two tasks.
    futures = [client.submit(fn, *item, key=f"{name}-{i}") for i, item in enumerate(items)]
    try:
        n = 0
        for _ in as_completed(futures):
            n += 1
            if done is not None:
                done(n, total)
        return client.gather(futures)
    finally:
        client.cancel([f for f in futures if not f.done()])


@contextlib.contextmanager
def task_bar(description: str, *, enabled: bool = True) -> Iterator[Done]:
    """Yield a :data:`Done` callback drawing a rich bar of finished tasks on stderr.

    Off (a no-op callback) when ``enabled`` is false or stderr is not a terminal.
    """
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        yield advance


__all__ = [
    "DASK_EXTRA",
    "INSTALL_HINT",
    "connect",
    "dask_available",
    "dashboard_link",
    "in_worker_task",
    "map_tasks",
    "require_dask",
    "task_bar",
]
