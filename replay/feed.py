"""How the replay gets its input from files: readers installed by the pipeline that feeds it.

The replay library reads ``runs``/``frames``/``requests`` tables (``RunFrames.from_tables``) and
imports nothing from ``forensics``. Reading a trace file, a dataset directory or in-memory trace
records is the forensics pipeline's job: it installs its readers here with :func:`install`
(``forensics/replay_feed.py`` does so when imported). When nothing is installed yet, the first
call looks up the provider module :data:`PROVIDER_MODULE` by name (so ``replay.replay_input(path)``
works whenever the forensics pipeline is importable) and otherwise raises
:class:`~replay.errors.NoReaderError` saying what to install or call instead.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from typing import Any

from replay.errors import NoReaderError

#: The module that installs the forensics pipeline's readers when imported (looked up by name,
#: only when a reader is needed and none was installed).
PROVIDER_MODULE = "forensics.replay_feed"


@dataclasses.dataclass(frozen=True)
class Readers:
    """The installed readers.

    Fields:
        tables_from_records: ``(records, source) -> obj`` with ``runs``, ``frames`` and
            ``requests`` tables (dataset schema) built from in-memory trace records.
        as_dataset: ``(inputs, cache_dir=None) -> dataset`` with ``.path`` and ``.arrow(name)``,
            from a dataset directory or raw inputs.
        frame_kernel: ``() -> entry points or None``: the compiled frame builder
            (``replay.frame_build``), None while it is not built (the numpy path then).
    """

    tables_from_records: Callable[[Iterable[dict], str], Any]
    as_dataset: Callable[..., Any]
    frame_kernel: Callable[[], Any] | None = None


_installed: Readers | None = None


def install(*, tables_from_records: Callable[[Iterable[dict], str], Any],
            as_dataset: Callable[..., Any], frame_kernel: Callable[[], Any] | None = None) -> None:
    """Install the readers the replay uses for records, files and datasets (replaces any), and
    the compiled frame builder when there is one."""
    global _installed
    _installed = Readers(tables_from_records=tables_from_records, as_dataset=as_dataset,
                         frame_kernel=frame_kernel)


def uninstall() -> None:
    """Forget the installed readers (tests)."""
    global _installed
    _installed = None


def readers() -> Readers:
    """The installed readers, looking the provider module up once when none are installed.

    Raises:
        NoReaderError: no reader installed and the provider module cannot be imported.
    """
    if _installed is None:
        try:
            importlib.import_module(PROVIDER_MODULE)
        except ImportError as e:
            raise NoReaderError(
                f"reading trace records, files or datasets needs a reader, and none is installed "
                f"({PROVIDER_MODULE} cannot be imported: {e})",
                hint=("install the forensics pipeline (pip install adp-forensics), call "
                      "replay.feed.install(...), or build frames from tables with "
                      "replay.RunFrames.from_tables(runs, frames, requests)")) from None
    if _installed is None:
        raise NoReaderError(f"{PROVIDER_MODULE} was imported but installed no reader")
    return _installed


def frame_kernel() -> Any | None:
    """The compiled frame builder's entry points (``replay.frame_build``) the pipeline
    installed, or None: none installed, or not built yet (the numpy path is used then)."""
    try:
        got = readers().frame_kernel
    except NoReaderError:
        return None
    return got() if got is not None else None


__all__ = ["PROVIDER_MODULE", "Readers", "frame_kernel", "install", "readers", "uninstall"]
