"""``--isolate``: a ``trtllm:``/``py:`` policy's code run in a child process it cannot write out of.

A ``trtllm:`` replay runs the extracted method bodies of the source, a ``py:`` replay the user's
module, in this process and as this user, like ``git bisect run`` runs the tree it checks out.
The stand-in namespace (no real ``os``, no ``open``) is not a sandbox: a body reaches every class
of the interpreter through ``().__class__.__base__.__subclasses__()`` and from there
``os.system``. :func:`isolated_policy` resolves and runs such a policy in a child process
instead, and only plain data crosses between the two:

* where the platform allows (Linux with unprivileged user namespaces, ``unshare`` from
  util-linux), the child runs in new user, network, mount and pid namespaces: no network (only
  a loopback that is down), every mount of the file system remounted read-only, a private empty
  ``tmpfs`` as its scratch working directory (gone when the child exits), and no process outside
  it that it could signal;
* elsewhere it runs under resource limits (``RLIMIT_FSIZE`` 0: no file gets a byte written;
  ``RLIMIT_NPROC`` 0: no new process for a non-root user; ``RLIMIT_CORE`` 0) in a scratch working
  directory. That is weaker: it cannot hide the file system (a file can still be created empty
  or removed) nor the network; :data:`IsolatedPolicy.isolation` says which one ran.

The parent sends each frame (:class:`~replay.policy.FrameView`) as JSON Lines on the child's
standard input and reads the decision (:class:`~replay.policy.PadOutcome`) back, checked field by
field: nothing the child sends is unpickled or evaluated. The policy's other fields are the
catalogue's (named) or plain values; verdicts are the same as without isolation.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import enum
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import Any, Optional

from replay.catalogue import CATALOGUE
from replay.config import RunConfig
from replay.errors import PolicyError, ReplayError
from replay.policy import FrameView, PadOutcome, Policy
from replay.resolve import CANDIDATE_PREFIX, TRTLLM_PREFIX, resolve_policy
from replay.trtllm_source import SourcePolicy

#: Policy specs whose code runs (``trtllm:``, ``py:``): what ``--isolate`` isolates.
CODE_PREFIXES = (TRTLLM_PREFIX, CANDIDATE_PREFIX)
#: Longest reply line read from the child (a fleet iteration of many ranks is a few KB).
MAX_REPLY = 16 << 20
#: Bytes of the child's stderr kept to explain a child that died.
STDERR_TAIL = 4096
#: The ``unshare`` invocation: new user (mapped to root inside, to remount), network, mount and
#: process-id namespaces (a process outside has no pid inside, so none can be signalled).
UNSHARE = ("unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork")

# mount(2) flags (linux/mount.h)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_RELATIME, _MS_STRICTATIME = 1 << 21, 1 << 24
_OPTION_FLAGS = {"ro": _MS_RDONLY, "nosuid": _MS_NOSUID, "nodev": _MS_NODEV,
                 "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME, "nodiratime": _MS_NODIRATIME,
                 "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}


def runs_code(spec: object) -> bool:
    """``spec`` names a policy whose code runs (``trtllm:...``, ``py:...``)."""
    return isinstance(spec, str) and spec.startswith(CODE_PREFIXES)


def isolate_specs(specs):
    """``specs`` with each ``trtllm:``/``py:`` spec replaced by its :func:`isolated_policy`
    (catalogue names and policies unchanged); None stays None (the whole catalogue)."""
    if specs is None:
        return None
    return [isolated_policy(s) if runs_code(s) else s for s in specs]


@functools.lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether ``unshare`` can make a user, network and mount namespace here (probed once)."""
    if sys.platform != "linux" or shutil.which(UNSHARE[0]) is None:
        return False
    try:
        probe = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


# --------------------------------------------------------------------------- plain data

def frame_to_json(view: FrameView) -> dict[str, Any]:
    """Every field of the frame as JSON (the run configuration as its fields)."""
    d = {f.name: getattr(view, f.name) for f in dataclasses.fields(FrameView)}
    d["requests"] = [list(r) for r in view.requests]
    d["config"] = dataclasses.asdict(view.config)
    return d


def frame_from_json(d: dict[str, Any]) -> FrameView:
    fields = dict(d)
    fields["requests"] = tuple((int(i), int(s), bool(b)) for i, s, b in d["requests"])
    fields["config"] = RunConfig(**d["config"])
    return FrameView(**fields)


def outcome_to_json(o: PadOutcome) -> dict[str, Any]:
    return dataclasses.asdict(o)


