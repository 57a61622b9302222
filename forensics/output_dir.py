"""Output rules shared by every command that writes (postmortem, ingest, simulate, minimize,
export-test).

- an output is never an input: ``-o`` equal to (or holding) an input file is refused with the
  reason, and a directory input that holds the output leaves the output out of its walk;
- an existing output is replaced only when it is this tool's (a report directory with its
  manifest, a dataset) or with ``force``; anything else is refused, so ``-o logs/`` cannot wipe
  logs;
- each file appears atomically (written beside its target, then renamed), and a rerun into the
  same report directory leaves only what this run wrote (the manifest lists it);
- a report's files are written into a hidden staging directory inside the report directory and
  moved into place only once all are written: a disk that fills (or an interrupt) while the
  report is written leaves the previous report whole, or none, never a report without its
  ``findings.json``; the manifest comes last, and the rerun needs no ``--force``.
"""
from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from forensics.errors import ConfigError, EnvironmentFault

#: The file in a report directory listing what the last run wrote.
MANIFEST = ".forensics-output.json"
#: Prefix of the staging directory a report's files are written into before they are moved
#: into place (``.forensics-staging-PID``); one left by a killed run is removed by the next.
STAGING_PREFIX = ".forensics-staging-"


class OutputError(ConfigError):
    """The output path cannot be used as given (it is an input, or not this tool's)."""


def _resolved(p: str | os.PathLike) -> Path:
    return Path(os.path.abspath(os.fspath(p))).resolve()


