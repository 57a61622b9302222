"""Running a command as an unprivileged user (``nobody``), for tests of permissions and
read-only installs; these tests run as root here, where no permission is ever refused.

:func:`run_as_nobody` runs ``python ARGS...`` with this interpreter as ``nobody`` and
no writable HOME. This interpreter may live under a directory ``nobody`` cannot enter (pyenv
under ``/root``): then its prefix is bind-mounted read-only at a path ``nobody`` can reach, in
a private mount namespace (``unshare -m``), which is also how a container image's read-only
install looks. :func:`skip_reason` says why that cannot be done here (None when it can).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _reachable_by_nobody(path: Path) -> bool:
    for p in [path, *path.parents]:
        try:
            mode = p.stat().st_mode
        except OSError:
            return False
        if not mode & 0o001:
            return False
    return True


def skip_reason() -> str | None:
    """Why :func:`run_as_nobody` cannot run here, or None."""
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root to drop privileges (setpriv)"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    if not _reachable_by_nobody(Path(sys.prefix)):
        if shutil.which("unshare") is None:
            return "the interpreter is not reachable by nobody and unshare is not installed"
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            return "no mount namespace (unshare -m) to show the interpreter to nobody"
    return None


def run_as_nobody(args: list[str], *, env: dict[str, str], cwd: str | os.PathLike,
                  timeout: float = 600) -> subprocess.CompletedProcess:
    """``python *args`` as nobody, with exactly ``env`` (plus what the interpreter needs)."""
    prefix = Path(sys.prefix)
    real_exe = Path(sys.executable).resolve()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env}
    if _reachable_by_nobody(prefix):
        cmd = ["setpriv", *NOBODY, "env", "-i", *(f"{k}={v}" for k, v in env.items()),
               str(real_exe), *args]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    mount = Path(tempfile.mkdtemp(prefix="forensics-prefix-"))
    os.chmod(mount, 0o755)
    exe = mount / real_exe.relative_to(prefix.resolve())
    env = {**env, "LD_LIBRARY_PATH": str(mount / "lib")}   # libpython's RPATH names /root
    inner = " ".join([
        "mount --bind", _q(prefix), _q(mount), "&&",
        "mount -o remount,bind,ro", _q(mount), "&&",
        "exec setpriv", *NOBODY, "env -i", *(_q(f"{k}={v}") for k, v in env.items()),
        _q(exe), *(_q(a) for a in args)])
    try:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner],
                              cwd=cwd, capture_output=True, text=True, timeout=timeout)
    finally:
        os.rmdir(mount)


def _q(s: object) -> str:
    return "'" + str(s).replace("'", "'\\''") + "'"


def world_readable_tmp(prefix: str) -> Path:
    """A fresh directory under the system temp dir that nobody can enter and write (pytest's
    ``tmp_path`` lives under a directory only root can enter)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(d, 0o777)
    return d
