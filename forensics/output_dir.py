"""Output rules shared by every command that writes (postmortem, ingest, simulate, minimize,
export-test).

- an output is never an input: ``-o`` equal to (or holding) an input file is refused with the
  reason, and a directory input that holds the output leaves the output out of its walk;
- an existing output is replaced only when it is this tool's (a report directory with its
  manifest, a dataset) or with ``force``; anything else is refused, so ``-o logs/`` cannot wipe
  logs;
- each file appears atomically (written beside its target, then renamed), and a rerun into the
  same report directory leaves only what this run wrote (the manifest lists it);
- the manifest, written as soon as the directory is opened, also marks it as this tool's output:
  a directory walk over its parent leaves it out.
"""
from __future__ import annotations

import contextlib
import fnmatch
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from forensics.errors import ConfigError, EnvironmentFault

#: The file in a report directory listing what the last run wrote.
MANIFEST = ".forensics-output.json"


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
                entries = [e.name for e in os.scandir(p) if e.name not in self.keep]
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
        if not (p / MANIFEST).is_file():
            # The manifest marks the directory as this tool's from the start: a directory walk
            # over its parent skips it (forensics.readers.discover), even before the run ends.
            self._write_manifest(self._previous)
        return self

    def _write_manifest(self, files: Iterable[str]) -> None:
        write_atomic(self.path / MANIFEST,
                     (json.dumps({"files": sorted(files)}, indent=1) + "\n").encode())

    def write(self, name: str, data: bytes) -> Path:
        target = self.path / name
        write_atomic(target, data)
        self.written.append(name)
        return target

    def finish(self) -> None:
        """Remove the previous run's files this run did not write; record this run's."""
        for name in self._previous:
            if name in self.written or name in self.keep or "/" in name or name.startswith(".."):
                continue
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (self.path / name).unlink()
        self._write_manifest(self.written)


__all__ = ["MANIFEST", "OutputError", "ReportDir", "atomic_path", "is_inside", "make_dir",
           "refuse_existing", "refuse_input_as_output", "write_atomic"]
