"""The TensorRT-LLM source text the pad step needs: which files, read from a checkout or the
installed package, at a git revision (``trtllm:PATH[@REV]``, ``trtllm:PATH#REV``,
``trtllm:installed``).

Nothing here parses or runs the text; :mod:`replay.trtllm_source` extracts and compiles it.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
from pathlib import Path
from typing import Optional

from replay.errors import PolicyError

#: The executor file, relative to a checkout root.
EXECUTOR_FILE = "tensorrt_llm/_torch/pyexecutor/py_executor.py"
#: Where ``is_request_in_schedulable_state`` lives: a package since 2026, a module before.
SCHEDULER_FILES = ("tensorrt_llm/_torch/pyexecutor/scheduler/scheduler.py",
                   "tensorrt_llm/_torch/pyexecutor/scheduler.py")
#: Where ``expected_num_active_requests`` has been computed over time (the cap, domain doc §5):
#: the executor itself (2025), the request queue (mid 2025), the ADP router (2026).
ROUTER_FILES = ("tensorrt_llm/_torch/pyexecutor/executor_request_queue.py",
                "tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py",
                "tensorrt_llm/_torch/pyexecutor/request_utils.py")
#: Where a public fork (tongyuantongyu/TensorRT-LLM) moved the pad step: loop tasks
#: (``IngestionTask.pad_attention_dp_dummy_request`` reading ``self._ctx.{service,config,state}``).
TASK_FILES = ("tensorrt_llm/_torch/pyexecutor/executor_loop_tasks.py",)
#: Files whose history matters to the pad step (``replay.bisect`` walks commits touching them).
WATCHED_FILES = (EXECUTOR_FILE, *TASK_FILES, *SCHEDULER_FILES, *ROUTER_FILES)
_PACKAGE = "tensorrt_llm"


@dataclasses.dataclass(frozen=True)
class SourceText:
    """The text of the files the pad step needs, at one revision.

    Fields:
        executor: text of ``py_executor.py``.
        scheduler: text of the scheduler module, or None when no candidate file exists.
        label: ``PATH@REV (sha)`` or ``PATH (working tree)``, used in every error and report.
        revision: the full commit id, or "" for a working tree / install.
        routers: text of the :data:`ROUTER_FILES` that exist, by path (read for the cap only).
        tasks: text of the :data:`TASK_FILES` that exist, by path (where a fork moved the pad).
    """

    executor: str
    scheduler: Optional[str]
    label: str
    revision: str = ""
    routers: dict[str, str] = dataclasses.field(default_factory=dict)
    tasks: dict[str, str] = dataclasses.field(default_factory=dict)


# --------------------------------------------------------------------------- locating the source

def locate_installed() -> Path:
    """The directory of the installed ``tensorrt_llm`` package, found without importing it.

    Only the top-level spec is looked up (a submodule's ``find_spec`` would import the parent).
    """
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise PolicyError("tensorrt_llm is not installed in this Python environment",
                          hint="point at a source checkout instead: --policy trtllm:/path/to/"
                               "TensorRT-LLM or trtllm:/path/to/TensorRT-LLM@<git revision>")
    return Path(list(spec.submodule_search_locations)[0])


def _relative_paths(root: Path, relpath: str) -> list[str]:
    """``relpath`` as seen from a checkout root, and as seen from the package directory itself."""
    inside = relpath[len(_PACKAGE) + 1:]
    return [relpath, inside]


def run_git(root: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=False)
    except FileNotFoundError:
        raise PolicyError("git is not installed; a revision (@REV) needs it",
                          hint="drop @REV to read the working tree") from None


def resolve_revision(root: Path, rev: str) -> str:
    """The full commit id of ``rev`` in the checkout at ``root``."""
    out = run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if out.returncode != 0:
        raise PolicyError(f"{root}: unknown git revision {rev!r}",
                          hint="any commit-ish works: a sha, tag or branch of that checkout")
    return out.stdout.strip()


def _read_file(root: Path, relpath: str, sha: str) -> Optional[str]:
    """One file's text at ``sha`` (``git show``) or in the tree; None when absent."""
    for rel in _relative_paths(root, relpath):
        if sha:
            out = run_git(root, "show", f"{sha}:./{rel}")
            if out.returncode == 0:
                return out.stdout
        else:
            path = root / rel
            if path.is_file():
                return path.read_text(encoding="utf-8", errors="replace")
    return None


def read_source(path: str | Path, rev: Optional[str] = None) -> SourceText:
    """Read the executor (and scheduler) source of a checkout or package, at ``rev`` if given."""
    root = Path(path).expanduser()
    if not root.exists():
        raise PolicyError(f"{root}: no such directory",
                          hint="trtllm:PATH wants a TensorRT-LLM checkout or the installed package")
    sha = resolve_revision(root, rev) if rev else ""
    # "@" inside the path itself: the label uses "#", which always means "at revision".
    sep = REV_SEPARATOR if "@" in str(root) else "@"
    if not rev:
        label = f"{root} (working tree" + ("; '@' is part of the path, which exists)"
                                           if "@" in str(root) else ")")
    elif sha.startswith(rev):
        label = f"{root}{sep}{sha[:12]}"
    else:
        label = f"{root}{sep}{rev} ({sha[:12]})"
    executor = _read_file(root, EXECUTOR_FILE, sha)
    if executor is None:
        raise PolicyError(f"{label}: no {EXECUTOR_FILE} here",
                          hint="PATH must be the repository root (or the tensorrt_llm package)")
    scheduler = None
    for relpath in SCHEDULER_FILES:
        scheduler = _read_file(root, relpath, sha)
        if scheduler is not None:
            break
    routers = {rel: text for rel in ROUTER_FILES
               if (text := _read_file(root, rel, sha)) is not None}
    tasks = {rel: text for rel in TASK_FILES if (text := _read_file(root, rel, sha)) is not None}
    return SourceText(executor=executor, scheduler=scheduler, label=label, revision=sha,
                      routers=routers, tasks=tasks)


#: The explicit revision separator: ``trtllm:PATH#REV`` always means PATH at REV.
REV_SEPARATOR = "#"


def parse_spec(spec: str) -> tuple[Optional[str], Optional[str]]:
    """``trtllm:PATH[@REV]`` or ``trtllm:PATH#REV`` → ``(PATH, REV)``; ``trtllm:installed`` →
    ``(None, None)``.

    ``#`` always separates the revision. ``@`` does unless the whole text names an existing
    path: a checkout directory ``dir@HEAD`` is that directory's working tree, never ``dir`` at
    ``HEAD`` (write ``dir@HEAD#REV`` for a revision of it). The label of the source says which
    reading was taken (:func:`read_source`).
    """
    body = spec[len("trtllm:"):] if spec.startswith("trtllm:") else spec
    if not body:
        raise PolicyError(f"policy {spec!r} names no source",
                          hint="trtllm:PATH, trtllm:PATH@REV, trtllm:PATH#REV or trtllm:installed")
    if body == "installed":
        return None, None
    if REV_SEPARATOR in body:
        path, _, rev = body.rpartition(REV_SEPARATOR)
    elif "@" in body and not Path(body).expanduser().exists():
        path, _, rev = body.rpartition("@")
    else:
        path, rev = body, ""
    if not path:
        raise PolicyError(f"policy {spec!r} names a revision but no source",
                          hint="trtllm:PATH#REV or trtllm:installed#REV")
    if path == "installed":
        return "installed", rev or None
    return path, rev or None


def load_source(path: Optional[str | Path], rev: Optional[str] = None) -> SourceText:
    """Read the source of a checkout (``path``), or of the installed package (``path`` None)."""
    if path is None or str(path) == "installed":
        pkg = locate_installed()
        if rev:
            return read_source(pkg.parent, rev)
        return read_source(pkg)
    return read_source(path, rev)
