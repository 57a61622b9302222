"""Installing the ``.pth`` file that arms the recorder in every Python process of an environment.

Python's ``site`` module executes lines of ``*.pth`` files in site-packages that start with
``import`` at every interpreter start, before any user code -- the way coverage.py measures
subprocesses. That is how MPI workers started by ``trtllm-serve`` (or ``mpirun``/``srun``) get the
hook without a code change. The line checks ``os.environ`` first (``os`` is already imported by
``site``) and imports nothing while ``ADP_FORENSICS_TRACE_DIR`` is unset.
"""
from __future__ import annotations

import dataclasses
import os
import sysconfig
from pathlib import Path

from forensics.errors import InputError
from forensics.record.capture import TRACE_DIR_ENV

#: File name; sorts after ``__editable__*.pth`` so an editable install is importable by then.
PTH_NAME = "adp_forensics_record.pth"


def default_site_dir() -> Path:
    """The environment's pure-Python site-packages (``sysconfig`` ``purelib``)."""
    return Path(sysconfig.get_paths()["purelib"])


def package_root() -> Path:
    """The directory holding the ``forensics`` package (a fallback ``sys.path`` entry)."""
    return Path(__file__).resolve().parents[2]


def pth_line(root: Path | None = None) -> str:
    """The single line of the ``.pth`` file.

    With the variable unset it evaluates one ``os.environ.get`` and stops. With it set, it imports
    ``forensics.record.bootstrap`` (appending ``root`` to ``sys.path`` if the package is not
    importable from this site directory yet) and arms the hook; any failure prints one line to
    stderr and never stops the interpreter.
    """
    root = package_root() if root is None else root
    body = ("try:\n"
            " try:\n"
            "  import forensics.record.bootstrap as b\n"
            " except ImportError:\n"
            f"  import sys; sys.path.append({str(root)!r})\n"
            "  import forensics.record.bootstrap as b\n"
            " b.install()\n"
            "except Exception as e:\n"
            " import sys\n"
            " print('adp-forensics: recorder not installed:', repr(e), file=sys.stderr)\n")
    return f"import os; os.environ.get({TRACE_DIR_ENV!r}) and exec({body!r})\n"


@dataclasses.dataclass(frozen=True)
class InstallStatus:
    """Where the hook stands.

    Fields:
        pth_path: the ``.pth`` file looked at.
        installed: it exists.
        current: its content is the line this version writes.
        trace_dir: ``ADP_FORENSICS_TRACE_DIR`` in this environment (None when unset).
    """

    pth_path: Path
    installed: bool
    current: bool
    trace_dir: str | None


def _site(site_dir: str | os.PathLike | None) -> Path:
    return Path(site_dir) if site_dir is not None else default_site_dir()


def install(site_dir: str | os.PathLike | None = None) -> Path:
    """Write the ``.pth`` file into ``site_dir`` (default: purelib); returns its path."""
    d = _site(site_dir)
    if not d.is_dir():
        raise InputError("not a directory", path=str(d),
                         hint="give an existing site-packages directory with --site-dir")
    path = d / PTH_NAME
    tmp = d / (PTH_NAME + ".tmp")
    try:
        tmp.write_text(pth_line(), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"cannot write the .pth file: {e.strerror or e}", path=str(path),
                         hint="run with write access to site-packages or use --site-dir") from None
    return path


def uninstall(site_dir: str | os.PathLike | None = None) -> Path | None:
    """Remove the ``.pth`` file; returns its path, or None when it was not there."""
    path = _site(site_dir) / PTH_NAME
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InputError(f"cannot remove the .pth file: {e.strerror or e}",
                         path=str(path)) from None
    return path


def status(site_dir: str | os.PathLike | None = None) -> InstallStatus:
    """Whether the ``.pth`` file is installed and current, and whether recording is switched on."""
    path = _site(site_dir) / PTH_NAME
    try:
        content = path.read_text(encoding="utf-8")
    except OSError:
        content = None
    return InstallStatus(pth_path=path, installed=content is not None,
                         current=content == pth_line(),
                         trace_dir=os.environ.get(TRACE_DIR_ENV) or None)
