"""Replay expectations of a trace: what each policy must do with it (leak, crash, where).

A trace becomes a regression test by stating, per policy, what its replay must show. The
expectations live beside the trace in ``NAME.expect.toml`` (``run.jsonl`` -> ``run.expect.toml``,
a per-rank directory ``run/`` -> ``run.expect.toml``) or inside the trace's run record as an
``expect`` object of the same shape::

    # run.expect.toml
    [prefix-2026]
    leak = true            # required: some dummy survives a skipped iteration
    first_leak_iter = 3    # optional: the first iteration whose skip leaked a dummy
    crash_iter = 4         # optional: the run crashes at this iteration ...
    crash_rank = 2         # optional: ... on this rank
    crash = true           # optional: crash or not, without saying where

    [fix-16279]            # a run whose record names no model is replayed per model:
    leak = true            # leak/crash/...: the worst of those replays (what reports show)
    verdict = "leak unless the model is DeepSeek-V4"   # optional: the verdict with its condition
    # model = "deepseek_v4"  # optional: check the replay under this model instead ("other":
                             # a model outside every gate)

    [fix-16161]
    leak = false
    xfail = "why"          # optional: a known, explained disagreement (strict xfail in pytest)

Policy names are anything ``replay.resolve.resolve_policy`` accepts. Unknown keys are refused
(a typo must not turn a check off). This module imports no pandas, so the pytest plugin can use it
at collection time.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from forensics.errors import InputError

#: Suffix of an expectation file beside a trace.
EXPECT_SUFFIX = ".expect.toml"
#: The key of the expectations inside a run record.
RUN_RECORD_KEY = "expect"
#: Suffixes stripped from a trace's name to find its expectation file.
_COMPRESSION = (".gz", ".zst", ".zstd")
_TRACE_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".log", ".txt", ".out", ".err")


class ExpectationError(InputError):
    """An expectation file or ``expect`` object is malformed."""


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What one policy's replay of a trace must show.

    Fields:
        policy: the policy spec (a catalogue name such as ``prefix-2026``).
        leak: some dummy survives a skipped iteration.
        crash: the run crashes (None: not checked, unless ``crash_iter``/``crash_rank`` imply it).
        crash_iter: the iteration of the crash (None: not checked).
        crash_rank: the rank of the crash (None: not checked).
        first_leak_iter: the earliest ``iter_skipped`` among the leaks (None: not checked).
        xfail: the replay is known not to meet this expectation, and why (the pytest plugin marks
            the item as a strict xfail, so it fails again once the replay does meet it).
        verdict: the replay's verdict text, model condition included
            (``ReplayResult.verdict_text``: ``"leak unless the model is DeepSeek-V4"``).
        model: check the replay under this model (``"other"``: outside every gate); only for a
            run whose record names no model (None: the worst replay).
        origin: where the expectation was read (file path), for messages.
    """

    policy: str
    leak: bool
    crash: Optional[bool] = None
    crash_iter: Optional[int] = None
    crash_rank: Optional[int] = None
    first_leak_iter: Optional[int] = None
    xfail: Optional[str] = None
    origin: str = ""
    verdict: Optional[str] = None
    model: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        """The expectation as a TOML/JSON table (only the keys that are checked)."""
        out: dict[str, Any] = {"leak": self.leak}
        for key in ("crash", "crash_iter", "crash_rank", "first_leak_iter", "verdict", "model",
                    "xfail"):
            value = getattr(self, key)
            if key == "crash" and (self.crash_iter is not None or self.crash_rank is not None):
                continue  # implied by where it crashes
            if value is not None:
                out[key] = value
        return out


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A replay result reduced to the terms of an expectation.

    Fields:
        leak: the replay found at least one leak.
        crash: the replay crashed.
        crash_iter, crash_rank: where (None without a crash).
        first_leak_iter: the earliest ``iter_skipped`` among the leaks (None without one).
        num_leaks: how many leaks.
        crash_kind: the replay's crash kind (``assert``, ``dummy_alloc_none``, ...), or None.
        verdict: the verdict text, with its model condition where the model decided it.
    """

    leak: bool
    crash: bool
    crash_iter: Optional[int]
    crash_rank: Optional[int]
    first_leak_iter: Optional[int]
    num_leaks: int
    crash_kind: Optional[str] = None
    verdict: Optional[str] = None

    @classmethod
    def of(cls, result: Any, model: Optional[str] = None) -> "Outcome":
        """From a ``replay`` result (anything with ``leaks`` and ``crash``); ``model``: the
        replay under that model assumption (``"other"``: outside every gate)."""
        text = getattr(result, "verdict_text", None)
        if model is not None and hasattr(result, "under_model"):
            result = result.under_model(None if model == "other" else model)
        leaks = result.leak_records
        crash = result.crash
        return cls(leak=bool(leaks), crash=crash is not None,
                   crash_iter=None if crash is None else int(crash.iter),
                   crash_rank=None if crash is None else int(crash.rank),
                   first_leak_iter=min((int(x.iter_skipped) for x in leaks), default=None),
                   num_leaks=len(leaks),
                   crash_kind=None if crash is None else str(getattr(crash, "kind", "crash")),
                   verdict=text)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One checked key whose replayed value differs from the expected one."""

    key: str
    expected: Any
    actual: Any

    def describe(self) -> str:
        return f"{self.key}: expected {_show(self.expected)}, replay gives {_show(self.actual)}"