def outcome_from_json(d: Any, label: str) -> PadOutcome:
    """A :class:`PadOutcome` from the child's reply, every field type-checked."""
    want = {"padded": bool, "role": str, "alloc_failed": bool, "crash": (str, type(None)),
            "surplus_warning": bool}
    if not isinstance(d, dict) or set(d) != {*want, "warnings"}:
        raise _bad_reply(label, "a pad outcome with unexpected fields")
    for key, kind in want.items():
        if not isinstance(d[key], kind):
            raise _bad_reply(label, f"pad outcome field {key} of type {type(d[key]).__name__}")
    if not isinstance(d["warnings"], list) or not all(isinstance(w, str) for w in d["warnings"]):
        raise _bad_reply(label, "pad outcome warnings that are not text")
    return PadOutcome(padded=d["padded"], role=d["role"], alloc_failed=d["alloc_failed"],
                      crash=d["crash"], surplus_warning=d["surplus_warning"],
                      warnings=tuple(d["warnings"]))


def _bad_reply(label: str, what: str) -> PolicyError:
    return PolicyError(f"{label}: the isolated replay answered {what}",
                       hint="the policy's code wrote to the replay's channel; run it without "
                            "--isolate only if you trust it")


_PRIMITIVE = (str, int, float, bool, type(None))


