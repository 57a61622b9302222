"""pytest plugin: replay traces that carry expectations, one test item per (trace, policy).

Registered through the ``pytest11`` entry point, so it loads in every pytest session: this module
imports nothing heavy (pandas, pyarrow and the replay are imported when an item runs).

Where traces come from:

- ``pytest --adp-traces DIR`` (repeatable; a file works too): DIR is collected in addition to the
  session's other arguments. A missing DIR is a usage error.
- the ini option ``adp_traces`` (paths relative to the ini file): collected when pytest runs its
  default selection (no file or directory on the command line), and whenever a path given on the
  command line lies inside one of them. A missing directory is only a warning, so a checkout
  without samples does not turn the suite red.

Inside those directories an input is collected when it has expectations
(``forensics.expectations``): ``NAME.expect.toml`` beside ``NAME.jsonl`` (or beside a directory
``NAME/`` of per-rank files, or a dataset directory), or an ``expect`` object in a JSON Lines
trace's run record. The input may be anything ``forensics ingest`` accepts. Items are named
``trace.jsonl::prefix-2026``; a failing item prints what differed and the replay's causal chain
(``ReplayResult.explain()``), not a diff of dicts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from forensics.errors import ForensicsError, NoTraceError

#: The ini option naming trace directories.
INI_OPTION = "adp_traces"
_ROOTS = pytest.StashKey[tuple]()
_JSON_NAMES = (".jsonl", ".ndjson", ".json")
_COMPRESSION = (".gz", ".zst", ".zstd")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("adp-forensics", "replay regression tests over ADP traces")
    group.addoption("--adp-traces", action="append", default=[], metavar="DIR", dest="adp_traces",
                    help="replay every trace in DIR that has expectations (NAME.expect.toml or "
                         "an `expect` object in the run record); repeatable")
    parser.addini(INI_OPTION, type="paths", default=[],
                  help="directories of traces with expectations, replayed in the default run")


def pytest_configure(config: pytest.Config) -> None:
    explicit = []
    for given in config.getoption("adp_traces") or []:
        path = Path(given).resolve()
        if not path.exists():
            raise pytest.UsageError(f"--adp-traces {given}: no such file or directory")
        explicit.append(path)
    configured = []
    for path in config.getini(INI_OPTION):
        path = Path(path).resolve()
        if path.exists():
            configured.append(path)
        else:
            config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"{INI_OPTION}: {path} does not exist; no trace tests from it"), stacklevel=2)
    roots = tuple(dict.fromkeys(explicit + configured))
    config.stash[_ROOTS] = roots
    if not roots:
        return
    default_run = config.args_source != pytest.Config.ArgsSource.ARGS
    wanted = explicit + (configured if default_run else [])
    present = {Path(a.split("::")[0]).resolve() for a in config.args}
    for path in wanted:
        # An argument inside the directory (``--adp-traces tr tr/trace.jsonl::newest``) narrows
        # the selection to it; one containing it already collects it.
        if not any(_inside(path, p) or _inside(p, path) for p in present):
            config.args.append(str(path))
            present.add(path)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _name_is_json(path: Path) -> bool:
    name = path.name.lower()
    for suffix in _COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.endswith(_JSON_NAMES)


def _name_is_input(path: Path) -> bool:
    """Names a directory walk of ``forensics ingest`` picks up (``forensics.readers.kinds``)."""
    from forensics.readers.kinds import recognised
    return recognised(path)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Optional[pytest.Collector]:
    roots = parent.config.stash.get(_ROOTS, ())
    if not roots or not any(_inside(file_path, r) for r in roots):
        return None
    from forensics.expectations import EXPECT_SUFFIX, expect_file_for
    if file_path.name.endswith(EXPECT_SUFFIX):
        # A directory input (per-rank files, a dataset) or an input of an unrecognised name.
        target = file_path.with_name(file_path.name[: -len(EXPECT_SUFFIX)])
        if target.is_dir() or (target.is_file() and not _name_is_input(target)):
            return TraceInput.from_parent(parent, path=target, expect_path=file_path)
        return None
    if not _name_is_input(file_path):
        return None
    expect = expect_file_for(file_path)
    if expect.is_file():
        return TraceInput.from_parent(parent, path=file_path, expect_path=expect)
    if _name_is_json(file_path) and _run_record_has_expect(file_path):
        return TraceInput.from_parent(parent, path=file_path, expect_path=None)
    return None


def _head(path: Path) -> str:
    from forensics.readers.sources import head_bytes
    return head_bytes(path).decode("utf-8", "replace")


def _run_record_has_expect(path: Path) -> bool:
    head = _head(path)
    first = next((line for line in head.splitlines() if line.strip()), "")
    return '"expect"' in first and '"adp-trace"' in first


class TraceInput(pytest.File):
    """One input (a trace file, a per-rank directory, a dataset) with its expectations."""

    def __init__(self, *, expect_path: Optional[Path] = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.expect_path = expect_path
        self._runs: Optional[list[tuple[str, Any]]] = None

    def collect(self):
        from forensics.expectations import load_expect_file, run_record_expectations, toml_available
        try:
            if self.expect_path is not None:
                if not toml_available():  # pragma: no cover - Python 3.10 without tomli
                    yield SkippedExpectations.from_parent(
                        self, name="expect", reason="reading .expect.toml needs Python 3.11 or tomli")
                    return
                expectations = load_expect_file(self.expect_path)
            else:
                expectations = run_record_expectations(_head(self.path), str(self.path)) or []
        except ForensicsError as e:
            yield BadExpectations.from_parent(self, name="expect", error=e)
            return
        for expectation in expectations:
            yield TraceReplay.from_parent(self, name=expectation.policy, expectation=expectation)

    def runs(self) -> list[tuple[str, Any]]:
        """``[(run, RunFrames)]`` of the input, read once for all its items."""
        if self._runs is None:
            from forensics.trace_records import input_tables
            from replay.frames import RunFrames
            runs, frames, requests = input_tables(self.path)
            names = list(dict.fromkeys(str(x) for x in runs.column("run").to_pylist()))
            if not names:
                raise NoTraceError(path=str(self.path))
            self._runs = [(n, RunFrames.from_tables(runs, frames, requests, run=n)) for n in names]
        return self._runs


class ExpectationFailed(AssertionError):
    """A replay did not meet its expectation; carries what the failure report shows."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class TraceReplay(pytest.Item):
    """Replay one input under one policy and check the expectation."""

    def __init__(self, *, expectation: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.expectation = expectation
        if expectation.xfail:
            self.add_marker(pytest.mark.xfail(reason=expectation.xfail, strict=True,
                                              raises=ExpectationFailed))

    def runtest(self) -> None:
        import replay
        from forensics.expectations import Outcome, check
        from replay.resolve import resolve_policy

        policy = resolve_policy(self.expectation.policy)
        runs = self.parent.runs()
        for run, frames in runs:
            result = replay.run(frames, policy=policy)
            outcome = Outcome.of(result, self.expectation.model)
            wrong = check(self.expectation, outcome)
            if wrong:
                raise ExpectationFailed(self._report(run if len(runs) > 1 else None, result,
                                                     outcome, wrong))

    def _report(self, run: Optional[str], result: Any, outcome: Any, wrong: list) -> str:
        where = f" (run {run})" if run else ""
        lines = [f"{self.parent.path.name}{where} under {self.expectation.policy}: the replay does "
                 f"not meet {self.expectation.origin or 'its expectations'}"]
        lines += [f"  {m.describe()}" for m in wrong]
        lines.append("replay: " + _summary(result, outcome))
        chain = _chain(result)
        if chain:
            lines.append("causal chain:")
            lines += [f"  {line}" for text in chain for line in str(text).splitlines()]
        else:
            lines.append("causal chain: none (no dummy leaked and nothing crashed under this policy)")
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, ExpectationFailed):
            return excinfo.value.text
        if isinstance(excinfo.value, ForensicsError):
            return f"{self.parent.path.name}: cannot replay under {self.expectation.policy}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # No domain: pytest -v then prints the node id itself (``tr/trace.jsonl::prefix-2026``),
        # which pastes back; a domain would have its dots turned into ``::``.
        return self.path, None, ""