def _show(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


_ALLOWED = {"leak": bool, "crash": bool, "crash_iter": int, "crash_rank": int,
            "first_leak_iter": int, "xfail": str, "verdict": str, "model": str}


def parse_expectations(data: Mapping[str, Any], origin: str) -> list[Expectation]:
    """Expectations from a mapping ``{policy: {key: value}}`` (a TOML document or ``expect`` object).

    Raises:
        ExpectationError: naming ``origin`` for a non-table entry, a missing ``leak``, an unknown
            key, a value of the wrong type or contradictory keys.
    """
    if not isinstance(data, Mapping) or not data:
        raise ExpectationError("expectations must be a non-empty table of policies",
                               path=origin, hint="e.g. [prefix-2026]\\nleak = true")
    out = []
    for policy, table in data.items():
        where = f"[{policy}]"
        if not isinstance(table, Mapping):
            raise ExpectationError(f"{where} must be a table of expectations, got {table!r}",
                                   path=origin)
        unknown = sorted(set(table) - set(_ALLOWED))
        if unknown:
            raise ExpectationError(f"{where}: unknown key(s) {', '.join(unknown)}", path=origin,
                                   hint="allowed: " + ", ".join(_ALLOWED))
        for key, value in table.items():
            want = _ALLOWED[key]
            if isinstance(value, bool) != (want is bool) or not isinstance(value, want):
                kind = {bool: "true/false", int: "an integer", str: "a string"}[want]
                raise ExpectationError(f"{where}: {key} must be {kind}, got {value!r}", path=origin)
        if "leak" not in table:
            raise ExpectationError(f"{where}: `leak = true|false` is required", path=origin)
        crash = table.get("crash")
        where_given = "crash_iter" in table or "crash_rank" in table
        if crash is False and where_given:
            raise ExpectationError(f"{where}: crash = false contradicts crash_iter/crash_rank",
                                   path=origin)
        if not table["leak"] and "first_leak_iter" in table:
            raise ExpectationError(f"{where}: leak = false contradicts first_leak_iter", path=origin)
        out.append(Expectation(policy=str(policy), leak=table["leak"],
                               crash=True if where_given else crash,
                               crash_iter=table.get("crash_iter"), crash_rank=table.get("crash_rank"),
                               first_leak_iter=table.get("first_leak_iter"),
                               xfail=table.get("xfail"), origin=origin,
                               verdict=table.get("verdict"), model=table.get("model")))
    return out


def toml_available() -> bool:
    """True when a TOML reader exists (stdlib ``tomllib`` on 3.11+, else ``tomli``)."""
    try:
        import tomllib  # noqa: F401
        return True
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli  # noqa: F401
            return True
        except ModuleNotFoundError:
            return False


def load_expect_file(path: str | os.PathLike) -> list[Expectation]:
    """Read ``NAME.expect.toml``.

    Raises:
        ExpectationError: unreadable, not TOML (with the parser's line) or malformed.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ExpectationError(f"cannot read: {e}", path=str(path)) from None
    if not toml_available():  # pragma: no cover - Python 3.10 without tomli
        raise ExpectationError("reading .toml needs Python 3.11 or the tomli package", path=str(path))
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ExpectationError(f"not valid TOML: {e}", path=str(path)) from None
    return parse_expectations(data, str(path))


def input_stem(path: str | os.PathLike) -> str:
    """The name an input's expectation file is derived from.

    Example:
        >>> [input_stem(p) for p in ("run.jsonl", "run.jsonl.zst", "rank-dir", "x.log.gz")]
        ['run', 'run', 'rank-dir', 'x']
    """
    name = Path(path).name
    low = name.lower()
    for suffix in _COMPRESSION:
        if low.endswith(suffix):
            name, low = name[: -len(suffix)], low[: -len(suffix)]
            break
    for suffix in _TRACE_EXTENSIONS:
        if low.endswith(suffix):
            return name[: -len(suffix)]
    return name


def expect_file_for(path: str | os.PathLike) -> Path:
    """Where the expectations of the input ``path`` live (the file may not exist)."""
    p = Path(path)
    return p.with_name(input_stem(p) + EXPECT_SUFFIX)


def run_record_expectations(head_text: str, origin: str) -> Optional[list[Expectation]]:
    """Expectations from the ``expect`` object of a trace's run record (its first record), or None."""
    from forensics.readers.kinds import first_json_object

    record = first_json_object(head_text)
    if record is None or record.get("kind") != "run" or RUN_RECORD_KEY not in record:
        return None
    return parse_expectations(record[RUN_RECORD_KEY], f"{origin}:1 (run record `expect`)")


def check(expectation: Expectation, outcome: Outcome) -> list[Mismatch]:
    """Every checked key on which the outcome differs from the expectation (empty: it holds)."""
    wrong = []
    if outcome.leak != expectation.leak:
        wrong.append(Mismatch("leak", expectation.leak, outcome.leak))
    if expectation.crash is not None and outcome.crash != expectation.crash:
        wrong.append(Mismatch("crash", expectation.crash, outcome.crash))
    for key in ("crash_iter", "crash_rank", "first_leak_iter", "verdict"):
        want = getattr(expectation, key)
        if want is not None and getattr(outcome, key) != want:
            wrong.append(Mismatch(key, want, getattr(outcome, key)))
    return wrong


def from_outcome(policy: str, outcome: Outcome) -> Expectation:
    """The full expectation a replay outcome satisfies (what to pin in a regression test)."""
    conditional = outcome.verdict if outcome.verdict not in (None, "clean", "leak", "crash") \
        else None
    return Expectation(policy=policy, leak=outcome.leak, crash=outcome.crash,
                       crash_iter=outcome.crash_iter, crash_rank=outcome.crash_rank,
                       first_leak_iter=outcome.first_leak_iter, verdict=conditional)


def to_toml(expectations: Iterable[Expectation], header: str = "") -> str:
    """Render expectations as an ``.expect.toml`` document (policy names quoted as needed)."""
    lines = [f"# {x}" for x in header.splitlines()] if header else []
    for e in expectations:
        if lines:
            lines.append("")
        key = e.policy if all(c.isalnum() or c in "-_" for c in e.policy) else json.dumps(e.policy)
        lines.append(f"[{key}]")
        for k, v in e.as_dict().items():
            lines.append(f"{k} = {json.dumps(v) if isinstance(v, str) else _show(v)}")
    return "\n".join(lines) + "\n"


__all__ = ["EXPECT_SUFFIX", "Expectation", "ExpectationError", "Mismatch", "Outcome",
           "parse_expectations", "load_expect_file", "input_stem", "expect_file_for",
           "run_record_expectations", "check", "from_outcome", "to_toml", "toml_available"]