def describe_policy(policy: Policy) -> dict[str, Any]:
    """A policy's fields as plain data: a value equal to a catalogue policy's field is named by
    that policy (``{"from": NAME}``), any other must be plain (text, numbers, tuples of them)."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(Policy):
        if f.name == "pad_hook":
            continue
        value = getattr(policy, f.name)
        same = next((n for n, p in CATALOGUE.items() if getattr(p, f.name) == value), None)
        if same is not None and not isinstance(value, _PRIMITIVE):
            fields[f.name] = {"from": same}
        elif isinstance(value, _PRIMITIVE) and not isinstance(value, enum.Enum):
            fields[f.name] = {"value": value}
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            fields[f.name] = {"value": list(value), "tuple": True}
        else:
            raise PolicyError(f"{policy.name}: field {f.name} cannot cross to an isolated "
                              "replay (not a catalogue value nor plain data)")
    out = {"fields": fields, "hooked": policy.pad_hook is not None,
           "fleet": getattr(policy.pad_hook, "fleet", None) is not None}
    if isinstance(policy, SourcePolicy):
        out["source_policy"] = {"flags_read": sorted(policy.flags_read),
                                "rollback_probe": policy.rollback_probe is not None}
    return out


def _field_from_json(name: str, d: Any, label: str) -> Any:
    if not isinstance(d, dict):
        raise _bad_reply(label, f"policy field {name} that is not an object")
    if "from" in d:
        if d["from"] not in CATALOGUE:
            raise _bad_reply(label, f"policy field {name} from an unknown policy")
        return getattr(CATALOGUE[d["from"]], name)
    value = d.get("value")
    if d.get("tuple"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad_reply(label, f"policy field {name} that is not a list of text")
        return tuple(value)
    if not isinstance(value, _PRIMITIVE):
        raise _bad_reply(label, f"policy field {name} that is not plain data")
    return value


# --------------------------------------------------------------------------- the parent's side

class _Child:
    """One child process serving one policy: JSON Lines requests and replies."""

    def __init__(self, spec: str):
        self.spec = spec
        self.mode = "namespaces" if namespaces_available() else "rlimits"
        # The scratch directory: a private tmpfs is mounted on it in the child's namespace,
        # the real one stays empty; without namespaces the child works in it.
        self.scratch = tempfile.mkdtemp(prefix="forensics-isolated-")
        argv = [sys.executable, "-m", "replay.isolation", self.mode, self.scratch]
        if self.mode == "namespaces":
            argv = [*UNSHARE, *argv]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONSTARTUP", None)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, start_new_session=True)
        self._tail = b""
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.scratch)

    def _drain(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read(1024), b""):
            self._tail = (self._tail + chunk)[-STDERR_TAIL:]

    def ask(self, request: dict[str, Any]) -> Any:
        """Send one request; the reply's ``result``, or the child's error raised here."""
        with self._lock:
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
                line = self.proc.stdout.readline(MAX_REPLY + 1)
            except (BrokenPipeError, OSError):
                line = b""
        if not line.endswith(b"\n"):
            self.proc.wait(timeout=10) if self.proc.poll() is None and not line else None
            self._reader.join(timeout=2)
            tail = self._tail.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise PolicyError(f"{self.spec}: the isolated replay stopped"
                              + (f" (exit status {self.proc.poll()})" if self.proc.poll() is not None
                                 else " (reply too long)")
                              + (": " + " | ".join(tail) if tail else ""),
                              hint="rerun without --isolate to see the policy's error, if you "
                                   "trust its code")
        try:
            reply = json.loads(line)
        except ValueError:
            raise _bad_reply(self.spec, "a line that is not JSON") from None
        if not isinstance(reply, dict):
            raise _bad_reply(self.spec, "something that is not an object")
        if "error" in reply:
            err = reply["error"]
            if not isinstance(err, dict) or not isinstance(err.get("message"), str):
                raise _bad_reply(self.spec, "a malformed error")
            line_no = err.get("line")
            raise PolicyError(err["message"], path=err.get("path") if isinstance(
                err.get("path"), str) else None, line=line_no if isinstance(line_no, int) and
                not isinstance(line_no, bool) else None,
                hint=err.get("hint") if isinstance(err.get("hint"), str) else None)
        return reply.get("result")

    def close(self) -> None:
        self._finalizer()


def _stop(proc: subprocess.Popen, scratch: str) -> None:
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    shutil.rmtree(scratch, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class IsolatedPolicy(Policy):
    """A ``trtllm:``/``py:`` policy whose code runs in a child process (module docstring).

    Fields (besides :class:`Policy`'s):
        isolation: how the child is confined, for reports (``namespaces: ...`` or ``rlimits: ...``).
        flags_read, rollback_probe: as :class:`~replay.trtllm_source.SourcePolicy`'s.
    """

    isolation: str = ""
    from_source: bool = False
    flags_read: frozenset[str] = frozenset()
    rollback_probe: Optional[Callable[[RunConfig], Optional[bool]]] = dataclasses.field(
        default=None, compare=False, repr=False)

    # A ``trtllm:`` policy behaves as its SourcePolicy (the rollback answered by the child's
    # code), a ``py:`` candidate as the plain Policy it is.
    def rolls_back(self, config: RunConfig) -> bool:
        kind = SourcePolicy if self.from_source else Policy
        return kind.rolls_back(self, config)  # type: ignore[arg-type]

    def model_dependent(self, config: RunConfig) -> tuple[str, ...]:
        kind = SourcePolicy if self.from_source else Policy
        return kind.model_dependent(self, config)  # type: ignore[arg-type]

    def assumptions(self, config: RunConfig) -> list[str]:
        return SourcePolicy.assumptions(self, config) if self.from_source else []  # type: ignore[arg-type]


def isolated_policy(spec: str) -> Policy:
    """Resolve ``spec`` (``trtllm:...`` or ``py:...``) in a confined child process and return a
    policy whose pad decisions the child makes (module docstring). Raises PolicyError as
    :func:`~replay.resolve.resolve_policy` does, the child's errors included."""
    child = _Child(spec)
    desc = child.ask({"op": "resolve", "spec": spec, "cwd": os.getcwd()})
    if not isinstance(desc, dict) or not isinstance(desc.get("fields"), dict):
        raise _bad_reply(spec, "a policy description that is not an object")
    names = {f.name for f in dataclasses.fields(Policy)} - {"pad_hook"}
    if set(desc["fields"]) != names:
        raise _bad_reply(spec, "a policy with unexpected fields")
    fields = {n: _field_from_json(n, d, spec) for n, d in desc["fields"].items()}
    label = fields["name"] if isinstance(fields["name"], str) else spec

    def hook(view: FrameView) -> PadOutcome:
        return outcome_from_json(child.ask({"op": "pad", "frame": frame_to_json(view)}), label)

    def fleet(views: list[FrameView], role_context: Optional[bool] = None) -> list[PadOutcome]:
        out = child.ask({"op": "fleet", "views": [frame_to_json(v) for v in views],
                         "role_context": role_context})
        if not isinstance(out, list) or len(out) != len(views):
            raise _bad_reply(label, "a fleet decision of the wrong length")
        return [outcome_from_json(o, label) for o in out]

    def rolls_back(config: RunConfig) -> Optional[bool]:
        out = child.ask({"op": "rolls_back", "config": dataclasses.asdict(config)})
        if out is not None and not isinstance(out, bool):
            raise _bad_reply(label, "a rollback answer that is not true, false or null")
        return out

    hook.child = child  # type: ignore[attr-defined]  (the child lives as long as the hook)
    if desc.get("fleet"):
        hook.fleet = fleet  # type: ignore[attr-defined]
    src = desc.get("source_policy")
    flags = frozenset(src.get("flags_read", ())) if isinstance(src, dict) else frozenset()
    if not all(isinstance(f, str) for f in flags):
        raise _bad_reply(label, "flags that are not text")
    mode = str(desc.get("isolation", child.mode))
    fields["notes"] = (f"{fields['notes']} | " if fields["notes"] else "") + f"isolated: {mode}"
    return IsolatedPolicy(**fields, pad_hook=hook if desc.get("hooked") else None,
                          isolation=mode, from_source=isinstance(src, dict), flags_read=flags,
                          rollback_probe=rolls_back if isinstance(src, dict)
                          and src.get("rollback_probe") else None)


# --------------------------------------------------------------------------- the child's side

def _mounts() -> list[tuple[str, int]]:
    """Every mount point with the flags a read-only bind remount must keep (mountinfo)."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            parts = line.split()
            point = parts[4].encode("latin-1", "surrogateescape").decode("unicode_escape")
            flags = 0
            for opt in parts[5].split(","):
                flags |= _OPTION_FLAGS.get(opt, 0)
            out.append((point, flags))
    return out


def confine_namespaces(scratch: str) -> str:
    """In the child's new mount namespace: remount every mount read-only, then a private
    ``tmpfs`` on ``scratch`` (an empty directory) as the working directory. Returns what was
    done, for reports."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_void_p]
    # Mount changes stay in this namespace (unshare makes propagation private already).
    libc.mount(None, b"/", None, 1 << 14 | 1 << 18, None)  # MS_REC | MS_PRIVATE
    mounts = _mounts()
    failed = []
    for point, flags in mounts:
        rc = libc.mount(None, os.fsencode(point), None,
                        _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None)
        if rc != 0:
            failed.append(point)
    if "/" in failed:
        raise OSError(ctypes.get_errno(), "cannot remount / read-only")
    private = libc.mount(b"tmpfs", os.fsencode(scratch), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                         b"size=64m,mode=700") == 0
    ro = len(mounts) - len(failed)
    return (f"namespaces: no network, {ro} of {len(mounts)} mounts read-only"
            + (f" (not {', '.join(failed[:3])})" if failed else "")
            + (", a private scratch tmpfs" if private else ""))


def confine_rlimits() -> str:
    """Without namespaces: no byte written to any file, no new process (non-root), no core
    dump; the working directory becomes a scratch directory after the policy is resolved."""
    import resource
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails (EFBIG) instead of killing
    for limit in ("RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC"):
        if hasattr(resource, limit):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(getattr(resource, limit), (0, 0))
    return ("rlimits: no file contents written, no new processes for a non-root user, "
            "scratch working directory (network and file system not hidden)")


def _serve(mode: str, scratch: str) -> int:
    """The child: answer requests on the protocol descriptors until the parent closes them."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the policy's prints go to stderr, never into the channel
    isolation = confine_namespaces(scratch) if mode == "namespaces" else confine_rlimits()
    policy: Optional[Policy] = None

    def reply(obj: dict[str, Any]) -> None:
        proto_out.write((json.dumps(obj) + "\n").encode())
        proto_out.flush()

    os.chdir(scratch)
    for line in proto_in:
        try:
            req = json.loads(line)
            op = req["op"]
            if op == "resolve":
                with contextlib.suppress(OSError):
                    os.chdir(req["cwd"])      # relative paths as the user wrote them
                policy = resolve_policy(req["spec"])
                os.chdir(scratch)
                result: Any = {**describe_policy(policy), "isolation": isolation}
            elif op == "pad":
                result = outcome_to_json(policy.pad_hook(frame_from_json(req["frame"])))
            elif op == "fleet":
                outs = policy.pad_hook.fleet([frame_from_json(v) for v in req["views"]],
                                             role_context=req["role_context"])
                result = [outcome_to_json(o) for o in outs]
            elif op == "rolls_back":
                result = policy.rollback_probe(RunConfig(**req["config"]))
            else:
                raise PolicyError(f"unknown request {op!r}")
            reply({"result": result})
        except ReplayError as e:
            reply({"error": {"message": e.message, "path": e.path, "line": e.line,
                             "hint": e.hint}})
        except Exception as e:  # the policy's code failed outside its pad step
            reply({"error": {"message": f"{type(e).__name__}: {e}", "path": None,
                             "line": None, "hint": None}})
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], sys.argv[2]))