def _summary(result: Any, outcome: Any) -> str:
    parts = [f"{outcome.num_leaks} leak(s)" if outcome.leak else "no leak"]
    if outcome.first_leak_iter is not None:
        parts.append(f"first at iteration {outcome.first_leak_iter}")
    if result.crash is not None:
        c = result.crash
        parts.append(f"crash at iteration {c.iter} on rank {c.rank} ({c.kind}: {c.message})")
    else:
        parts.append("no crash")
    if getattr(result, "dropped_iters", ()):
        parts.append(f"{len(result.dropped_iters)} iteration(s) not replayable (a rank had no frame)")
    return ", ".join(parts)


def _chain(result: Any) -> list[str]:
    try:
        return list(result.explain())
    except Exception as e:  # an explanation bug must not hide the verdict
        fallback = [f"leak: dummy on rank {x.rank} created at iteration {x.iter_created} survived "
                    f"the skip of iteration {x.iter_skipped} (zero batch on ranks "
                    f"{', '.join(map(str, x.cause_ranks))})" for x in result.leak_records]
        return fallback + [f"(explain() failed: {type(e).__name__}: {e})"]


class BadExpectations(pytest.Item):
    """Stands for an input whose expectations cannot be read: fails with the reason."""

    def __init__(self, *, error: ForensicsError, **kwargs: Any):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise self.error

    def repr_failure(self, excinfo, style=None) -> str:
        return f"{self.parent.path.name}: bad expectations: {self.error}"

    def reportinfo(self):
        return self.path, None, ""


class SkippedExpectations(pytest.Item):  # pragma: no cover - Python 3.10 without tomli
    """Stands for an input whose expectations need a TOML reader that is not installed."""

    def __init__(self, *, reason: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        pytest.skip(self.reason)


__all__ = ["INI_OPTION", "TraceInput", "TraceReplay", "ExpectationFailed"]