def refuse_input_as_output(out: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse ``out`` when it is one of ``inputs`` or lies inside an input *file*'s place.

    An output directory inside an input directory is allowed (the walk leaves it out).
    """
    o = _resolved(out)
    for inp in inputs:
        i = _resolved(inp)
        if i == o:
            raise OutputError("the output is also an input; writing there would replace or "
                              "re-read the input", path=str(out),
                              hint="choose another -o, e.g. a new directory next to the input")
        if i in o.parents and i.is_file():
            raise OutputError("the output lies inside an input file", path=str(out))


def check_output_location(path: str | os.PathLike, *, replaced_beside: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written: a part of the path is a file,
    or the directory that would receive it is read-only or not writable. Errors name ``path``
    as the user gave it. ``replaced_beside``: the output is built beside its path and swapped in
    (a dataset), so an existing one needs its parent writable, not itself.

    Raises:
        OutputError: a part of the path is a regular file.
        EnvironmentFault: the place is not writable (``EACCES``) or read-only (``EROFS``).
    """
    given = os.fspath(path)
    target = Path(os.path.abspath(given))
    existing = target
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing != target and not existing.is_dir():
        raise OutputError(f"{existing} is a file, not a directory, so nothing can be written "
                          "below it", path=given, hint="choose another -o")
    # The directory that receives the new entries: the output itself when it is an existing
    # directory (a report directory), else the nearest existing directory above it.
    place = existing if existing.is_dir() and not (replaced_beside and existing == target) \
        else existing.parent
    try:  # a probe, not os.access: root passes access() where /proc or a full quota refuses
        fd, probe = tempfile.mkstemp(prefix=".forensics-probe-", dir=place)
    except OSError as e:
        fault = EnvironmentFault.from_os_error(e, path=given, name_path=True)
        where = "" if place == target else f" (in {place})"
        raise EnvironmentFault(f"cannot be written{where}: {fault.message}", path=given,
                               errno=fault.errno,
                               hint=fault.hint if e.errno != errno.ENOENT else
                               "that place accepts no new files; choose another -o") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def is_inside(path: str | os.PathLike, directory: str | os.PathLike) -> bool:
    """``path`` is ``directory`` or below it (both resolved)."""
    p, d = _resolved(path), _resolved(directory)
    return p == d or d in p.parents


def refuse_existing(paths: Iterable[str | os.PathLike], *, force: bool) -> None:
    """Refuse to replace files that exist, unless ``force``."""
    if force:
        return
    existing = [str(p) for p in paths if os.path.lexists(p)]
    if existing:
        raise OutputError("exists; refusing to replace it" if len(existing) == 1 else
                          f"{len(existing)} files exist ({', '.join(existing)}); refusing to "
                          "replace them", path=existing[0] if len(existing) == 1 else None,
                          hint="pass --force to replace, or choose another -o")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed onto it when the block succeeds (removed when
    it fails): a reader sees the old file or the new one, never half a file."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as e:  # named as the user's path, not the temporary one beside it
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise EnvironmentFault.from_os_error(e, path=str(target), name_path=True) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def make_dir(path: str | os.PathLike) -> Path:
    """``mkdir -p`` with a typed error for a path that cannot be a directory."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError("exists and is not a directory", path=str(p),
                          hint="choose a directory for -o")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentFault.from_os_error(e, path=str(p)) from None
    return p


class ReportDir:
    """A directory of outputs owned by one command (``postmortem``'s report).

    ``open()`` checks the directory can be used; ``write(name, data)`` puts one file in place
    atomically; ``finish()`` removes what the previous run wrote and this one did not, and
    records this run's files in the manifest. ``keep`` names entries that are this tool's but
    not outputs of the run (the dataset cache); a directory holding every name of ``ours_if``
    but no manifest is a report of an earlier version, whose ``legacy_files`` (glob patterns)
    are the previous run's files.
    """

    def __init__(self, path: str | os.PathLike, *, force: bool = False,
                 keep: Iterable[str] = (), ours_if: Iterable[str] = (),
                 legacy_files: Iterable[str] = ()):
        self.path = Path(path)
        self.force = force
        self.keep = set(keep) | {MANIFEST}
        self.ours_if = tuple(ours_if)
        self.legacy_files = tuple(legacy_files)
        self.written: list[str] = []
        self._previous: list[str] = []

    def open(self) -> "ReportDir":
        p = self.path
        if p.exists() and not p.is_dir():
            raise OutputError("exists and is not a directory", path=str(p),
                              hint="choose a directory for -o")
        if p.is_dir():
            manifest = p / MANIFEST
            if manifest.is_file():
                try:
                    self._previous = [str(n) for n in json.loads(manifest.read_text())["files"]]
                except (ValueError, KeyError, TypeError, OSError):
                    self._previous = []
            else:
                entries = [e.name for e in os.scandir(p) if e.name not in self.keep
                           and not e.name.startswith(STAGING_PREFIX)]
                ours = bool(self.ours_if) and all((p / n).exists() for n in self.ours_if)
                if entries and not ours and not self.force:
                    raise OutputError(
                        f"is not empty and holds no report of this tool ({len(entries)} "
                        "entries); refusing to write into it", path=str(p),
                        hint="choose a new directory for -o, or pass --force to write there anyway")
                if ours:  # a report of an earlier version (no manifest): only its known files
                    self._previous = [n for n in entries
                                      if any(fnmatch.fnmatch(n, g) for g in self.legacy_files)]
        make_dir(p)
        for entry in os.scandir(p):  # left by a killed run
            if entry.name.startswith(STAGING_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
        return self

    @property
    def staging(self) -> Path:
        """Where this run's files wait until :meth:`finish` moves them into place."""
        return self.path / f"{STAGING_PREFIX}{os.getpid()}"

    def write(self, name: str, data: bytes) -> Path:
        """Stage one file; returns the path it will have once :meth:`finish` has run. A failed
        write (a full disk) removes everything staged, leaving the previous report as it was."""
        target = self.path / name
        try:
            self.staging.mkdir(exist_ok=True)
            (self.staging / name).write_bytes(data)
        except BaseException as e:
            self.abort()
            if isinstance(e, OSError):
                raise EnvironmentFault.from_os_error(e, path=str(target), name_path=True) from None
            raise
        self.written.append(name)
        return target

    def abort(self) -> None:
        """Drop what this run staged (the previous report stays)."""
        shutil.rmtree(self.staging, ignore_errors=True)

    def finish(self) -> None:
        """Move this run's files into place, remove the previous run's files this run did not
        write, and record this run's in the manifest (last)."""
        try:
            for name in self.written:
                os.replace(self.staging / name, self.path / name)
        except OSError as e:
            self.abort()
            raise EnvironmentFault.from_os_error(e, path=str(self.path), name_path=True) from None
        self.abort()
        for name in self._previous:
            if name in self.written or name in self.keep or "/" in name or name.startswith(".."):
                continue
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (self.path / name).unlink()
        write_atomic(self.path / MANIFEST,
                     (json.dumps({"files": sorted(self.written)}, indent=1) + "\n").encode())


__all__ = ["MANIFEST", "STAGING_PREFIX", "OutputError", "ReportDir", "atomic_path", "check_output_location",
           "is_inside", "make_dir",
           "refuse_existing", "refuse_input_as_output", "write_atomic"]
